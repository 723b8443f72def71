/**
 * The catalog's capabilities and rate cards, parsed and checked once at load into
 * one type per kind, so submissions read typed fields instead of casting. A broken
 * entry stops the start with an error naming the entry and the field.
 */
import type { TokenRates } from './spend.ts';

export interface ImageCapabilities {
  ratios: string[];
  defaultRatio: string;
  resolutions: string[];
  defaultResolution: string;
  maxOutputs: number;
  outputFormats: string[];
  negativePrompt: boolean;
  magicPrompt: boolean;
  background: string[];
  variants: string[];
  styles: string[];
  sourceImage: 'required' | 'optional' | 'none';
  referenceImages: { max: number };
  maxPromptChars: number;
}

export interface ImagePricing {
  /** Gems per output, by resolution (every listed resolution has one). */
  perOutput: Record<string, number>;
}

export type VideoMode = 'text-to-video' | 'image-to-video';

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

export interface VideoPricing {
  /** Gems per second, by resolution (every listed resolution has one). */
  perSecond: Record<string, number>;
  audioPerSecond?: number;
}

interface Range {
  min: number;
  max: number;
  default: number;
}

export interface SpeechCapabilities {
  operations: string[];
  maxPromptChars: number;
  speed: Range;
  volume: Range;
  temperature: Range;
  outputFormat: string;
}

export interface SpeechPricing {
  perThousandChars: number;
  minimum: number;
}

export interface MusicCapabilities {
  operations: string[];
  modes: string[];
  durations: string[];
  autoDurationSeconds: number;
  vocalGender: string[];
  instrumental: string[];
  cover: boolean;
  maxPromptChars: { simple: number; advanced: number };
  outputFormat: string;
}

export interface MusicPricing {
  perThirtySeconds: number;
}

/** The typed part of each kind of entry (audio: speech or music, told apart by its operations). */
export type Entry =
  | { kind: 'image'; capabilities: ImageCapabilities; pricing: ImagePricing }
  | { kind: 'video'; capabilities: VideoCapabilities; pricing: VideoPricing }
  | { kind: 'audio'; audio: 'speech'; capabilities: SpeechCapabilities; pricing: SpeechPricing }
  | { kind: 'audio'; audio: 'music'; capabilities: MusicCapabilities; pricing: MusicPricing }
  | { kind: 'text'; capabilities: Record<string, unknown>; pricing: TokenRates };

type Obj = Record<string, unknown>;

/** Checks one field at a time, naming where it is when it is wrong. */
class Fields {
  constructor(
    private readonly o: Obj,
    private readonly where: string,
  ) {}
  private fail(name: string, what: string): never {
    throw new Error(`${this.where}.${name} must be ${what}`);
  }
  private get(name: string): unknown {
    return Object.hasOwn(this.o, name) ? this.o[name] : undefined;
  }
  /** Fails on `name` unless `ok`. */
  check(ok: boolean, name: string, what: string): void {
    if (!ok) this.fail(name, what);
  }
  optNum(name: string): number | undefined {
    return this.get(name) === undefined ? undefined : this.num(name);
  }
  num(name: string, min = 0): number {
    const v = this.get(name);
    if (typeof v !== 'number' || !Number.isFinite(v) || v < min) this.fail(name, `a number ≥ ${min}`);
    return v;
  }
  bool(name: string): boolean {
    const v = this.get(name);
    if (typeof v !== 'boolean') this.fail(name, 'true or false');
    return v;
  }
  str<T extends string = string>(name: string, allowed?: readonly T[]): T {
    const v = this.get(name);
    if (typeof v !== 'string' || (allowed && !allowed.includes(v as T))) this.fail(name, allowed ? `one of ${allowed.join(', ')}` : 'a string');
    return v as T;
  }
  list<T>(name: string, item: (v: unknown) => v is T, what: string): T[] {
    const v = this.get(name);
    if (!Array.isArray(v) || !v.every(item)) this.fail(name, `a list of ${what}`);
    return v;
  }
  strings<T extends string = string>(name: string, allowed?: readonly T[]): T[] {
    return this.list(name, (x): x is T => typeof x === 'string' && (!allowed || allowed.includes(x as T)), allowed ? allowed.join(' | ') : 'strings');
  }
  obj(name: string, optional = false): Fields | undefined {
    const v = this.get(name);
    if (v === undefined && optional) return undefined;
    if (!v || typeof v !== 'object' || Array.isArray(v)) this.fail(name, 'an object');
    return new Fields(v as Obj, `${this.where}.${name}`);
  }
  sub(name: string): Fields {
    return this.obj(name)!;
  }
  /** An object of numbers whose keys cover `keys` (a price for every listed option). */
  table(name: string, keys: readonly string[]): Record<string, number> {
    const t = this.sub(name);
    return Object.fromEntries(keys.map((k) => [k, t.num(k)]));
  }
  range(name: string): Range {
    const r = this.sub(name);
    return { min: r.num('min', -Infinity), max: r.num('max', -Infinity), default: r.num('default', -Infinity) };
  }
  /** A default must be one of the listed values. */
  member<T>(name: string, value: T, list: readonly T[]): T {
    this.check(list.includes(value), name, `one of the listed values (${list.join(', ')})`);
    return value;
  }
}

const isNum = (x: unknown): x is number => typeof x === 'number' && Number.isFinite(x);
const isBool = (x: unknown): x is boolean => typeof x === 'boolean';

