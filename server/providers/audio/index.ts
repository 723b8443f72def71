/**
 * The embedded audio provider: one provider for the `audio` kind that
 * dispatches on the request's operation — speech and voice_clone to the eSpeak
 * NG speech generator, music to the TypeScript music synthesizer. Output is
 * 16-bit mono WAV (the catalog's `outputFormat`). Deterministic and offline, so
 * an interrupted job is simply run again (resume policy `rerun`).
 */
import fs from 'node:fs/promises';
import { decodePcm } from '../../media/pcm.ts';
import { MediaGenerationError, type GeneratedOutput, type MediaJob, type MediaProvider, type MediaTools } from '../media-types.ts';
import { dominantPitchClass, estimateTempo } from './analysis.ts';
import { planMusic, renderMusic, type CoverTraits, type MusicRequest } from './music.ts';
import { seedOf } from '../random.ts';
import { renderSpeech } from './speech.ts';
import { encodeWav, type MonoPcm } from './wav.ts';

/** Tempo and key of the cover audio (its first minute). */
export async function coverTraits(file: string, ffmpegPath: string): Promise<CoverTraits> {
  const pcm = await decodePcm(ffmpegPath, file, { sampleRate: 16_000, maxSeconds: 60 }).catch(() => undefined);
  if (!pcm || pcm.samples.length === 0) throw new MediaGenerationError('INVALID_REFERENCE', 'The cover audio could not be decoded.');
  return { tempo: estimateTempo(pcm), pitchClass: dominantPitchClass(pcm) };
}

async function music(req: MusicRequest, job: MediaJob<'audio'>, tools: MediaTools): Promise<MonoPcm> {
  const cover = req.coverAudio ? await coverTraits(await tools.assetFile(req.coverAudio), tools.ffmpegPath) : null;
  const plan = planMusic(req, cover);
  return renderMusic(plan, req.durationSeconds, seedOf('render', req.prompt, req.style, req.title, req.seed, job.index));
}

export const localAudioProvider: MediaProvider<'audio'> = {
  name: 'local-audio',
  resume: 'rerun',
  async generate(job, tools): Promise<GeneratedOutput> {
    const request = job.request;
    if (request.mimeType !== 'audio/wav')
      throw new MediaGenerationError('WORKFLOW_UNAVAILABLE', `The local audio generator writes audio/wav, not ${request.mimeType}.`);
    const pcm = request.operation === 'music' ? await music(request, job, tools) : await renderSpeech(request, tools);
    const file = await tools.tempFile('.wav');
    await fs.writeFile(file, encodeWav(pcm));
    return { file, mimeType: 'audio/wav' };
  },
};
