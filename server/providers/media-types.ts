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

/** Everything a provider needs to make one output slot. */
export interface MediaJob {
  taskId: string;
  accountId: string;
  model: string;
  /** The normalized request (see server/domain/media-*.ts). */
  request: Record<string, unknown>;
  /** Slot index and number of slots. */
  index: number;
  slots: number;
}

export interface MediaTools {
  dataDir: string;
  ffmpegPath: string;
  ffprobePath: string;
  /** The stored file of an owned asset (references, source images). */
  assetFile(assetId: string): Promise<string>;
  /** A fresh temp file path under DATA_DIR/tmp. */
  tempFile(suffix: string): Promise<string>;
}

export interface GeneratedOutput {
  /** A file the provider wrote; the worker moves it into the blob store. */
  file: string;
  mimeType: string;
}

export interface MediaProvider {
  readonly name: string;
  readonly resume: ResumePolicy;
  /** Makes the output of one slot, or throws (the slot fails with a sanitized message). */
  generate(job: MediaJob, tools: MediaTools): Promise<GeneratedOutput>;
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
