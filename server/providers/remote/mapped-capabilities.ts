/**
 * What a mapped model (a Replicate prediction model, a fal queue model) really
 * takes, for discovery and submission. Its catalog entry lists the public
 * capabilities; its mapping block may add the upstream model's own table of
 * the values it accepts for a request field it carries (from the model's
 * published input schema):
 *     replicate:
 *       model: acme/video-gen
 *       input: { prompt: '{prompt}', aspect_ratio: '{ratio}', duration: '{duration}' }
 *       accepts:
 *         ratio: ['16:9', '9:16']
 *         duration: [5, 10]
 * Discovery then lists only the values both take, a request for another is
 * refused at submission (422, before anything is reserved) rather than sent
 * and silently changed upstream, and a table that leaves nothing, or not the
 * catalog's default, stops the start naming the mismatch. Source and reference
 * media never reach a mapped model (input-mapping.ts), so discovery lists none
 * and a catalog model that requires them stops the start.
 */
import type { JobRequests, MediaKind } from '../media-types.ts';
import { carriedFields } from './input-mapping.ts';

/** Request field → the values the upstream model takes, as text (`5` and `'5'` alike). */
export type Accepts = Record<string, string[]>;

/** Where discovery lists each field's values (and its default), per kind. */
const LISTED: Partial<Record<MediaKind, Record<string, { list: string; default?: string }>>> = {
  image: {
    ratio: { list: 'ratios', default: 'defaultRatio' },
    resolution: { list: 'resolutions', default: 'defaultResolution' },
    outputFormat: { list: 'outputFormats' },
    variant: { list: 'variants' },
    style: { list: 'styles' },
    background: { list: 'background' },
  },
  video: {
    ratio: { list: 'aspectRatios', default: 'defaultRatio' },
    resolution: { list: 'resolutions', default: 'defaultResolution' },
    duration: { list: 'durations', default: 'defaultDuration' },
    mode: { list: 'modes' },
  },
};

/** A listed capability's values as text, or undefined when the catalog lists none. */
function listedValues(listed: Record<string, unknown>, key: string): string[] | undefined {
  const value = listed[key];
  return Array.isArray(value) ? value.map(String) : undefined;
}

/**
 * Checks a mapping's `accepts` table against its input and the catalog's
 * listing; throws a message naming `where` on a mismatch. Also refuses a
 * catalog model that requires source media, which a mapped model never gets.
 */
export function parseAccepts(
  raw: unknown,
  kind: MediaKind,
  input: Record<string, unknown>,
  listed: Record<string, unknown>,
  where: string,
  block: string,
  linked = false,
): Accepts {
  if (listed.sourceImage === 'required' && !(linked && carriedFields(input).has('sourceImage'))) {
    throw new Error(
      `${where}: the catalog lists sourceImage as required, but ${block.split('.')[0]} models are given one only with PUBLIC_BASE_URL set and a {sourceImage} placeholder`,
    );
  }
  if (raw === undefined) return {};
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    throw new Error(`${where}: ${block} must map request fields to the values the upstream model accepts`);
  const table = LISTED[kind] ?? {};
  const fields = carriedFields(input);
  const accepts: Accepts = {};
  for (const [field, values] of Object.entries(raw)) {
    const where_ = `${where}: ${block}.${field}`;
    if (!table[field]) throw new Error(`${where_} is not a field whose values discovery lists for ${kind} (known: ${Object.keys(table).join(', ') || 'none'})`);
    if (!fields.has(field)) throw new Error(`${where_} names a field the mapping's input does not carry (no {${field}} placeholder)`);
    if (!Array.isArray(values) || values.length === 0 || !values.every((v) => ['string', 'number', 'boolean'].includes(typeof v)))
      throw new Error(`${where_} must be a non-empty list of values`);
    const taken = values.map(String);
    const { list, default: defaultKey } = table[field];
    const catalog = listedValues(listed, list);
    if (catalog && !catalog.some((v) => taken.includes(v)))
      throw new Error(`${where_} (${taken.join(', ')}) shares no value with the catalog's ${list} (${catalog.join(', ')})`);
    const fallback = defaultKey === undefined ? undefined : listed[defaultKey];
    if (fallback !== undefined && !taken.includes(String(fallback)))
      throw new Error(`${where_} (${taken.join(', ')}) does not take the catalog's ${defaultKey} ${String(fallback)}`);
    accepts[field] = taken;
  }
  return accepts;
}

/**
 * Discovery's view of a mapped model: only the values its upstream takes, and
 * only the source and reference media it is given (`media`: the media fields
 * its mapping carries as links, empty without PUBLIC_BASE_URL).
 */
export function acceptedCapabilities(
  kind: MediaKind,
  listed: Record<string, unknown>,
  accepts: Accepts,
  media: ReadonlySet<string> = new Set(),
): Record<string, unknown> {
  const out: Record<string, unknown> = { ...listed };
  for (const [field, taken] of Object.entries(accepts)) {
    const key = LISTED[kind]?.[field]?.list;
    const values = key === undefined ? undefined : listed[key];
    if (key !== undefined && Array.isArray(values)) out[key] = values.filter((v) => taken.includes(String(v)));
  }
  const given = (field: string) => media.has(field);
  if (kind === 'image') {
    if ('sourceImage' in out && !given('sourceImage')) out.sourceImage = 'none';
    if ('referenceImages' in out && !given('referenceImages')) out.referenceImages = { max: 0 };
  }
  if (kind === 'video') {
    const inputs = new Set([
      'text',
      ...(given('sourceImage') || given('referenceImages') ? ['image'] : []),
      ...(given('referenceVideos') ? ['video'] : []),
      ...(given('referenceAudios') ? ['audio'] : []),
    ]);
    if (Array.isArray(out.inputs)) out.inputs = out.inputs.filter((i) => inputs.has(String(i)));
    if (Array.isArray(out.modes) && !given('sourceImage')) out.modes = out.modes.filter((m) => m === 'text-to-video');
    for (const [key, field] of [
      ['maxReferenceImages', 'referenceImages'],
      ['maxReferenceVideos', 'referenceVideos'],
      ['maxReferenceAudios', 'referenceAudios'],
    ] as const)
      if (key in out && !given(field)) out[key] = 0;
    if (typeof out.maxReferenceImagesByResolution === 'object' && out.maxReferenceImagesByResolution !== null && !given('referenceImages')) {
      out.maxReferenceImagesByResolution = Object.fromEntries(Object.keys(out.maxReferenceImagesByResolution).map((r) => [r, 0]));
    }
    if ('endFrame' in out && !given('endFrame')) out.endFrame = false;
    if ('referenceDurations' in out && !given('referenceVideos') && !given('referenceAudios')) out.referenceDurations = {};
  }
  if (kind === 'audio' && 'cover' in out && !given('coverAudio')) out.cover = false;
  return out;
}

/** A request value the upstream model does not take (refused at submission), or undefined. */
export function acceptsProblem(request: JobRequests[MediaKind], accepts: Accepts): string | undefined {
  for (const [field, taken] of Object.entries(accepts)) {
    const value: unknown = Reflect.get(request, field); // by name: the request kinds are interfaces without an index signature
    if (value === undefined || value === null || taken.includes(String(value))) continue;
    return `parameters.${field} ${JSON.stringify(value)} is not available for this model (its upstream takes ${taken.join(', ')}).`;
  }
  return undefined;
}
