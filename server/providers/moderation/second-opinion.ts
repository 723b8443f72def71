/**
 * Two providers in turn (`MODERATION_MODE=both`): what the embedded policy
 * refuses is refused at once, and what it passes is asked of the remote
 * endpoint too, which refuses what it flags and judges what the embedded
 * policy could not (another language). While the endpoint fails,
 * `MODERATION_REMOTE_FALLBACK` decides: `closed` lets its error stand (503/502,
 * nothing decided), `open` lets the embedded verdict stand. `remote` mode with
 * `open` is the same with the embedded verdict kept only for that case. Each
 * fallback is counted where the composition root says (`RemoteFallbacks`, which
 * it hands /metrics too).
 */
import { ModerationUnavailableError, type ModerationProvider } from './types.ts';

export type RemoteFallback = 'closed' | 'open';

/** Times the remote endpoint failed, by mode and fallback (`both open`, `remote closed`, …): one app's. */
export class RemoteFallbacks {
  readonly counts = new Map<string, number>();

  inc(mode: string, fallback: RemoteFallback): void {
    const key = `${mode} ${fallback}`;
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }
}

/**
 * `embedded` first, then `remote` for what it passes (`mode` both), or `remote` first with
 * `embedded` only while the endpoint fails (`mode` remote). Each fallback is counted in `fallbacks`.
 */
export function withRemote(
  embedded: ModerationProvider,
  remote: ModerationProvider,
  mode: 'remote' | 'both',
  fallback: RemoteFallback,
  fallbacks: RemoteFallbacks,
): ModerationProvider {
  const name = mode === 'both' ? `${embedded.name}+${remote.name}` : remote.name;
  return {
    name,
    async moderate(input) {
      const first = mode === 'both' ? await embedded.moderate(input) : undefined;
      if (first?.flagged) return first;
      try {
        const second = await remote.moderate(input);
        // The endpoint judged every text, those the embedded policy could not read too.
        return { provider: second.flagged ? remote.name : name, flagged: second.flagged };
      } catch (error) {
        if (!(error instanceof ModerationUnavailableError)) throw error;
        fallbacks.inc(mode, fallback);
        if (fallback === 'closed') throw error;
        return first ?? (await embedded.moderate(input));
      }
    },
  };
}
