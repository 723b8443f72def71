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
import { MediaGenerationError, type JobRequests, type MediaJob, type MediaKind, type MediaTools } from '../media-types.ts';

/** The fields a placeholder may name, per kind (the job request's own fields). */
export const REQUEST_FIELDS: Record<MediaKind, readonly string[]> = {
  image: [
    'prompt',
    'negativePrompt',
    'ratio',
    'resolution',
    'width',
    'height',
    'outputCount',
    'background',
    'variant',
    'style',
    'outputFormat',
    'magicPrompt',
    'seed',
  ],
  video: ['prompt', 'mode', 'duration', 'ratio', 'resolution', 'width', 'height', 'fps', 'audio', 'seed'],
  audio: [
    'prompt',
    'text',
    'operation',
    'musicMode',
    'instrumental',
    'style',
    'title',
    'negativeTags',
    'vocalGender',
    'durationSeconds',
    'speed',
    'volume',
    'temperature',
    'seed',
  ],
};

/**
 * The source and reference media fields a placeholder may name, per kind: the
 * asset goes upstream as a signed link to this server (`PUBLIC_BASE_URL`), a
 * list of them for a list field.
 */
export const MEDIA_FIELDS: Record<MediaKind, readonly string[]> = {
  image: ['sourceImage', 'referenceImages'],
  video: ['sourceImage', 'endFrame', 'referenceImages', 'referenceVideos', 'referenceAudios'],
  audio: ['coverAudio'],
};

/** Every media field of a request that is given (a non-empty id or list). */
function givenMedia(request: JobRequests[MediaKind]): string[] {
  return [...new Set(Object.values(MEDIA_FIELDS).flat())].filter((f) => {
    // A read by field name: the request kinds are interfaces without an index signature.
    const value: unknown = Reflect.get(request, f);
    return Array.isArray(value) ? value.length > 0 : Boolean(value);
  });
}

/**
 * What a mapped model cannot be given (refused at submission, before anything
 * is reserved): source and reference media its mapping does not carry, or any
 * without `PUBLIC_BASE_URL` (`linked` false). An asset is private to this
 * server: an upstream reaches it only by a signed link under a public base
 * URL. Sending the request without it would run (and charge) another
 * generation than the one asked, such as text-to-video for image-to-video.
 */
export function mappedRequestProblem(
  request: JobRequests[MediaKind],
  what: string,
  carried: ReadonlySet<string> = new Set(),
  linked = false,
): string | undefined {
  const missing = givenMedia(request).filter((f) => !linked || !carried.has(f));
  if (missing.length === 0) return undefined;
  if (!linked)
    return `this model is given text and settings only (its upstream is ${what} that cannot receive this server's assets without PUBLIC_BASE_URL): leave out sourceImage, endFrame and referenceAssetIds.`;
  return `this model's upstream (${what}) is not given ${missing.join(', ')}: leave ${missing.length === 1 ? 'it' : 'them'} out.`;
}

/** The request fields a mapping's input carries (its placeholders). */
export function carriedFields(input: Record<string, unknown>): Set<string> {
  const fields = new Set<string>();
  for (const value of Object.values(input)) if (typeof value === 'string') for (const m of value.matchAll(PLACEHOLDER)) fields.add(m[1]!);
  return fields;
}

/**
 * The request with its media ids replaced by signed links an upstream can
 * fetch (`tools.assetLink`); a slot whose asset is gone, or a worker without
 * links, fails uncharged.
 */
export async function withAssetLinks<R extends JobRequests[MediaKind]>(request: R, tools: MediaTools): Promise<R> {
  const given = givenMedia(request);
  if (given.length === 0) return request;
  const out = { ...request };
  const link = async (id: string) => {
    const url = await tools.assetLink?.(id);
    if (!url)
      throw new MediaGenerationError(
        'INVALID_REFERENCE',
        `Reference ${id} could not be handed to the upstream (it is gone, or this worker has no PUBLIC_BASE_URL); nothing was charged.`,
      );
    return url;
  };
  for (const field of given) {
    const value: unknown = Reflect.get(out, field);
    Reflect.set(out, field, Array.isArray(value) ? await Promise.all((value as string[]).map(link)) : await link(value as string));
  }
  return out;
}

const PLACEHOLDER = /\{([A-Za-z]+)\}/g;

/** Checks a mapping's `input` (`block`: its name in errors, e.g. "replicate.input"); throws a message naming `where`. */
export function parseInputMapping(input: unknown, kind: MediaKind, where: string, block: string): Record<string, unknown> {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) throw new Error(`${where}: ${block} must map the model's input names to values`);
  for (const [name, value] of Object.entries(input)) {
    if (typeof value === 'string') {
      for (const m of value.matchAll(PLACEHOLDER)) {
        const known = [...REQUEST_FIELDS[kind], ...MEDIA_FIELDS[kind]];
        if (!known.includes(m[1]!))
          throw new Error(`${where}: ${block}.${name} names {${m[1]}}, which a ${kind} request does not have (known: ${known.join(', ')})`);
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

/** The job with its media as links, for a slot that has not asked the upstream yet (a resumed one creates nothing). */
export async function jobWithLinks<J extends MediaJob>(job: J, tools: MediaTools): Promise<J> {
  if (await tools.remoteCalls.find(job.index)) return job;
  return { ...job, request: await withAssetLinks(job.request, tools) };
}

/** The media fields a mapping hands upstream as links: those it carries, when links can be made (PUBLIC_BASE_URL). */
export function linkedMedia(kind: MediaKind, input: Record<string, unknown>, linked: boolean): Set<string> {
  return linked ? new Set([...carriedFields(input)].filter((f) => MEDIA_FIELDS[kind].includes(f))) : new Set();
}
