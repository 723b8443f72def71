/**
 * The media provider interface: one per kind (image, video, audio), the
 * embedded local generators by default, remote providers beside them.
 */

/**
 * How a job interrupted by a crash may continue (the worker honours it):
 * - `rerun`: running again is safe and costs nothing extra (local generators).
 * - `lookup`: the provider can find its own earlier job (a remote provider's job id).
 * - `never`: the outcome cannot be known; the task stays `processing` with its
 *   reservation held until an operator settles it (`gemforge admin task settle`).
 */
export type ResumePolicy = 'rerun' | 'lookup' | 'never';

/**
 * The job payloads: the normalized request of each kind, built once at submission
 * (server/domain/media-*.ts), stored on the task, and read by the worker and the
 * provider of that kind. One type per kind, shared by all three.
 */
export interface ImageJobRequest {
  prompt: string;
  negativePrompt: string | null;
  ratio: string;
  resolution: string;
  width: number;
  height: number;
  outputCount: number;
  background: 'auto' | 'transparent' | 'opaque';
  variant: string;
  style: string | null;
  outputFormat: 'png' | 'jpeg' | 'webp';
  mimeType: string;
  magicPrompt: boolean;
  seed: number | null;
  sourceImage: string | null;
  referenceImages: string[];
}

export interface VideoJobRequest {
  prompt: string;
  mode: 'text-to-video' | 'image-to-video';
  duration: number;
  ratio: string;
  resolution: string;
  width: number;
  height: number;
  fps: number;
  audio: boolean;
  seed: number | null;
  sourceImage: string | null;
  endFrame: string | null;
  referenceVideos: string[];
  referenceAudios: string[];
  referenceImages: string[];
  mimeType: string;
}

/** What the speech generator needs of a voice, resolved at submission. */
export interface SpeechVoice {
  id: string;
  source: 'catalog' | 'upload';
  language: string | null;
  traits: Record<string, unknown>;
  /** The uploaded reference recording (voice_clone), to measure what the stored traits lack. */
  blobSha256: string | null;
}

export interface SpeechJobRequest {
  operation: 'speech' | 'voice_clone';
  text: string;
  voice: SpeechVoice;
  speed: number;
  volume: number;
  temperature: number;
  seed: number | null;
  mimeType: string;
}

export interface MusicJobRequest {
  operation: 'music';
  prompt: string;
  musicMode: 'simple' | 'advanced';
  instrumental: 'on' | 'off';
  style: string | null;
  title: string | null;
  negativeTags: string | null;
  vocalGender: 'auto' | 'm' | 'f';
  durationSeconds: number;
  coverAudio: string | null;
  seed: number | null;
  mimeType: string;
}

/** The payload of each media kind. */
export interface JobRequests {
  image: ImageJobRequest;
  video: VideoJobRequest;
  audio: SpeechJobRequest | MusicJobRequest;
}

export type MediaKind = keyof JobRequests;

/** Everything a provider of kind `K` needs to make one output slot. */
export interface MediaJob<K extends MediaKind = MediaKind> {
  taskId: string;
  accountId: string;
  model: string;
  kind: K;
  /** The normalized request of its kind. */
  request: JobRequests[K];
  /** Slot index and number of slots. */
  index: number;
  slots: number;
  /** The task's scenario markers (played by the scenario layer; providers ignore them). */
  scenarios: ReadonlyArray<{ name: string; args: string[] }>;
}

/** A remote provider's record of what it asked upstream for one slot (server/storage/remote-calls.ts). */
export interface RemoteCallRecord {
  state: 'calling' | 'created';
  upstreamId: string | null;
  /** Who was asked: the provider's name (`<provider>@<deployment>` for a model with several upstreams). */
  provider?: string;
}

/** The slot records of one task, for remote providers (exactly once at the upstream). */
export interface RemoteCalls {
  find(idx: number): Promise<RemoteCallRecord | undefined>;
  /** Before sending a request that may create work upstream. */
  calling(idx: number, provider: string): Promise<void>;
  /** Once the upstream named its job: a resumed run looks it up instead of creating another. */
  created(idx: number, upstreamId: string): Promise<void>;
}

/** Where remote providers' errors are counted, by provider and kind (retried, refused, lost, unavailable). */
export interface UpstreamErrorCounter {
  inc(event: { provider: string; kind: string }): void;
}

export interface MediaTools {
  dataDir: string;
  ffmpegPath: string;
  ffprobePath: string;
  /** The stored file of an owned asset (references, source images). */
  assetFile(assetId: string): Promise<string>;
  /**
   * A signed link under `PUBLIC_BASE_URL` to an owned asset, for an upstream to
   * fetch; undefined when the asset is not the account's any more. Absent when
   * the worker has no public base URL (or no signer).
   */
  assetLink?(assetId: string): Promise<string | undefined>;
  /** A stored blob as a local file (a temp copy when blobs live in object storage, removed by `release`); undefined when the store does not hold it. */
  blobFile(sha256: string): Promise<{ path: string; release(): Promise<void> } | undefined>;
  /** A fresh temp file path under DATA_DIR/tmp. */
  tempFile(suffix: string): Promise<string>;
  remoteCalls: RemoteCalls;
  /** Counts remote providers' errors for /metrics (the process's one counter, given at the composition root); absent, nothing is counted. */
  upstreamErrors?: UpstreamErrorCounter;
  /** Logs a provider event with the task and slot (never a key or an upstream answer's body). */
  warn(details: Record<string, unknown>, message: string): void;
  /** True once the worker is stopping or lost the job: long waits end early, the job is left for recovery. */
  stopping(): boolean;
  /** Aborted when `stopping()` turns true: requests and body reads take it, so a stuck read ends at a stop. */
  signal?: AbortSignal;
}

