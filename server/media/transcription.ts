/**
 * Transcription providers for voice uploads. The spec requires that the upload
 * "transcribes the recording, and transcription must succeed". The embedded
 * default cannot recognise words; it decides whether there is speech at all
 * (vad.ts) and succeeds with an empty transcript when there is. An
 * OpenAI-compatible `/v1/audio/transcriptions` endpoint (TRANSCRIPTION_URL)
 * replaces it and yields real text.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { analyzeSpeech, type SpeechAnalysis } from './vad.ts';
import type { Pcm } from './pcm.ts';

export interface TranscriptionInput {
  /** The stored audio file. */
  file: string;
  /** Its canonical MIME type, e.g. `audio/mpeg`. */
  mimeType: string;
  /** Decoded mono PCM of the file (already made for the duration check). */
  pcm: Pcm;
  /** The voice-activity analysis of `pcm`, when already made. */
  analysis?: SpeechAnalysis;
}

export interface Transcript {
  /** Recognised text; empty when the provider only detects speech. */
  text: string;
  /** Spoken language tag when the provider reports one. */
  language: string | null;
  /** Which provider produced it (`embedded-vad`, `openai-compatible`). */
  provider: string;
  /** The voice-activity analysis when it was made. */
  analysis?: SpeechAnalysis;
}

/** The recording holds no usable speech (a client error: 422). */
export class NoSpeechError extends Error {
  override name = 'NoSpeechError';
}

/** The transcription service failed or could not be reached (a server-side error). */
export class TranscriptionUnavailableError extends Error {
  override name = 'TranscriptionUnavailableError';
  constructor(
    message: string,
    readonly kind: 'unreachable' | 'upstream',
  ) {
    super(message);
  }
}

export interface TranscriptionProvider {
  readonly name: string;
  /** Transcribes, or throws NoSpeechError / TranscriptionUnavailableError. */
  transcribe(input: TranscriptionInput): Promise<Transcript>;
}

/** The embedded default: a voice-activity check over the decoded PCM. */
export const embeddedTranscriber: TranscriptionProvider = {
  name: 'embedded-vad',
  async transcribe({ pcm, analysis: given }) {
    const analysis = given ?? analyzeSpeech(pcm.samples, pcm.sampleRate);
    if (!analysis.speech) throw new NoSpeechError(analysis.reason ?? 'No speech was detected.');
    return { text: '', language: null, provider: 'embedded-vad', analysis };
  },
};

/** Full endpoint URL from a base (`http://h:8000`, `…/v1`) or the endpoint itself. */
export function transcriptionEndpoint(url: string): string {
  const trimmed = url.replace(/\/+$/, '');
  if (/\/audio\/transcriptions$/.test(trimmed)) return trimmed;
  if (/\/v1$/.test(trimmed)) return `${trimmed}/audio/transcriptions`;
  return `${trimmed}/v1/audio/transcriptions`;
}

const EXTENSIONS: Record<string, string> = {
  'audio/mpeg': 'mp3',
  'audio/wav': 'wav',
  'audio/ogg': 'ogg',
  'audio/mp4': 'm4a',
  'audio/aac': 'aac',
  'audio/flac': 'flac',
  'audio/webm': 'webm',
};

/** A provider speaking the OpenAI `POST /v1/audio/transcriptions` protocol (multipart file + model). */
export function openAiCompatibleTranscriber(options: { url: string; apiKey?: string | undefined; model: string; timeoutMs?: number }): TranscriptionProvider {
  const endpoint = transcriptionEndpoint(options.url);
  return {
    name: 'openai-compatible',
    async transcribe({ file, mimeType }) {
      const bytes = await fs.readFile(file);
      const form = new FormData();
      const ext = (Object.hasOwn(EXTENSIONS, mimeType) ? EXTENSIONS[mimeType] : undefined) ?? (path.extname(file).slice(1) || 'bin');
      form.append('file', new Blob([bytes], { type: mimeType }), `recording.${ext}`);
      form.append('model', options.model);
      form.append('response_format', 'json');
      let res: Response;
      try {
        res = await fetch(endpoint, {
          method: 'POST',
          body: form,
          headers: options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {},
          signal: AbortSignal.timeout(options.timeoutMs ?? 120_000),
        });
      } catch (error) {
        throw new TranscriptionUnavailableError(`transcription service unreachable: ${(error as Error).message}`, 'unreachable');
      }
      const raw = await res.text();
      if (res.status >= 500 || res.status === 429 || res.status === 401 || res.status === 403) {
        throw new TranscriptionUnavailableError(`transcription service answered ${res.status}`, 'upstream');
      }
      if (!res.ok) throw new NoSpeechError(`Transcription failed: the recording could not be transcribed (${res.status}).`);
      let body: { text?: unknown; language?: unknown };
      try {
        body = JSON.parse(raw) as typeof body;
      } catch {
        throw new TranscriptionUnavailableError('transcription service returned malformed JSON', 'upstream');
      }
      const text = typeof body.text === 'string' ? body.text.trim() : '';
      if (!text) throw new NoSpeechError('Transcription found no speech in the recording.');
      const language = typeof body.language === 'string' && body.language ? body.language : null;
      return { text, language, provider: 'openai-compatible' };
    },
  };
}

/** The provider the configuration selects. */
export function transcriberFor(config: {
  transcriptionUrl: string | undefined;
  transcriptionApiKey: string | undefined;
  transcriptionModel: string;
}): TranscriptionProvider {
  return config.transcriptionUrl
    ? openAiCompatibleTranscriber({ url: config.transcriptionUrl, apiKey: config.transcriptionApiKey, model: config.transcriptionModel })
    : embeddedTranscriber;
}