function image(c: Fields, p: Fields): Entry {
  const ratios = c.strings('ratios');
  const resolutions = c.strings('resolutions');
  const capabilities: ImageCapabilities = {
    ratios,
    defaultRatio: c.member('defaultRatio', c.str('defaultRatio'), ratios),
    resolutions,
    defaultResolution: c.member('defaultResolution', c.str('defaultResolution'), resolutions),
    maxOutputs: c.num('maxOutputs', 1),
    outputFormats: c.strings('outputFormats', ['png', 'jpeg', 'webp']),
    negativePrompt: c.bool('negativePrompt'),
    magicPrompt: c.bool('magicPrompt'),
    background: c.strings('background', ['auto', 'transparent', 'opaque']),
    variants: c.strings('variants'),
    styles: c.strings('styles'),
    sourceImage: c.str('sourceImage', ['required', 'optional', 'none'] as const),
    referenceImages: { max: c.sub('referenceImages').num('max') },
    maxPromptChars: c.num('maxPromptChars', 1),
  };
  c.check(capabilities.variants.length > 0, 'variants', 'a list of at least one variant');
  return { kind: 'image', capabilities, pricing: { perOutput: p.table('perOutput', resolutions) } };
}

function video(c: Fields, p: Fields): Entry {
  const durations = c.list('durations', isNum, 'numbers');
  const resolutions = c.strings('resolutions');
  const aspectRatios = c.strings('aspectRatios');
  const byResolution = c.obj('maxReferenceImagesByResolution', true);
  const refDurations = c.obj('referenceDurations', true);
  const span = (f: Fields | undefined, name: string) => {
    const s = f?.obj(name, true);
    return s ? { min: s.num('min'), max: s.num('max') } : undefined;
  };
  const capabilities: VideoCapabilities = {
    modes: c.strings('modes', ['text-to-video', 'image-to-video'] as const),
    aspectRatios,
    defaultRatio: c.member('defaultRatio', c.str('defaultRatio'), aspectRatios),
    durations,
    defaultDuration: c.member('defaultDuration', c.num('defaultDuration'), durations),
    resolutions,
    defaultResolution: c.member('defaultResolution', c.str('defaultResolution'), resolutions),
    audio: c.list('audio', isBool, 'true/false'),
    endFrame: c.bool('endFrame'),
    maxReferenceImages: c.num('maxReferenceImages'),
    maxReferenceImagesByResolution: byResolution ? c.table('maxReferenceImagesByResolution', resolutions) : undefined,
    maxReferenceVideos: c.num('maxReferenceVideos'),
    maxReferenceAudios: c.num('maxReferenceAudios'),
    referenceDurations: refDurations ? { video: span(refDurations, 'video'), audio: span(refDurations, 'audio') } : undefined,
    maxPromptChars: c.num('maxPromptChars', 1),
  };
  return { kind: 'video', capabilities, pricing: { perSecond: p.table('perSecond', resolutions), audioPerSecond: p.optNum('audioPerSecond') } };
}

function audio(c: Fields, p: Fields): Entry {
  const operations = c.strings('operations', ['speech', 'voice_clone', 'music']);
  const base = { operations, outputFormat: c.str('outputFormat') };
  if (operations.includes('music')) {
    c.check(operations.length === 1, 'operations', "['music'] (music is served by a model of its own)");
    const limits = c.sub('maxPromptChars');
    const durations = c.strings('durations');
    c.check(
      durations.every((d) => d === 'off' || Number(d) > 0),
      'durations',
      "a list of 'off' or seconds",
    );
    return {
      kind: 'audio',
      audio: 'music',
      capabilities: {
        ...base,
        modes: c.strings('modes', ['simple', 'advanced']),
        durations,
        autoDurationSeconds: c.num('autoDurationSeconds', 1),
        vocalGender: c.strings('vocalGender', ['auto', 'm', 'f']),
        instrumental: c.strings('instrumental', ['on', 'off']),
        cover: c.bool('cover'),
        maxPromptChars: { simple: limits.num('simple', 1), advanced: limits.num('advanced', 1) },
      },
      pricing: { perThirtySeconds: p.num('perThirtySeconds') },
    };
  }
  return {
    kind: 'audio',
    audio: 'speech',
    capabilities: {
      ...base,
      maxPromptChars: c.num('maxPromptChars', 1),
      speed: c.range('speed'),
      volume: c.range('volume'),
      temperature: c.range('temperature'),
    },
    pricing: { perThousandChars: p.num('perThousandChars'), minimum: p.num('minimum') },
  };
}

/** Token rates (text models and the analysis model). */
function tokenRates(p: Fields): TokenRates {
  return { inputPerThousandTokens: p.num('inputPerThousandTokens'), outputPerThousandTokens: p.num('outputPerThousandTokens') };
}

/**
 * The typed capabilities and pricing of one entry, or an error naming `where`
 * and the field. (Discovery lists the file's own capabilities object, untouched.)
 */
export function parseEntry(kind: Entry['kind'], raw: { capabilities: unknown; pricing: unknown }, where: string): Entry {
  const top = new Fields(raw, where);
  const c = top.sub('capabilities');
  const p = top.sub('pricing');
  if (kind === 'image') return image(c, p);
  if (kind === 'video') return video(c, p);
  if (kind === 'audio') return audio(c, p);
  return { kind: 'text', capabilities: raw.capabilities as Obj, pricing: tokenRates(p) };
}

/** The rates of the analysis model entry. */
export function parseRates(raw: unknown, where: string): TokenRates {
  return tokenRates(new Fields({ pricing: raw }, where).sub('pricing'));
}
