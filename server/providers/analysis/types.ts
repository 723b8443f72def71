/**
 * What a video-analysis provider is (issue 8). The extraction use case hands a
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
  /** Analyses one video; rejects with AnalysisError (anything else counts as `uncertain`). */
  analyze(request: AnalysisRequest): Promise<AnalysisResult>;
}
