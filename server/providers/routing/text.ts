/**
 * A text model served by several upstreams (its catalog entry's
 * `deployments:`): each call goes to one deployment chosen by priority and
 * weight (deployments.ts), and moves to the next only when the attempt is
 * known not to have started upstream: a refused connection, or an answer that
 * says nothing was done (408, 429, 500, 503: the upstream text provider's
 * `unavailable`), or a refusal of the deployment's credentials (401, 403).
 * Anything else (a rejection of the request itself, a 502 or 504, a timeout,
 * a broken stream) is the call's outcome: a model that may have run is never
 * asked again elsewhere. Nothing is sent before the first answer arrives, so
 * moving on costs the client nothing.
 */
import { performance } from 'node:perf_hooks';
import type { Config } from '../../config.ts';
import type { CatalogModel } from '../../domain/catalog.ts';
import { chatPromptTokenUpperBound } from '../../tokens.ts';
import { upstreamSecrets } from '../redact.ts';
import { UpstreamTextProvider } from '../text/upstream.ts';
import { ProviderError, type ChatMessage, type TextEvent, type TextGenerationRequest, type TextProvider } from '../text/types.ts';
import {
  anyAvailable,
  breakerOf,
  deploymentsOf,
  nextOf,
  parseDeployments,
  retryAfterSecondsOf,
  tryOrder,
  type Deployment,
  type Deployments,
} from './deployments.ts';

/** The text providers a deployment may name. */
export const TEXT_DEPLOYMENT_PROVIDERS: readonly string[] = ['openai-chat'];

/** One key of one deployment: its provider and the upstream model it asks for. */
interface TextUpstream {
  provider: TextProvider;
  model: string;
}

/** Whether a failed first attempt certainly did nothing upstream (so the next deployment may be asked). */
export function notStarted(error: unknown): boolean {
  if (!(error instanceof ProviderError) || error.failure !== 'refused') return false;
  return error.unavailable || error.status === 401 || error.status === 403;
}

/** Whether a failure says something about the deployment's health (a rejection of the request itself does not). */
function deploymentFault(error: unknown): boolean {
  return !(error instanceof ProviderError && error.failure === 'refused' && !notStarted(error));
}

const seconds = (since: number) => (performance.now() - since) / 1000;

export class RoutedTextProvider implements TextProvider {
  readonly name = 'routed';
  constructor(
    private readonly model: string,
    private readonly deployments: Array<Deployment<TextUpstream>>,
  ) {}

  promptTokenUpperBound(messages: ChatMessage[]): number {
    return chatPromptTokenUpperBound(messages);
  }

  /** Refused (503 before anything is claimed) when every deployment's breaker is open. */
  admit(): boolean {
    return anyAvailable(this.deployments);
  }

  /** Until the first breaker lets a probe through. */
  unavailableFor(): number {
    return retryAfterSecondsOf(this.deployments);
  }

  async *generate(request: TextGenerationRequest): AsyncGenerator<TextEvent> {
    let last: unknown;
    for (const deployment of tryOrder(this.deployments)) {
      if (!deployment.breaker.acquire()) continue;
      const upstream = nextOf(deployment);
      const started = performance.now();
      const events = upstream.provider.generate({ ...request, model: upstream.model })[Symbol.asyncIterator]();
      let first: IteratorResult<TextEvent>;
      try {
        first = await events.next();
      } catch (error) {
        if (deploymentFault(error)) deployment.breaker.failure(seconds(started));
        else deployment.breaker.success(seconds(started));
        if (!notStarted(error)) throw error;
        last = error;
        continue;
      }
      // It answered: from here on this deployment's outcome is the call's, whatever happens.
      deployment.breaker.success(seconds(started));
      if (first.done) return;
      let ended = false;
      try {
        yield first.value;
        for (;;) {
          const next = await events.next();
          if (next.done) return void (ended = true);
          yield next.value;
        }
      } finally {
        // A consumer that left early (a client gone) closes the upstream's stream too.
        if (!ended) await events.return?.();
      }
    }
    if (last) throw last;
    // Every breaker turned open between the admission and now: nothing was sent.
    throw new ProviderError('refused', `Every upstream of ${this.model} is unavailable.`, {
      unavailable: true,
      retryAfterSeconds: retryAfterSecondsOf(this.deployments),
    });
  }
}

/**
 * The routed provider of a text model whose catalog entry lists deployments;
 * undefined for one that lists none. A deployment's URL defaults to
 * TEXT_UPSTREAM_URL and its key to TEXT_UPSTREAM_API_KEY; its upstream model
 * must be named. Its deployments are registered in `registry` (the app's).
 */
export function routedTextProvider(model: CatalogModel, config: Config, registry: Deployments): RoutedTextProvider | undefined {
  const where = `catalog model ${model.id}`;
  const entries = parseDeployments(model.deploymentsEntry, config.upstreamKeys, TEXT_DEPLOYMENT_PROVIDERS, where);
  if (!entries) return undefined;
  const secrets = upstreamSecrets(config);
  const deployments = deploymentsOf(
    entries,
    (entry, key) => {
      const url = entry.url ?? config.textUpstreamUrl;
      if (!url) throw new Error(`${where}: deployment ${entry.id} needs a url (or TEXT_UPSTREAM_URL)`);
      if (!entry.model) throw new Error(`${where}: deployment ${entry.id} needs its upstream model`);
      return { provider: new UpstreamTextProvider({ url, apiKey: key ?? config.textUpstreamApiKey, secrets }), model: entry.model };
    },
    () => breakerOf(config),
  );
  registry.register(model.id, deployments);
  return new RoutedTextProvider(model.id, deployments);
}
