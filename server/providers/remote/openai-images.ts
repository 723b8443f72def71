/**
 * Images from an OpenAI-compatible Images API: `POST {base}/v1/images/generations`,
 * or `/v1/images/edits` (multipart) when the request has a source image. One
 * upstream call per output slot (`n: 1`), so each slot is charged and resumed on
 * its own. Ratio and resolution become the upstream model's nearest `size` and a
 * `quality`; background and output format pass through where the model has
 * them (otherwise the format is converted here); the negative prompt and style
 * are written into the prompt. Answers in `b64_json` and in `url` are both taken.
 *
 * Exactly once: each call carries `Idempotency-Key: gemforge-<task>-<slot>`.
 * OpenAI's API does not document that header (its Node SDK sends none), so by
 * default a slot whose call was interrupted, or answered with a 5xx other than
 * 503 (a gateway's 502 may follow a finished generation), is held for an
 * operator rather than sent again; `IMAGE_UPSTREAM_IDEMPOTENT=true` declares an
 * upstream that honours it, and such a slot is sent again with the same key.
 */
import fsp from 'node:fs/promises';
import { sharp } from '../../media/sharp.ts';
import {
  MediaGenerationError,
  MediaHoldError,
  type GeneratedOutput,
  type ImageJobRequest,
  type MediaJob,
  type MediaProvider,
  type MediaTools,
} from '../media-types.ts';
import { SHARP_INPUT } from '../../media/limits.ts';
import { decodeGated } from '../../media/probe.ts';
import { readBase64Field } from './body.ts';
import { NOT_PROCESSED, type RemoteProviderDescriptor } from './descriptor.ts';
import { baseOf, postOnce } from './http.ts';
import { checkOutputFile, downloadOutput, type FileOutput } from './output.ts';
import type { FetchAllow } from './public-fetch.ts';
import { say } from './sentences.ts';

/** A read that failed for a reason the slot may show (too large) is rethrown; any other becomes `fallback`. */
function mediaErrorOr<T>(fallback: T): (error: unknown) => T {
  return (error) => {
    if (error instanceof MediaGenerationError) throw error;
    return fallback;
  };
}

export interface OpenAiImagesOptions {
  url: string;
  apiKey: string | undefined;
  /** Public model id → upstream model name. */
  models: Record<string, string>;
  idempotent: boolean;
  deadlineMs: number;
  attemptTimeoutMs: number;
  maxOutputBytes: number;
  /** Private addresses an output URL may point at (`REMOTE_FETCH_ALLOW`). */
  fetchAllow: FetchAllow;
  /** The catalog's prompt limit per model (`capabilities.maxPromptChars`), where it sets one. */
  maxPromptChars?: Record<string, number>;
}

/** What a known upstream model can do (OpenAI's documented limits); unknown names are sent the exact size asked. */
interface UpstreamImageModel {
  sizes: string[] | undefined;
  /** The longest prompt it takes, in characters (the prompt as sent, style and negative prompt written in). */
  maxPromptChars: number | undefined;
  /** The edits endpoint's file field: `image[]` for several images, `image` for dall-e-2's one. */
  editField: 'image' | 'image[]';
  /** How many images an edit takes. */
  maxEditImages: number;
  background: boolean;
  outputFormat: boolean;
  edits: boolean;
  quality: (resolution: string) => string | undefined;
  style?: (variant: string) => string | undefined;
}

