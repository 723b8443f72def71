/**
 * A media model served by several upstreams (its catalog entry's
 * `deployments:`), each deployment one provider built by its descriptor, so
 * this layer composes providers and never reaches inside one.
 *
 * Exactly once stays: each output slot is recorded with the deployment asked
 * (`<provider>@<deployment>` in the slot's record) before its request leaves,
 * by the deployment's own provider. A resumed slot goes back to the deployment
 * recorded, which reads its job or holds the task; it is never sent elsewhere.
 * A slot moves to the next deployment only when its attempt is known not to
 * have started upstream (never sent, or answered "not processed" until the
 * provider gave up: UpstreamNotDone; or its credentials refused: 401, 403).
 * An unknown outcome, a refusal of the request itself, a malformed answer are
 * the slot's outcome.
 */
import { performance } from 'node:perf_hooks';
import type { Config } from '../../config.ts';
import type { Catalog, CatalogModel } from '../../domain/catalog.ts';
import {
  MediaGenerationError,
  MediaHoldError,
  type GeneratedOutput,
  type JobRequests,
  type MediaJob,
  type MediaKind,
  type MediaProvider,
  type MediaTools,
  type RemoteCalls,
} from '../media-types.ts';
import type { CommonRemoteOptions, RemoteProviderDescriptor } from '../remote/descriptor.ts';
import { UpstreamNotDone, UpstreamRefusal } from '../remote/http.ts';
import {
  anyAvailable,
  breakerOf,
  retryAfterSecondsOf,
  deploymentsOf,
  nextOf,
  parseDeployments,
  tryOrder,
  type Deployment,
  type Deployments,
} from './deployments.ts';

/** Whether a slot's failed attempt certainly did nothing upstream (so the next deployment may be asked). */
export function slotNotStarted(error: unknown): boolean {
  return error instanceof UpstreamNotDone || (error instanceof UpstreamRefusal && (error.status === 401 || error.status === 403));
}

/** Whether a failure says something about the deployment's health (a refusal of the request itself does not). */
function deploymentFault(error: unknown): boolean {
  return !(error instanceof UpstreamRefusal) || slotNotStarted(error);
}

const seconds = (since: number) => (performance.now() - since) / 1000;

/** The record name of a deployment's slots: its provider, the deployment, the key of its pool. */
const recordName = (provider: string, deployment: string, key: number) => `${provider}@${deployment}#${key}`;

/** The deployment and key a slot's record names, if this model still has them. */
function recorded(
  deployments: Array<Deployment<MediaProvider>>,
  name: string | undefined,
): { deployment: Deployment<MediaProvider>; provider: MediaProvider } | undefined {
  const match = /@([A-Za-z0-9._-]+)#(\d+)$/.exec(name ?? '');
  const deployment = match && deployments.find((d) => d.id === match[1]);
  const provider = deployment?.pool[Number(match![2])];
  return deployment && provider ? { deployment, provider } : undefined;
}

export class RoutedMediaProvider implements MediaProvider {
  readonly name = 'routed';
  // Every deployment's provider resumes by lookup; one that cannot know an outcome holds the task itself.
  readonly resume = 'lookup' as const;
  readonly lane = 'remote' as const;
  constructor(private readonly deployments: Array<Deployment<MediaProvider>>) {}

  /** The preferred deployment's provider: what discovery and voices show. */
  private get primary(): MediaProvider {
    return tryOrder(this.deployments, () => 0)[0]?.pool[0] ?? this.deployments[0]!.pool[0];
  }

  /** Refused (503 before anything is claimed) when every deployment's breaker is open. */
  admit(): boolean {
    return anyAvailable(this.deployments);
  }

  /** Until the first breaker lets a probe through. */
  unavailableFor(): number {
    return retryAfterSecondsOf(this.deployments);
  }

  /** A request any deployment cannot take is refused: the slot may go to any of them. */
  requestProblem(model: string, request: JobRequests[MediaKind]): string | undefined {
    for (const d of this.deployments) {
      const problem = d.pool[0]?.requestProblem?.(model, request);
      if (problem) return problem;
    }
    return undefined;
  }

  voices(model: string): readonly string[] | undefined {
    return this.primary.voices?.(model);
  }

