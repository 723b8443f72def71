/** Image submissions: parameters checked against the model's capabilities, dimensions, quote. */
import type { components } from '../../generated/api.ts';
import { invalidRequest } from './errors.ts';
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

type ImageRequest = components['schemas']['ImageRequest'];

/** Width and height for a ratio `a:b` whose long edge is `resolution` pixels. */
export function imageDimensions(ratio: string, resolution: string): { width: number; height: number } {
  const [a, b] = ratio.split(':').map(Number);
  const long = Number(resolution);
  return a >= b ? { width: long, height: Math.round((long * b) / a) } : { width: Math.round((long * a) / b), height: long };
}

export const IMAGE_MIME: Record<string, string> = { png: 'image/png', jpeg: 'image/jpeg', webp: 'image/webp' };

export async function prepareImage(ctx: PrepareContext, body: ImageRequest): Promise<PreparedMedia> {
  const model = requireModel(ctx.catalog, body.model, 'image');
  const caps = model.capabilities;
  const p = body.parameters ?? {};
  const id = model.id;
  checkPromptLength(body.prompt, caps.maxPromptChars, id);

  const ratio = oneOf('ratio', p.ratio ?? caps.defaultRatio, caps.ratios, id);
  const resolution = oneOf('resolution', p.resolution ?? caps.defaultResolution, caps.resolutions, id);
  const outputCount = p.outputCount ?? 1;
  if (outputCount > caps.maxOutputs) throw invalidRequest(`parameters.outputCount ${outputCount} is above model ${id}'s maximum of ${caps.maxOutputs}.`);
  if (p.negativePrompt !== undefined && !caps.negativePrompt) throw unsupported('negativePrompt', id);
  if (p.magicPrompt && !caps.magicPrompt) throw unsupported('magicPrompt', id);
  if (p.background !== undefined) {
    if (!caps.background.length) throw unsupported('background', id);
    oneOf('background', p.background, caps.background, id);
  }
  const variant = oneOf('variant', p.variant ?? caps.variants[0], caps.variants, id);
  if (p.style !== undefined) {
    if (!caps.styles.length) throw unsupported('style', id);
    oneOf('style', p.style, caps.styles, id);
  }
  const outputFormat = oneOf('outputFormat', p.outputFormat ?? 'png', caps.outputFormats, id);
  if (p.background === 'transparent' && outputFormat === 'jpeg') {
    throw invalidRequest('parameters.background "transparent" needs outputFormat png or webp (JPEG has no alpha channel).');
  }
  if (caps.sourceImage === 'required' && !p.sourceImage) throw invalidRequest(`parameters.sourceImage is required by edit model ${id}.`);
  if (caps.sourceImage === 'none' && p.sourceImage) throw unsupported('sourceImage', id);
  const references = body.referenceAssetIds ?? [];
  if (references.length > caps.referenceImages.max) {
    throw invalidRequest(`referenceAssetIds has ${references.length} items; model ${id} accepts at most ${caps.referenceImages.max}.`);
  }
  await checkReferences(ctx, [
    ...(p.sourceImage ? [{ id: p.sourceImage, kinds: ['image' as const] }] : []),
    ...references.map((r) => ({ id: r, kinds: ['image' as const] })),
  ]);

  const perOutput = model.pricing.perOutput[resolution];
  return {
    kind: 'image',
    model,
    scenarios: ctx.scenarios,
    outputPrices: slotsFor(ctx, perOutput * outputCount, outputCount),
    request: {
      prompt: providerPrompt(body.prompt, ctx.scenariosEnabled),
      negativePrompt: p.negativePrompt ?? null,
      ratio,
      resolution,
      ...imageDimensions(ratio, resolution),
      outputCount,
      background: p.background ?? 'auto',
      variant,
      style: p.style ?? null,
      outputFormat,
      mimeType: IMAGE_MIME[outputFormat],
      magicPrompt: p.magicPrompt ?? false,
      seed: p.seed ?? null,
      sourceImage: p.sourceImage ?? null,
      referenceImages: references,
    },
  };
}
