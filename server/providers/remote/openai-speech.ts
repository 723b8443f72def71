/**
 * Speech from an OpenAI-compatible `POST {base}/v1/audio/speech`. Catalog voices
 * map to upstream voice names (`SPEECH_UPSTREAM_VOICES`); `speed` and the output
 * format are carried over; `volume` (a gain in dB) is applied here with ffmpeg,
 * since the upstream has no such control. Synchronous like the Images API, with
 * the same exactly-once rule: an interrupted call is held for an operator
 * unless `SPEECH_UPSTREAM_IDEMPOTENT=true` declares the upstream honours the
 * `Idempotency-Key` sent with each call.
 */
import fsp from 'node:fs/promises';
import { runTool } from '../../media/run.ts';
import {
  MediaGenerationError,
  MediaHoldError,
  type GeneratedOutput,
  type MediaJob,
  type MediaProvider,
  type MediaTools,
  type SpeechJobRequest,
} from '../media-types.ts';
import { NOT_PROCESSED, type RemoteProviderDescriptor } from './descriptor.ts';
import { baseOf, postOnce } from './http.ts';
import { storeOutputBody } from './output.ts';
import { say } from './sentences.ts';

export interface OpenAiSpeechOptions {
  url: string;
  apiKey: string | undefined;
  models: Record<string, string>;
  /** Catalog voice id → upstream voice name. */
  voices: Record<string, string>;
  idempotent: boolean;
  deadlineMs: number;
  attemptTimeoutMs: number;
  maxOutputBytes: number;
}

const FORMATS: Record<string, string> = { 'audio/wav': 'wav', 'audio/mpeg': 'mp3', 'audio/flac': 'flac', 'audio/aac': 'aac' };

/** What the upstream cannot do for this request (refused at submission, before anything is reserved). */
export function speechRequestProblem(
  voices: Record<string, string>,
  request: Pick<SpeechJobRequest, 'operation' | 'voice' | 'speed' | 'mimeType'>,
): string | undefined {
  if (request.operation !== 'speech' || request.voice.source !== 'catalog')
    return 'this model speaks only with catalog voices (voice_clone and uploaded voices are not available).';
  if (!voices[request.voice.id]) return `voice ${request.voice.id} is not available for this model.`;
  if (request.speed < 0.25 || request.speed > 4) return 'parameters.speed must be between 0.25 and 4 for this model.';
  if (!FORMATS[request.mimeType]) return `this model cannot write ${request.mimeType}.`;
  return undefined;
}

export class OpenAiSpeechProvider implements MediaProvider<'audio'> {
  readonly name = 'openai-speech';
  readonly resume = 'lookup' as const;
  readonly lane = 'remote' as const;
  private readonly base: string;
  constructor(private readonly options: OpenAiSpeechOptions) {
    this.base = baseOf(options.url);
  }

  requestProblem(_model: string, request: SpeechJobRequest): string | undefined {
    return speechRequestProblem(this.options.voices, request);
  }

  voices(): readonly string[] {
    return Object.keys(this.options.voices);
  }

