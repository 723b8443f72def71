/**
 * The request fields a catalog mapping may name, and the mapping itself, for
 * providers whose upstream model takes a free-form `input` object (Replicate's
 * predictions, fal's queue): the catalog entry maps the public request onto
 * the model's input,
 *     input:
 *       prompt: '{prompt}'        a string with {field} placeholders of the job request,
 *       duration: '{duration}'    a lone placeholder keeps the field's type (number, boolean)
 *       fps: 24                   literals pass as they are
 * checked at start: an unknown field stops the start naming the model. The
 * outputs of such models are found in their answers the same way (`outputUrl`).
 */
import type { JobRequests, MediaKind } from '../media-types.ts';

/** The fields a placeholder may name, per kind (the job request's own fields). */
export const REQUEST_FIELDS: Record<MediaKind, readonly string[]> = {
  image: ['prompt', 'negativePrompt', 'ratio', 'resolution', 'width', 'height', 'outputCount', 'background', 'variant', 'style', 'outputFormat', 'magicPrompt', 'seed'],
  video: ['prompt', 'mode', 'duration', 'ratio', 'resolution', 'width', 'height', 'fps', 'audio', 'seed'],
  audio: ['prompt', 'text', 'operation', 'musicMode', 'instrumental', 'style', 'title', 'negativeTags', 'vocalGender', 'durationSeconds', 'speed', 'volume', 'temperature', 'seed'],
};

/**
 * What a mapped model cannot be given (refused at submission, before anything
 * is reserved): source and reference media. A placeholder carries only the
 * request's text and settings, and an asset is private to this server; sending
 * the request without them would run (and charge) another generation than the
 * one asked, such as text-to-video for image-to-video.
 */
export function mappedRequestProblem(request: JobRequests[MediaKind], what: string): string | undefined {
  const r = request as Partial<Record<'sourceImage' | 'endFrame' | 'coverAudio', string | null> & Record<'referenceImages' | 'referenceVideos' | 'referenceAudios', string[]>>;
  const media = [r.sourceImage, r.endFrame, r.coverAudio, ...(r.referenceImages ?? []), ...(r.referenceVideos ?? []), ...(r.referenceAudios ?? [])].filter(Boolean);
  if (media.length === 0) return undefined;
  return `this model is given text and settings only (its upstream is ${what} that cannot receive this server's assets): leave out sourceImage, endFrame and referenceAssetIds.`;
}

const PLACEHOLDER = /\{([A-Za-z]+)\}/g;

/** Checks a mapping's `input` (`block`: its name in errors, e.g. "replicate.input"); throws a message naming `where`. */
export function parseInputMapping(input: unknown, kind: MediaKind, where: string, block: string): Record<string, unknown> {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) throw new Error(`${where}: ${block} must map the model's input names to values`);
  for (const [name, value] of Object.entries(input)) {
    if (typeof value === 'string') {
      for (const m of value.matchAll(PLACEHOLDER)) {
        if (!REQUEST_FIELDS[kind].includes(m[1]!)) throw new Error(`${where}: ${block}.${name} names {${m[1]}}, which a ${kind} request does not have (known: ${REQUEST_FIELDS[kind].join(', ')})`);
      }
    } else if (!['number', 'boolean'].includes(typeof value) && value !== null) {
      throw new Error(`${where}: ${block}.${name} must be a string, number, boolean or null`);
    }
  }
  return input as Record<string, unknown>;
}

/** The model's input for a job request: placeholders filled, a lone placeholder keeping its type; null fields left out. */
export function inputFor(entry: { input: Record<string, unknown> }, request: JobRequests[MediaKind]): Record<string, unknown> {
  const fields: Readonly<Record<string, unknown>> = { ...request }; // read by the names the catalog's mapping gives
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(entry.input)) {
    if (typeof value !== 'string') {
      out[name] = value;
      continue;
    }
    const lone = /^\{([A-Za-z]+)\}$/.exec(value);
    if (lone) {
      const v = fields[lone[1]!];
      if (v !== null && v !== undefined) out[name] = v;
      continue;
    }
    out[name] = value.replace(PLACEHOLDER, (_, f: string) => String(fields[f] ?? ''));
  }
  return out;
}

const ADDRESS = /^(https?:|data:)/;

/**
 * The output's address in a model's answer: a string, the first of a list, or
 * (an object of named outputs: Replicate's `{"video": url}`, fal's
 * `{"images": [{"url": …}]}` or `{"video": {"url": …}}`) the one named after
 * the kind (or its plural), else the first address found among its values.
 */
export function outputUrl(output: unknown, kind: MediaKind): string | undefined {
  if (typeof output === 'string') return output;
  if (Array.isArray(output)) {
    for (const item of output) {
      const url = outputUrl(item, kind);
      if (url) return url;
    }
    return undefined;
  }
  if (typeof output === 'object' && output !== null) {
    const named = output as Record<string, unknown>;
    const own = outputUrl(named[kind] ?? named[`${kind}s`] ?? named.output ?? named.url, kind);
    if (own) return own;
    for (const value of Object.values(named)) {
      if (typeof value === 'string' && ADDRESS.test(value)) return value;
    }
    for (const value of Object.values(named)) {
      const nested = typeof value === 'object' && value !== null ? outputUrl(value, kind) : undefined;
      if (nested && ADDRESS.test(nested)) return nested;
    }
  }
  return undefined;
}