function upstreamModel(name: string): UpstreamImageModel {
  // chatgpt-image-latest is the GPT image model ChatGPT uses: the same sizes and fields as gpt-image-*.
  if (name.startsWith('gpt-image') || name.startsWith('chatgpt-image')) {
    return {
      sizes: ['1024x1024', '1536x1024', '1024x1536'],
      maxPromptChars: 32000,
      editField: 'image[]',
      maxEditImages: 16,
      background: true,
      outputFormat: true,
      edits: true,
      quality: (r) => (Number(r) <= 512 ? 'low' : Number(r) <= 1024 ? 'medium' : 'high'),
    };
  }
  if (name === 'dall-e-3') {
    return {
      sizes: ['1024x1024', '1792x1024', '1024x1792'],
      maxPromptChars: 4000,
      editField: 'image[]',
      maxEditImages: 0,
      background: false,
      outputFormat: false,
      edits: false,
      quality: (r) => (Number(r) > 1024 ? 'hd' : 'standard'),
      style: (v) => (v === 'vivid' ? 'vivid' : v === 'muted' ? 'natural' : undefined),
    };
  }
  if (name === 'dall-e-2') {
    return {
      sizes: ['256x256', '512x512', '1024x1024'],
      maxPromptChars: 1000,
      editField: 'image',
      maxEditImages: 1,
      background: false,
      outputFormat: false,
      edits: true,
      quality: () => undefined,
    };
  }
  return {
    sizes: undefined,
    maxPromptChars: undefined,
    editField: 'image[]',
    maxEditImages: 16,
    background: true,
    outputFormat: true,
    edits: true,
    quality: () => undefined,
  };
}

/** The allowed size nearest the requested shape (then the requested long edge). */
export function nearestSize(sizes: string[] | undefined, width: number, height: number): string {
  if (!sizes) return `${width}x${height}`;
  const want = Math.log(width / height);
  const score = (s: string) => {
    const [w, h] = s.split('x').map(Number) as [number, number];
    return Math.abs(Math.log(w / h) - want) * 10 + Math.abs(Math.max(w, h) - Math.max(width, height)) / 4096;
  };
  return [...sizes].sort((a, b) => score(a) - score(b))[0]!;
}

/**
 * What the upstream model cannot do for this request (refused at submission,
 * before anything is reserved). The prompt is judged as it will be sent, with
 * the style and negative prompt written in, against the catalog's limit and
 * the upstream model's.
 */
export function imageRequestProblem(
  upstream: string,
  request: Pick<ImageJobRequest, 'prompt' | 'style' | 'negativePrompt' | 'background' | 'sourceImage' | 'referenceImages'>,
  catalogMaxPromptChars = Number.POSITIVE_INFINITY,
): string | undefined {
  const m = upstreamModel(upstream);
  if (request.background === 'transparent' && !m.background)
    return `parameters.background "transparent" is not available for this model (its upstream ${upstream} has no transparency).`;
  const images = (request.sourceImage ? 1 : 0) + request.referenceImages.length;
  if (images > 0 && !m.edits) return `this model cannot edit images (its upstream ${upstream} has no edits): leave out sourceImage and referenceAssetIds.`;
  if (images > m.maxEditImages)
    return `this model edits at most ${m.maxEditImages} image${m.maxEditImages === 1 ? '' : 's'} at once (its upstream ${upstream}): send fewer of sourceImage and referenceAssetIds.`;
  const limit = Math.min(catalogMaxPromptChars, m.maxPromptChars ?? Number.POSITIVE_INFINITY);
  const sent = promptOf(request).length;
  if (sent > limit)
    return `the prompt with its style and negative prompt written in is ${sent} characters, above this model's ${limit}: shorten the prompt, style or negativePrompt.`;
  return undefined;
}

function promptOf(request: Pick<ImageJobRequest, 'prompt' | 'style' | 'negativePrompt'>): string {
  let prompt = request.prompt;
  if (request.style) prompt += `\n\nStyle: ${request.style}.`;
  if (request.negativePrompt) prompt += `\n\nAvoid: ${request.negativePrompt}.`;
  return prompt;
}

interface ImagesAnswer {
  data?: Array<{ b64_json?: unknown; url?: unknown }>;
}

export class OpenAiImagesProvider implements MediaProvider<'image'> {
  readonly name = 'openai-images';
  readonly resume = 'lookup' as const;
  readonly lane = 'remote' as const;
  private readonly base: string;
  constructor(private readonly options: OpenAiImagesOptions) {
    this.base = baseOf(options.url);
  }

