/**
 * Video submissions: every parameter checked against the model's capabilities
 * (mode, first and last frame, duration, ratio, resolution, audio, reference
 * videos, audios and images with their counts and durations), the frame size,
 * and the quote (price per second by resolution, plus audio).
 */
import type { components } from '../../generated/api.ts';
import { invalidRequest } from '../errors.ts';
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

type VideoRequest = components['schemas']['VideoRequest'];
type VideoMode = 'text-to-video' | 'image-to-video';

/** The video part of a model's catalog capabilities (server/catalog/models.yaml). */
export interface VideoCapabilities {
  modes: VideoMode[];
  aspectRatios: string[];
  defaultRatio: string;
  durations: number[];
  defaultDuration: number;
  resolutions: string[];
  defaultResolution: string;
  audio: boolean[];
  endFrame: boolean;
  maxReferenceImages: number;
  maxReferenceImagesByResolution?: Record<string, number>;
  maxReferenceVideos: number;
  maxReferenceAudios: number;
  referenceDurations?: { video?: { min: number; max: number }; audio?: { min: number; max: number } };
  maxPromptChars: number;
}

interface VideoPricing {
  perSecond: Record<string, number>;
  audioPerSecond?: number;
}

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

/** Reference videos and audios must be within the model's `referenceDurations` (seconds). */
async function checkDurations(ctx: PrepareContext, group: ReferenceGroup, modelId: string): Promise<void> {
  if (!group.durations) return;
  const { min, max } = group.durations;
  for (const id of group.ids) {
    const row = await requireUsableAsset(ctx.db, ctx.accountId, id, [group.kind]);
    const seconds = row.duration_seconds;
    if (seconds === null || seconds < min || seconds > max) {
      const length = seconds === null ? 'of unknown length' : `${seconds} s long`;
      throw invalidRequest(`${group.name}: ${group.kind} asset ${id} is ${length}; model ${modelId} accepts reference ${group.kind} of ${min}–${max} s.`);
    }
  }
}

export async function prepareVideo(ctx: PrepareContext, body: VideoRequest): Promise<PreparedMedia> {
  const model = requireModel(ctx.catalog, body.model, 'video');
  const caps = model.capabilities as unknown as VideoCapabilities;
  const p = body.parameters ?? {};
  const id = model.id;
  checkPromptLength(body.prompt, caps.maxPromptChars, id);

  if (p.mode === undefined) throw invalidRequest(`parameters.mode is required: set it explicitly to one of ${caps.modes.join(', ')} (model ${id}).`);
  const mode = oneOf('mode', p.mode, caps.modes, id);
  if (mode === 'image-to-video' && !p.sourceImage) throw invalidRequest(`parameters.sourceImage is required with mode image-to-video: it is the first frame.`);
  if (mode === 'text-to-video' && p.sourceImage) {
    throw invalidRequest('parameters.sourceImage is only used with mode image-to-video; text-to-video starts from the prompt (top-level referenceAssetIds are visual references).');
  }
  if (p.endFrame && !caps.endFrame) throw unsupported('endFrame', id);
  const duration = Number(oneOf('duration', p.duration ?? caps.defaultDuration, caps.durations, id));
  const ratio = oneOf('ratio', p.ratio ?? caps.defaultRatio, caps.aspectRatios, id);
  const resolution = oneOf('resolution', p.resolution ?? caps.defaultResolution, caps.resolutions, id);
  const audio = oneOf('audio', p.audio ?? (caps.audio.includes(false) ? false : caps.audio[0]), caps.audio, id);

  const videoName = p.referenceVideo && p.referenceVideos?.length ? 'parameters.referenceVideo and referenceVideos together' : p.referenceVideo ? 'parameters.referenceVideo' : 'parameters.referenceVideos';
  const videos: ReferenceGroup = {
    name: videoName,
    ids: [...(p.referenceVideo ? [p.referenceVideo] : []), ...(p.referenceVideos ?? [])],
    kind: 'video',
    max: caps.maxReferenceVideos,
    durations: caps.referenceDurations?.video,
  };
  const audios: ReferenceGroup = { name: 'parameters.referenceAudios', ids: p.referenceAudios ?? [], kind: 'audio', max: caps.maxReferenceAudios, durations: caps.referenceDurations?.audio };
  const images: ReferenceGroup = {
    name: 'referenceAssetIds',
    ids: body.referenceAssetIds ?? [],
    kind: 'image',
    max: caps.maxReferenceImagesByResolution?.[resolution] ?? caps.maxReferenceImages,
  };
  checkCount(videos, id, 'reference videos');
  checkCount(audios, id, 'reference audios');
  checkCount(images, id, `visual reference images at resolution ${resolution}`);

  await checkReferences(ctx, [
    ...(p.sourceImage ? [{ id: p.sourceImage, kinds: ['image' as const] }] : []),
    ...(p.endFrame ? [{ id: p.endFrame, kinds: ['image' as const] }] : []),
    ...[videos, audios, images].flatMap((g) => g.ids.map((r) => ({ id: r, kinds: [g.kind] }))),
  ]);
  await checkDurations(ctx, videos, id);
  await checkDurations(ctx, audios, id);

  const total = videoQuote(model.pricing as unknown as VideoPricing, resolution, duration, audio);
  return {
    kind: 'video',
    model,
    scenarios: ctx.scenarios,
    outputPrices: slotsFor(total, 1, ctx.scenarios),
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
      referenceVideos: videos.ids,
      referenceAudios: audios.ids,
      referenceImages: images.ids,
      mimeType: 'video/mp4',
    },
  };
}
