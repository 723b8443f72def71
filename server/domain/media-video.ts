/**
 * Video submissions: every parameter checked against the model's capabilities
 * (mode, first and last frame, duration, ratio, resolution, audio, reference
 * videos, audios and images with their counts and durations), the frame size,
 * and the quote (price per second by resolution, plus audio).
 */
import type { components } from '../../generated/api.ts';
import { DomainError, invalidRequest } from './errors.ts';
import type { AssetKind } from '../storage/assets.ts';
import { requireUsableAsset } from './assets.ts';
import {
  checkPromptLength,
  checkReferences,
  oneOf,
  providerPrompt,
  requireModel,
  slotsFor,
  unsupported,
  type PrepareContext,
  type PreparedMedia,
} from './media-request.ts';
import type { VideoCapabilities, VideoPricing } from './catalog-entries.ts';

type VideoRequest = components['schemas']['VideoRequest'];
type VideoParameters = components['schemas']['MediaParametersVideo'];

/** Frames per second of every generated video. */
export const VIDEO_FPS = 24;

/**
 * Width and height for a ratio `a:b` whose short edge is the resolution
 * (`720p` → 720 pixels), both even (H.264 in yuv420p needs even dimensions).
 */
export function videoDimensions(ratio: string, resolution: string): { width: number; height: number } {
  const [a, b] = ratio.split(':').map(Number);
  const short = Number.parseInt(resolution, 10);
  const even = (n: number) => Math.max(2, Math.round(n / 2) * 2);
  return a >= b ? { width: even((short * a) / b), height: even(short) } : { width: even(short), height: even((short * b) / a) };
}

/** The quote in whole Gems: price per second at the resolution × duration, plus audio per second; rounded up. */
export function videoQuote(pricing: VideoPricing, resolution: string, duration: number, audio: boolean): number {
  const perSecond = Number(pricing.perSecond[resolution]);
  return Math.ceil(perSecond * duration + (audio ? Number(pricing.audioPerSecond ?? 0) * duration : 0));
}

/** A reference asset list of one kind, checked against the model's count and duration limits. */
interface ReferenceGroup {
  name: string;
  ids: string[];
  kind: AssetKind;
  max: number;
  durations?: { min: number; max: number };
}

function checkCount(group: ReferenceGroup, modelId: string, what: string): void {
  if (!group.ids.length) return;
  if (group.max <= 0) throw invalidRequest(`${group.name} is not supported by model ${modelId}: it accepts no ${what}.`);
  if (group.ids.length > group.max) {
    throw invalidRequest(`${group.name} names ${group.ids.length} ${what}; model ${modelId} accepts at most ${group.max}.`);
  }
}

/** One reference as the request names it (`parameters.referenceVideos[0]`, `referenceAssetIds[1]`, …). */
interface NamedReference {
  name: string;
  id: string;
  kind: AssetKind;
  durations?: { min: number; max: number };
}

function named(group: ReferenceGroup): NamedReference[] {
  return group.ids.map((id, i) => ({ name: `${group.name}[${i}]`, id, kind: group.kind, durations: group.durations }));
}

/**
 * Each reference must be owned, of its kind and ready (the shared check, its
 * 422 prefixed with the parameter's name), and reference videos and audios
 * within the model's `referenceDurations` (seconds).
 */
async function checkNamedReferences(ctx: PrepareContext, refs: NamedReference[], modelId: string): Promise<void> {
  for (const ref of refs) {
    let row;
    try {
      row = await requireUsableAsset(ctx.db, ctx.accountId, ref.id, [ref.kind]);
    } catch (error) {
      if (error instanceof DomainError && error.code === 'INVALID_REFERENCE') throw new DomainError(error.code, `${ref.name}: ${error.message}`);
      throw error;
    }
    if (!ref.durations) continue;
    const { min, max } = ref.durations;
    const seconds = row.duration_seconds;
    if (seconds === null || seconds < min || seconds > max) {
      const length = seconds === null ? 'of unknown length' : `${seconds} s long`;
      throw new DomainError(
        'INVALID_REFERENCE',
        `${ref.name}: ${ref.kind} asset ${ref.id} is ${length}; model ${modelId} accepts reference ${ref.kind} of ${min}–${max} s.`,
      );
    }
  }
  // The shared check once more: whether the model's provider can use them yet.
  await checkReferences(
    ctx,
    refs.map((r) => ({ id: r.id, kinds: [r.kind] })),
  );
}