  /**
   * Discovery's view of the model: what the upstream model lacks left out (edits
   * and references, transparency), its prompt limit, and for each listed ratio
   * the size it really makes (`upstreamSizes`, at a 1024 long edge): a 16:9
   * request to a model that makes only 3:2 is delivered 3:2, and says so here.
   */
  capabilities(model: string, listed: Record<string, unknown>): Record<string, unknown> {
    const upstream = this.options.models[model];
    if (upstream === undefined) return listed;
    const m = upstreamModel(upstream);
    const out: Record<string, unknown> = { ...listed };
    if (!m.edits) {
      delete out.sourceImage;
      delete out.referenceImages;
    } else if (m.maxEditImages <= 1) {
      delete out.referenceImages; // the one image an edit takes is the source
    }
    if (!m.background && Array.isArray(out.background)) out.background = out.background.filter((b) => b !== 'transparent');
    if (m.maxPromptChars !== undefined)
      out.maxPromptChars = Math.min(typeof listed.maxPromptChars === 'number' ? listed.maxPromptChars : Number.POSITIVE_INFINITY, m.maxPromptChars);
    if (m.sizes && Array.isArray(listed.ratios)) {
      out.upstreamSizes = Object.fromEntries(
        (listed.ratios as string[]).map((ratio) => {
          const [a, b] = ratio.split(':').map(Number) as [number, number];
          const [w, h] = a >= b ? [1024, Math.round((1024 * b) / a)] : [Math.round((1024 * a) / b), 1024];
          return [ratio, nearestSize(m.sizes, w, h)];
        }),
      );
    }
    return out;
  }

  requestProblem(model: string, request: ImageJobRequest): string | undefined {
    const upstream = this.options.models[model];
    return upstream === undefined ? undefined : imageRequestProblem(upstream, request, this.options.maxPromptChars?.[model]);
  }

  async generate(job: MediaJob<'image'>, tools: MediaTools): Promise<GeneratedOutput> {
    const upstream = this.options.models[job.model];
    if (!upstream) throw new MediaGenerationError('WORKFLOW_UNAVAILABLE', `No upstream image model is configured for ${job.model}.`);
    const request = job.request;
    const m = upstreamModel(upstream);
    const size = nearestSize(m.sizes, request.width, request.height);
    if (size !== `${request.width}x${request.height}`) {
      tools.warn(
        { slot: job.index, requested: `${request.width}x${request.height}`, upstreamSize: size },
        'image size mapped to the nearest the upstream model offers',
      );
    }
    const fields: Record<string, string> = { model: upstream, prompt: promptOf(request), n: '1', size };
    const quality = m.quality(request.resolution);
    if (quality) fields.quality = quality;
    const style = m.style?.(request.variant);
    if (style) fields.style = style;
    if (m.background && request.background !== 'auto') fields.background = request.background;
    if (m.outputFormat) fields.output_format = request.outputFormat;
    const edit = Boolean(request.sourceImage) || request.referenceImages.length > 0;
    const headers: Record<string, string> = {};

    let body: BodyInit;
    if (edit) {
      const form = new FormData();
      for (const [k, v] of Object.entries(fields)) form.append(k, v);
      for (const id of [request.sourceImage, ...request.referenceImages].filter((x): x is string => Boolean(x))) {
        const bytes = await fsp.readFile(await tools.assetFile(id));
        const meta = await sharp(bytes).metadata();
        form.append(
          m.editField,
          new Blob([new Uint8Array(bytes)], { type: `image/${meta.format === 'jpeg' ? 'jpeg' : (meta.format ?? 'png')}` }),
          `${id}.${meta.format ?? 'png'}`,
        );
      }
      body = form;
    } else {
      headers['content-type'] = 'application/json';
      body = JSON.stringify({ ...fields, n: 1 });
    }
    const endpoint = `${this.base}/v1/images/${edit ? 'edits' : 'generations'}`;
    const response = await postOnce(job, tools, endpoint, body, headers, {
      provider: this.name,
      who: 'The image provider',
      notDone: openAiImages.failures.notDone,
      ...this.options,
    });
    const requestId = response.headers.get('x-request-id') ?? undefined;
    // The base64 image is decoded into a temp file while it arrives, never held whole (nor as text) in memory.
    const file = await tools.tempFile('.remote');
    let output: FileOutput | undefined;
    try {
      const { answer, bytes } = await readBase64Field(response, 'b64_json', file, this.options.maxOutputBytes, 'The image provider').catch(
        mediaErrorOr({ answer: undefined, bytes: 0 }),
      );
      const item = Array.isArray((answer as ImagesAnswer | undefined)?.data) ? (answer as ImagesAnswer).data![0] : undefined;
      if (bytes > 0) output = await checkOutputFile(file, 'image', tools, 'The image provider');
      else if (typeof item?.url === 'string') {
        output = await downloadOutput(item.url, 'image', tools, {
          who: 'The image provider',
          maxBytes: this.options.maxOutputBytes,
          deadlineMs: this.options.attemptTimeoutMs,
          allow: this.options.fetchAllow,
        });
      }
    } finally {
      if (output?.file !== file) await fsp.rm(file, { force: true });
    }
    if (!output) {
      // A 2xx that is unparseable, of another shape or without data: the generation may have run and
      // been billed behind it (a gateway, a cut body), so it is an unknown outcome, held like a lost call.
      tools.warn({ slot: job.index, upstreamRequestId: requestId }, 'image provider answered without an image');
      throw new MediaHoldError(say.unreadable('The image provider', 'an answer without an image'));
    }
    return this.inFormat(output, request);
  }

