/**
 * Which provider analyses videos. Today the embedded local analyzer serves the
 * single analysis model; a remote multimodal model plugs in here by implementing
 * AnalysisProvider (raw JSON text + measured usage) and being chosen from the
 * configuration, without touching the extraction use case.
 */
import type { Config } from '../../config.ts';
import { LocalAnalysisProvider } from './local.ts';
import type { AnalysisProvider } from './types.ts';

export * from './types.ts';

/** `tempFile` gives a fresh temp file path (the composition root passes DATA_DIR's): providers reach files only through what they are given. */
export function createAnalysisProvider(config: Pick<Config, 'ffmpegPath'>, tempFile: (suffix: string) => Promise<string>): AnalysisProvider {
  return new LocalAnalysisProvider({ ffmpegPath: config.ffmpegPath, tempFile });
}