/**
 * First and end frames, reference videos, audios and (top-level) visual
 * reference images: counts within the model's limits (images by resolution),
 * then each one checked as the request names it.
 */
async function checkVideoReferences(
  ctx: PrepareContext,
  caps: VideoCapabilities,
  p: VideoParameters,
  referenceAssetIds: string[],
  resolution: string,
  id: string,
): Promise<{ referenceVideos: string[]; referenceAudios: string[]; referenceImages: string[] }> {
  const videoName =
    p.referenceVideo && p.referenceVideos?.length
      ? 'parameters.referenceVideo and referenceVideos together'
      : p.referenceVideo
        ? 'parameters.referenceVideo'
        : 'parameters.referenceVideos';
  const videos: ReferenceGroup = {
    name: videoName,
    ids: [...(p.referenceVideo ? [p.referenceVideo] : []), ...(p.referenceVideos ?? [])],
    kind: 'video',
    max: caps.maxReferenceVideos,
    durations: caps.referenceDurations?.video,
  };
  const audios: ReferenceGroup = {
    name: 'parameters.referenceAudios',
    ids: p.referenceAudios ?? [],
    kind: 'audio',
    max: caps.maxReferenceAudios,
    durations: caps.referenceDurations?.audio,
  };
  const images: ReferenceGroup = {
    name: 'referenceAssetIds',
    ids: referenceAssetIds,
    kind: 'image',
    max: caps.maxReferenceImagesByResolution?.[resolution] ?? caps.maxReferenceImages,
  };
  checkCount(videos, id, 'reference videos');
  checkCount(audios, id, 'reference audios');
  checkCount(images, id, `visual reference images at resolution ${resolution}`);

  await checkNamedReferences(
    ctx,
    [
      ...(p.sourceImage ? [{ name: 'parameters.sourceImage', id: p.sourceImage, kind: 'image' as const }] : []),
      ...(p.endFrame ? [{ name: 'parameters.endFrame', id: p.endFrame, kind: 'image' as const }] : []),
      ...(p.referenceVideo ? [{ name: 'parameters.referenceVideo', id: p.referenceVideo, kind: 'video' as const, durations: videos.durations }] : []),
      ...named({ ...videos, name: 'parameters.referenceVideos', ids: p.referenceVideos ?? [] }),
      ...named(audios),
      ...named(images),
    ],
    id,
  );

  return { referenceVideos: videos.ids, referenceAudios: audios.ids, referenceImages: images.ids };
}

export async function prepareVideo(ctx: PrepareContext, body: VideoRequest): Promise<PreparedMedia> {
  const model = requireModel(ctx.catalog, body.model, 'video');
  const caps = model.capabilities;
  const p = body.parameters ?? {};
  const id = model.id;
  checkPromptLength(body.prompt, caps.maxPromptChars, id);

  const mode = oneOf('mode', p.mode, caps.modes, id);
  if (mode === 'image-to-video' && !p.sourceImage) throw invalidRequest(`parameters.sourceImage is required with mode image-to-video: it is the first frame.`);
  if (mode === 'text-to-video' && p.sourceImage) {
    throw invalidRequest(
      'parameters.sourceImage is only used with mode image-to-video; text-to-video starts from the prompt (top-level referenceAssetIds are visual references).',
    );
  }
  if (p.endFrame && !caps.endFrame) throw unsupported('endFrame', id);
  const duration = Number(oneOf('duration', p.duration ?? caps.defaultDuration, caps.durations, id));
  const ratio = oneOf('ratio', p.ratio ?? caps.defaultRatio, caps.aspectRatios, id);
  const resolution = oneOf('resolution', p.resolution ?? caps.defaultResolution, caps.resolutions, id);
  const audio = oneOf('audio', p.audio ?? (caps.audio.includes(false) ? false : caps.audio[0]), caps.audio, id);

  const references = await checkVideoReferences(ctx, caps, p, body.referenceAssetIds ?? [], resolution, id);

  const total = videoQuote(model.pricing, resolution, duration, audio);
  return {
    kind: 'video',
    model,
    scenarios: ctx.scenarios,
    outputPrices: slotsFor(ctx, total, 1),
    request: {
      prompt: providerPrompt(body.prompt, ctx.scenariosEnabled),
      mode,
      duration,
      ratio,
      resolution,
      ...videoDimensions(ratio, resolution),
      fps: VIDEO_FPS,
      audio,
      seed: p.seed ?? null,
      sourceImage: p.sourceImage ?? null,
      endFrame: p.endFrame ?? null,
      ...references,
      mimeType: 'video/mp4',
    },
  };
}