  /**
   * The requested format, converted here when the upstream answered another
   * one: the image passed the upload limits already (output.ts), and decodes
   * under libvips' own pixel limit and at the shared decode gate.
   */
  private async inFormat({ file, mimeType, probe }: FileOutput, request: ImageJobRequest): Promise<GeneratedOutput> {
    if (mimeType === request.mimeType || !probe) return { file, mimeType };
    try {
      const bytes = await decodeGated(probe, () => sharp(file, SHARP_INPUT).toFormat(request.outputFormat).toBuffer());
      return { bytes, mimeType: request.mimeType };
    } catch {
      throw new MediaGenerationError('GENERATION_FAILED', 'The image provider returned an image that could not be decoded; nothing was charged for it.');
    } finally {
      await fsp.rm(file, { force: true });
    }
  }
}

/** The OpenAI Images API (and servers speaking it): `IMAGE_UPSTREAM_*`. */
export const openAiImages: RemoteProviderDescriptor = {
  name: 'openai-images',
  kinds: ['image'],
  dialect: 'OpenAI Images API (POST /v1/images/generations, /v1/images/edits)',
  // No lookup: the API has none. An unknown outcome is sent again only with the
  // same Idempotency-Key, where the operator declares the upstream honours it.
  failures: { notDone: NOT_PROCESSED, unknown: 'key', reads: 'resent' },
  mappings: (config) => [['IMAGE_UPSTREAM_MODELS', config.imageUpstreamModels]],
  claims: (model, config) => Object.hasOwn(config.imageUpstreamModels, model.id),
  deployment: (model, config, d) => ({
    model,
    config: {
      ...config,
      imageUpstreamUrl: d.url ?? config.imageUpstreamUrl,
      imageUpstreamApiKey: d.key ?? config.imageUpstreamApiKey,
      imageUpstreamModels: { ...config.imageUpstreamModels, ...(d.model && { [model.id]: d.model }) },
    },
  }),
  create(model, { config, common, where }) {
    if (!config.imageUpstreamUrl) throw new Error(`${where}: provider openai-images needs IMAGE_UPSTREAM_URL`);
    if (!config.imageUpstreamModels[model.id])
      throw new Error(`${where}: provider openai-images needs its upstream model in IMAGE_UPSTREAM_MODELS (${model.id}=…)`);
    const caps = model.listedCapabilities as { maxPromptChars?: unknown };
    return new OpenAiImagesProvider({
      url: config.imageUpstreamUrl,
      apiKey: config.imageUpstreamApiKey,
      models: config.imageUpstreamModels,
      idempotent: config.imageUpstreamIdempotent,
      ...(typeof caps.maxPromptChars === 'number' && { maxPromptChars: { [model.id]: caps.maxPromptChars } }),
      ...common,
    });
  },
};