/**
 * One output: a file the provider wrote (the worker copies it into the blob
 * store and removes it), or bytes already in memory (an image that came back
 * base64-encoded: stored without a temp file).
 */
export type GeneratedOutput = { file: string; mimeType: string } | { bytes: Buffer; mimeType: string };

export interface MediaProvider<K extends MediaKind = MediaKind> {
  readonly name: string;
  readonly resume: ResumePolicy;
  /** `remote`: I/O-bound, run by the worker's remote lane (many at once). Default `local`. */
  readonly lane?: 'local' | 'remote';
  /** The resume policy of one job, where it differs from `resume` (the scenario layer's `unresumable`). */
  resumeFor?(job: Pick<MediaJob<K>, 'scenarios'>): ResumePolicy;
  /** Makes the output of one slot, or throws (the slot fails with a sanitized message). */
  generate(job: MediaJob<K>, tools: MediaTools): Promise<GeneratedOutput>;

  // Submission hooks: asked by the submission use case, before anything is claimed or
  // reserved, of the provider that will run the model's jobs. Every one is optional;
  // absent, the answer is the ordinary one. The scenario layer implements them all.

  /**
   * Pre-flight: false when the provider cannot take work now (a remote provider's
   * circuit breaker, the scenario `provider-unavailable`): 503 PROVIDER_UNAVAILABLE,
   * nothing retained, the same identity may be retried. Default: true.
   */
  admit?(submission: MediaSubmission): boolean;
  /** After `admit` refused: seconds until it may take work again (the 503's Retry-After; a breaker's cooldown). Default: the error mapping's. */
  unavailableFor?(): number | undefined;
  /**
   * Of owned, ready reference assets, the first the provider cannot use yet (its
   * own copy still being ingested; the scenario `references-processing`): 409
   * REFERENCES_PROCESSING, nothing reserved. Default: none.
   */
  referencePending?(submission: MediaSubmission, assetIds: string[]): string | undefined;
  /** The output slots it makes for `outputCount` requested outputs; the quote is split over them (default: as many). */
  slots?(submission: MediaSubmission, outputCount: number): number;
  /**
   * Whether the outcome of dispatching this submission can be known. `lost` (the
   * scenario `uncertain`): the identity is claimed and the Gems reserved, but no
   * task is made; the reservation stays held and every replay answers 409
   * REQUEST_UNCERTAIN. Default: `known`.
   */
  dispatchOutcome?(submission: MediaSubmission): 'known' | 'lost';
  /**
   * What this provider's upstream cannot do for a prepared request (a transparent
   * background, a voice it has no counterpart for, a prompt longer than it takes):
   * 422 INVALID_REQUEST naming the model, before anything is reserved. Default: nothing.
   */
  requestProblem?(model: string, request: JobRequests[K]): string | undefined;
  /** The catalog voice IDs a speech model can speak with here; undefined: not restricted. */
  voices?(model: string): readonly string[] | undefined;
  /**
   * What discovery lists for the model: the catalog's capabilities as this
   * provider's upstream really takes and makes them (what it cannot do left out,
   * what it changes named). Default: the catalog's, as they are.
   */
  capabilities?(model: string, listed: Record<string, unknown>): Record<string, unknown>;
}

/** A media submission as its provider's submission hooks see it (the markers are the scenario layer's; providers ignore them). */
export type MediaSubmission = Pick<MediaJob, 'model' | 'kind' | 'scenarios'>;

/**
 * The media providers by kind, handed to the worker at the composition root,
 * and the remote providers of the models that name one (`byModel`).
 */
export type MediaProviders = { [K in MediaKind]?: MediaProvider<K> } & { byModel?: Record<string, MediaProvider> };

/** The provider that makes a model's outputs: its own when it names one, else its kind's. */
export function providerOf(providers: MediaProviders, model: string, kind: MediaKind): MediaProvider | undefined {
  return providers.byModel?.[model] ?? providers[kind];
}

/**
 * The provider cannot know how its upstream request ended (a crash or a
 * deadline while a creating request was in flight, with no way to look it up):
 * the task stays `processing` with its reservation held until an operator
 * settles it (`gemforge admin task settle`), rather than paying twice.
 */
export class MediaHoldError extends Error {
  override name = 'MediaHoldError';
}

/** The task is cancelled before any output (its message is safe): it ends `cancelled`, nothing charged. */
export class MediaCancelledError extends Error {
  override name = 'MediaCancelledError';
}

/** A failure the provider wants shown to the client (its message is safe). */
export class MediaGenerationError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}