  async generate(job: MediaJob<'audio'>, tools: MediaTools): Promise<GeneratedOutput> {
    const request = job.request;
    const upstream = this.options.models[job.model];
    if (!upstream || request.operation === 'music')
      throw new MediaGenerationError('WORKFLOW_UNAVAILABLE', `No upstream speech model is configured for ${job.model}.`);
    const problem = speechRequestProblem(this.options.voices, request);
    if (problem) throw new MediaGenerationError('GENERATION_FAILED', `This output could not be made: ${problem}`);
    const body = JSON.stringify({
      model: upstream,
      input: request.text,
      voice: this.options.voices[request.voice.id],
      speed: request.speed,
      response_format: FORMATS[request.mimeType],
    });
    const response = await postOnce(
      job,
      tools,
      `${this.base}/v1/audio/speech`,
      body,
      { 'content-type': 'application/json' },
      { provider: this.name, who: 'The speech provider', notDone: openAiSpeech.failures.notDone, ...this.options },
    );
    // A 2xx that is not audio at all (a JSON or HTML body) is no answer to read: the speech may have been
    // made and billed behind it, so the outcome is unknown and held. Bytes declared as audio that turn
    // out spoiled are a delivered, failed output (released).
    const type = (response.headers.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
    if (/^(application\/(json|problem\+json|xml)|text\/)/.test(type)) {
      await response.body?.cancel().catch(() => undefined);
      tools.warn(
        { slot: job.index, contentType: type, upstreamRequestId: response.headers.get('x-request-id') ?? undefined },
        'speech provider answered without audio',
      );
      throw new MediaHoldError(say.unreadable('The speech provider', `a ${type} answer instead of audio`));
    }
    // Streamed to a temp file within the limit, held to the media limits before ffmpeg touches it.
    const { file, mimeType } = await storeOutputBody(response, 'audio', tools, 'The speech provider', this.options.maxOutputBytes);
    const output = { file, mimeType };
    if (output.mimeType !== request.mimeType) {
      await fsp.rm(output.file, { force: true });
      tools.warn(
        { slot: job.index, asked: request.mimeType, got: output.mimeType, upstreamRequestId: response.headers.get('x-request-id') ?? undefined },
        'speech provider answered another format',
      );
      throw new MediaGenerationError(
        'GENERATION_FAILED',
        `The speech provider returned ${output.mimeType} instead of ${request.mimeType}; nothing was charged for it.`,
      );
    }
    return request.volume === 0 ? output : this.withGain(output, request.volume, tools);
  }

  /** The volume parameter (dB), applied locally. */
  private async withGain(output: { file: string; mimeType: string }, gainDb: number, tools: MediaTools): Promise<GeneratedOutput> {
    // The file's extension picks ffmpeg's muxer: the format asked is the format kept (`.aac` is an ADTS stream, as the upstream sends; `.m4a` would be MP4).
    const file = await tools.tempFile(`.${FORMATS[output.mimeType]}`);
    try {
      await runTool(tools.ffmpegPath, ['-v', 'error', '-y', '-i', output.file, '-af', `volume=${gainDb}dB`, file]);
      return { file, mimeType: output.mimeType };
    } catch {
      await fsp.rm(file, { force: true });
      throw new MediaGenerationError('GENERATION_FAILED', 'The speech provider returned audio that could not be decoded; nothing was charged for it.');
    } finally {
      await fsp.rm(output.file, { force: true });
    }
  }
}

/** OpenAI-compatible speech: `SPEECH_UPSTREAM_*`. */
export const openAiSpeech: RemoteProviderDescriptor = {
  name: 'openai-speech',
  kinds: ['audio'],
  dialect: 'OpenAI speech (POST /v1/audio/speech)',
  failures: { notDone: NOT_PROCESSED, unknown: 'key', reads: 'resent' },
  mappings: (config) => [['SPEECH_UPSTREAM_MODELS', config.speechUpstreamModels]],
  claims: (model, config) => Object.hasOwn(config.speechUpstreamModels, model.id),
  accepts: (model) =>
    model.kind === 'audio' && model.audio === 'speech' ? undefined : `makes speech, not ${model.kind === 'audio' ? model.audio : model.kind}`,
  deployment: (model, config, d) => ({
    model,
    config: {
      ...config,
      speechUpstreamUrl: d.url ?? config.speechUpstreamUrl,
      speechUpstreamApiKey: d.key ?? config.speechUpstreamApiKey,
      speechUpstreamModels: { ...config.speechUpstreamModels, ...(d.model && { [model.id]: d.model }) },
    },
  }),
  create(model, { config, common, where }) {
    if (!config.speechUpstreamUrl) throw new Error(`${where}: provider openai-speech needs SPEECH_UPSTREAM_URL`);
    if (!config.speechUpstreamModels[model.id])
      throw new Error(`${where}: provider openai-speech needs its upstream model in SPEECH_UPSTREAM_MODELS (${model.id}=…)`);
    return new OpenAiSpeechProvider({
      url: config.speechUpstreamUrl,
      apiKey: config.speechUpstreamApiKey,
      models: config.speechUpstreamModels,
      voices: config.speechUpstreamVoices,
      idempotent: config.speechUpstreamIdempotent,
      ...common,
    });
  },
};