  capabilities(model: string, listed: Record<string, unknown>): Record<string, unknown> {
    return this.primary.capabilities?.(model, listed) ?? listed;
  }

  async generate(job: MediaJob, tools: MediaTools): Promise<GeneratedOutput> {
    const earlier = await tools.remoteCalls.find(job.index);
    if (earlier) {
      // Asked before an interruption: only the deployment recorded may read (or hold) it.
      const asked = recorded(this.deployments, earlier.provider);
      // Held rather than failed: the upstream asked may have made (and charged) it.
      if (!asked)
        throw new MediaHoldError(
          'the upstream asked for this output before the job was interrupted is no longer configured; whether it made (and charged) it cannot be known',
        );
      return this.attempt(asked.deployment, asked.provider, job, tools, tools.remoteCalls);
    }
    let last: unknown;
    for (const deployment of tryOrder(this.deployments)) {
      if (tools.stopping()) break;
      if (!deployment.breaker.acquire()) continue;
      try {
        const provider = nextOf(deployment);
        return await this.attempt(deployment, provider, job, tools, this.freshCalls(tools.remoteCalls, deployment.id, deployment.pool.indexOf(provider)));
      } catch (error) {
        if (!slotNotStarted(error) || tools.stopping()) throw error;
        tools.warn({ slot: job.index, deployment: deployment.id }, 'upstream did not take the request; trying the next deployment');
        last = error;
      }
    }
    throw last ?? new MediaGenerationError('GENERATION_FAILED', 'every upstream of this model is unavailable');
  }

  /** One deployment's attempt at the slot, counted by its breaker. */
  private async attempt(
    deployment: Deployment<MediaProvider>,
    provider: MediaProvider,
    job: MediaJob,
    tools: MediaTools,
    remoteCalls: RemoteCalls,
  ): Promise<GeneratedOutput> {
    const started = performance.now();
    try {
      const output = await provider.generate(job, { ...tools, remoteCalls });
      deployment.breaker.success(seconds(started));
      return output;
    } catch (error) {
      if (tools.stopping()) deployment.breaker.release();
      else if (deploymentFault(error)) deployment.breaker.failure(seconds(started));
      else deployment.breaker.success(seconds(started));
      throw error;
    }
  }

  /**
   * The slot's record as a new attempt sees it: nothing was asked (the slot had
   * no record when this run began, and every attempt since is known not to have
   * started) until this deployment records its own call, under its own name.
   */
  private freshCalls(calls: RemoteCalls, deployment: string, key: number): RemoteCalls {
    let called = false;
    return {
      find: async (idx) => (called ? calls.find(idx) : undefined),
      calling: async (idx, provider) => {
        called = true;
        await calls.calling(idx, recordName(provider, deployment, key));
      },
      created: (idx, upstreamId) => calls.created(idx, upstreamId),
    };
  }
}

/**
 * The routed provider of a media model whose catalog entry lists deployments;
 * undefined for one that lists none. Each deployment is checked as a model
 * naming that provider would be (its kind, its settings), naming the model.
 * Its deployments are registered in `registry` (the app's or the worker's).
 */
export function routedMediaProvider(
  model: CatalogModel,
  context: { config: Config; catalog: Catalog; common: CommonRemoteOptions; where: string },
  providers: readonly RemoteProviderDescriptor[],
  check: (descriptor: RemoteProviderDescriptor, model: CatalogModel, where: string) => void,
  registry: Deployments,
): RoutedMediaProvider | undefined {
  const { config, where } = context;
  const usable = providers.filter((d) => d.deployment);
  const entries = parseDeployments(
    model.deploymentsEntry,
    config.upstreamKeys,
    usable.map((d) => d.name),
    where,
  );
  if (!entries) return undefined;
  const deployments = deploymentsOf(
    entries,
    (entry, key) => {
      const descriptor = usable.find((d) => d.name === entry.provider) as RemoteProviderDescriptor;
      const at = `${where}, deployment ${entry.id}`;
      check(descriptor, model, at);
      const settings = descriptor.deployment!(model, config, { url: entry.url, key, model: entry.model, entry: entry.raw[entry.provider] });
      return descriptor.create(settings.model, { ...context, config: settings.config, where: at });
    },
    () => breakerOf(config),
  );
  registry.register(model.id, deployments);
  return new RoutedMediaProvider(deployments);
}
