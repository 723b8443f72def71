/**
 * `gemforge admin providers`: which upstreams serve each catalog model, and,
 * read from running processes' `/metrics`, how each deployment is doing
 * (breaker state, calls, errors, mean latency). Which breakers some process
 * holds open is shared through the database (`shared`: open until when);
 * calls, errors and latency live in the processes that call the upstreams (an
 * API, a worker), so that part is scraped from each one named with `--metrics`.
 */
import type { Config } from '../config.ts';
import type { Db } from '../storage/db.ts';
import { openBreakers } from '../storage/breakers.ts';
import { loadCatalog } from '../domain/catalog.ts';
import { PROVIDER_NAMES } from '../providers/remote/index.ts';
import { parseDeployments } from '../providers/routing/deployments.ts';
import { TEXT_DEPLOYMENT_PROVIDERS } from '../providers/routing/text.ts';

/** One deployment as a process's /metrics shows it. */
interface Live {
  source: string;
  state?: 'closed' | 'open' | 'half-open';
  calls?: number;
  errors?: number;
  meanLatencySeconds?: number;
}

const STATES = ['closed', 'open', 'half-open'] as const;
const SERIES =
  /^gemforge_upstream_(breaker_state|deployment_calls_total|deployment_errors_total|deployment_seconds_total)\{model="([^"]*)",deployment="([^"]*)",provider="[^"]*"\} (\S+)$/;

/** The deployments' series of one exposition, by "model deployment". */
export function liveOf(exposition: string, source: string): Map<string, Live> {
  const out = new Map<string, Live & { seconds?: number }>();
  for (const line of exposition.split('\n')) {
    const m = SERIES.exec(line);
    if (!m) continue;
    const [, series, model, deployment, raw] = m;
    const key = `${model} ${deployment}`;
    const live = out.get(key) ?? { source };
    const value = Number(raw);
    if (series === 'breaker_state') live.state = STATES[value] ?? 'closed';
    else if (series === 'deployment_calls_total') live.calls = value;
    else if (series === 'deployment_errors_total') live.errors = value;
    else live.seconds = value;
    out.set(key, live);
  }
  for (const live of out.values()) {
    if (live.calls && live.seconds !== undefined) live.meanLatencySeconds = Math.round((live.seconds / live.calls) * 1000) / 1000;
    delete live.seconds;
  }
  return out;
}

/** A deployment's breaker as the processes share it: open until when, or closed. */
function sharedOf(openedUntil: number | undefined, now: Date): { state: 'open'; openUntil: string; retryInSeconds: number } | { state: 'closed' } {
  if (openedUntil === undefined) return { state: 'closed' };
  return { state: 'open', openUntil: new Date(openedUntil).toISOString(), retryInSeconds: Math.ceil((openedUntil - now.getTime()) / 1000) };
}

/** Reads one process's /metrics (with METRICS_TOKEN when set). */
async function scrape(url: string, token: string | undefined): Promise<string> {
  const res = await fetch(url, { headers: token ? { authorization: `Bearer ${token}` } : {}, signal: AbortSignal.timeout(5000) });
  if (!res.ok) throw new Error(`${url} answered HTTP ${res.status}`);
  return res.text();
}

/** The catalog's upstreams per model, with what each `metrics` URL reports of its deployments. */
export async function describeProviders(config: Config, metrics: string[], db?: Db): Promise<unknown> {
  const catalog = loadCatalog(config.catalogPath, PROVIDER_NAMES);
  const now = new Date();
  const open = new Map((db ? await openBreakers(db, now) : []).map((b) => [`${b.model} ${b.deployment}`, b.openedUntil]));
  const live = await Promise.all(metrics.map(async (url) => liveOf(await scrape(url, config.metricsToken), url)));
  return catalog.models.map((model) => {
    const where = `catalog model ${model.id}`;
    const names = model.kind === 'text' ? TEXT_DEPLOYMENT_PROVIDERS : PROVIDER_NAMES.filter((n) => n !== 'local');
    const entries = parseDeployments(model.deploymentsEntry, config.upstreamKeys, names, where);
    if (!entries) return { model: model.id, kind: model.kind, provider: model.provider ?? 'local' };
    return {
      model: model.id,
      kind: model.kind,
      deployments: entries.map((e) => ({
        id: e.id,
        provider: e.provider,
        ...(e.url && { url: e.url }),
        ...(e.model && { upstreamModel: e.model }),
        priority: e.priority,
        weight: e.weight,
        keys: e.keys.length,
        ...(db && { shared: sharedOf(open.get(`${model.id} ${e.id}`), now) }),
        ...(metrics.length > 0 && { live: live.flatMap((m) => m.get(`${model.id} ${e.id}`) ?? []) }),
      })),
    };
  });
}
