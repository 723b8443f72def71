/**
 * What a video-analysis provider is. The extraction use case hands a
 * provider one stored video and the caller's prompt; the provider answers with
 * raw text that should be the Extraction JSON (as a multimodal model would) and
 * the usage it measured. The use case parses that text itself: output that does
 * not parse is a billed `409 ANALYSIS_FAILED`, and missing usage keeps the
 * conservative reservation.
 */

/** The video to analyse, with what probing found at upload. */
export interface AnalysisVideo {
  /** Path of the stored bytes (read-only). */
  file: string;
  mimeType: string;
  sizeBytes: number;
  durationSeconds: number;
  width: number | null;
  height: number | null;
  hasAudio: boolean;
}

export interface AnalysisRequest {
  /** The model name the provider is asked for. */
  model: string;
  video: AnalysisVideo;
  /** The caller's prompt, scenario markers removed ('' when none). */
  prompt: string;
  /** The prompt's scenario markers (played by the scenario layer; providers ignore them). */
  scenarios?: ReadonlyArray<{ name: string; args: string[] }>;
}

/** Tokens the provider measured for one analysis. */
export interface AnalysisUsage {
  inputTokens: number;
  outputTokens: number;
}

export interface AnalysisResult {
  /** The provider's answer as text: it should be the JSON of an Extraction's `extraction` object. */
  output: string;
  /** Measured usage; undefined when the provider reported none. */
  usage: AnalysisUsage | undefined;
}

/**
 * How an analysis failed, which decides the money and the identity:
 * - `refused`: certainly no billable work (bad input, provider said no) → release, identity released;
 * - `uncertain`: work may have happened, usage unknown → reservation held, identity uncertain.
 */
export type AnalysisFailure = 'refused' | 'uncertain';

export class AnalysisError extends Error {
  constructor(
    readonly failure: AnalysisFailure,
    message: string,
    /** `refused` because the provider is unavailable (503) rather than rejecting the request (502). */
    readonly unavailable = false,
  ) {
    super(message);
    this.name = 'AnalysisError';
  }
}

export interface AnalysisProvider {
  /** A short name for logs (`local`, or a remote endpoint's name). */
  readonly name: string;
  /**
   * Pre-flight, asked before anything is claimed or reserved (the video not yet
   * opened): false when the provider cannot take work now (a circuit breaker; the
   * scenario layer's `provider-unavailable`), answered 503 PROVIDER_UNAVAILABLE
   * with nothing retained, so the same identity may be retried. Absent: always admitted.
   */
  admit?(request: Omit<AnalysisRequest, 'video'>): boolean;
  /** Analyses one video; rejects with AnalysisError (anything else counts as `uncertain`). */
  analyze(request: AnalysisRequest): Promise<AnalysisResult>;
}
