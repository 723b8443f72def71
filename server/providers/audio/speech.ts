/**
 * The embedded speech generator: real, intelligible speech of the prompt text,
 * synthesized offline with eSpeak NG (npm `espeak-ng`, WebAssembly,
 * GPL-3.0-or-later). The voice decides language, register and base pitch;
 * `speed` scales the speaking rate, `volume` is a gain in dB, `temperature` a
 * small seeded variation of pitch and rate clause by clause. A cloned voice
 * follows the measured median pitch (and syllable rate) of its reference
 * recording. The pitch is checked on the result and corrected once, so the
 * output's median pitch lands near the voice's.
 */
import fsp from 'node:fs/promises';
import path from 'node:path';
import { createRequire } from 'node:module';
import ESpeakNg from 'espeak-ng';
import { decodePcm } from '../../media/pcm.ts';
import { MediaGenerationError, type MediaTools, type SpeechJobRequest, type SpeechVoice } from '../media-types.ts';
import { rng, seedOf } from '../random.ts';
import { medianPitchHz } from './analysis.ts';
import { applyGainDb, normalizePeak, parseWav, type MonoPcm } from './wav.ts';

/** What the speech generator reads of a speech or voice_clone job (the shared payload type). */
export type SpeechRequest = Omit<SpeechJobRequest, 'mimeType'>;

/** How eSpeak is driven for one voice. */
export interface VoiceSettings {
  /** eSpeak language voice, e.g. `en-us`, `fr-fr`. */
  language: string;
  register: 'male' | 'female';
  /** Target median pitch (Hz). */
  pitchHz: number;
  /** Speaking-rate factor (1 = eSpeak's 175 words a minute). */
  rate: number;
  /** The voice's own gain (dB). */
  volumeDb: number;
}

/** Languages this eSpeak NG build speaks (its `--voices` list). */
const ESPEAK_LANGUAGES = new Set(
  (
    'af am an ar as az ba be bg bn bs ca cmn cs cv cy da de el en-029 en-gb en-gb-scotland en-gb-x-rp en-us eo es es-419 et eu fa fi ' +
    'fr-be fr-ch fr-fr ga gd gn gu hak haw he hi hr ht hu hy ia id is it ja ka kk kl kn ko ku ky la lb lt lv mi mk ml mr ms mt my nb ne ' +
    'nl om or pa pl pt pt-br qu ro ru sd si sk sl sq sr sv sw ta te th tk tn tr tt ug uk ur uz vi yue'
  ).split(' '),
);
const LANGUAGE_ALIASES = new Map(
  Object.entries({ en: 'en-us', 'en-au': 'en-gb', 'es-mx': 'es-419', fr: 'fr-fr', 'fr-ca': 'fr-fr', zh: 'cmn', 'zh-cn': 'cmn', no: 'nb' }),
);

/** The eSpeak language for a BCP 47 tag: exact, alias, primary subtag, else American English. */
export function espeakLanguage(tag: string | null): string {
  const t = (tag ?? 'en-us').toLowerCase();
  const primary = t.split('-')[0]!;
  for (const candidate of [t, LANGUAGE_ALIASES.get(t), primary, LANGUAGE_ALIASES.get(primary)]) {
    if (candidate && ESPEAK_LANGUAGES.has(candidate)) return candidate;
  }
  return 'en-us';
}

/**
 * Median pitch (Hz) eSpeak produces at `-p` 0, 25, 50, 75, 99, measured on
 * American English with the YIN analysis of server/media/vad.ts: the male base
 * voice and the female variant `+f3`.
 */
const PITCH_CURVES = {
  male: { variant: '', hz: [75.5, 84.0, 100.6, 129.7, 169.1] },
  female: { variant: '+f3', hz: [146.6, 171.3, 207.8, 261.7, 334.3] },
} as const;
const CURVE_P = [0, 25, 50, 75, 99];

/** eSpeak's `-p` (0–99) expected to give `hz` in a register (log-linear between the measured points). */
export function pitchSetting(register: VoiceSettings['register'], hz: number): number {
  const curve = PITCH_CURVES[register].hz;
  const x = Math.log(hz);
  for (let i = 0; i < curve.length - 1; i++) {
    const lo = Math.log(curve[i]!);
    const hi = Math.log(curve[i + 1]!);
    if (x <= hi || i === curve.length - 2) {
      const t = (x - lo) / (hi - lo);
      return Math.round(Math.max(0, Math.min(99, CURVE_P[i]! + t * (CURVE_P[i + 1]! - CURVE_P[i]!))));
    }
  }
  return 50;
}

/** eSpeak's syllable rate at 175 words a minute, as voice upload measures it (server/media/vad.ts). */
const ESPEAK_SYLLABLES_PER_SECOND = 4.3;
/** Above this median pitch a voice is rendered with the female variant. */
const FEMALE_ABOVE_HZ = 160;

const num = (v: unknown, fallback: number): number => (typeof v === 'number' && Number.isFinite(v) ? v : fallback);
const clamp = (v: number, lo: number, hi: number) => Math.max(lo, Math.min(hi, v));

/**
 * Settings for a voice: a catalog voice by its traits (gender, pitchHz, rate,
 * volumeDb, language); an uploaded voice by what was measured on its reference
 * (medianPitchHz, syllablesPerSecond), `measuredPitchHz` filling a gap.
 */
export function voiceSettings(voice: SpeechVoice, measuredPitchHz: number | null = null): VoiceSettings {
  const t = voice.traits;
  if (voice.source === 'catalog') {
    const register = t.gender === 'female' ? 'female' : 'male';
    return {
      language: espeakLanguage(voice.language),
      register,
      pitchHz: num(t.pitchHz, register === 'female' ? 200 : 115),
      rate: num(t.rate, 1),
      volumeDb: num(t.volumeDb, 0),
    };
  }
  const pitchHz = clamp(num(t.medianPitchHz, measuredPitchHz ?? 120), 70, 330);
  const rate = clamp(num(t.syllablesPerSecond, ESPEAK_SYLLABLES_PER_SECOND) / ESPEAK_SYLLABLES_PER_SECOND, 0.75, 1.3);
  return { language: espeakLanguage(voice.language), register: pitchHz > FEMALE_ABOVE_HZ ? 'female' : 'male', pitchHz, rate, volumeDb: 0 };
}

// ---------------------------------------------------------------- eSpeak

let compiled: Promise<WebAssembly.Module> | undefined;
/** The eSpeak wasm, compiled once per process (each synthesis gets a fresh instance). */
function espeakWasm(): Promise<WebAssembly.Module> {
  compiled ??= (async () => {
    const main = createRequire(import.meta.url).resolve('espeak-ng');
    return WebAssembly.compile(await fsp.readFile(path.join(path.dirname(main), 'espeak-ng.wasm')));
  })();
  return compiled;
}

/** Runs eSpeak NG once and returns its WAV as mono PCM (22.05 kHz). */
export async function espeak(args: string[], text: string): Promise<MonoPcm> {
  const module = await espeakWasm();
  const engine = await ESpeakNg({
    arguments: [...args, '-w', '/out.wav', text],
    print() {},
    printErr() {},
    instantiateWasm(imports, done) {
      void WebAssembly.instantiate(module, imports).then((instance) => done(instance, module));
      return {};
    },
  });
  return parseWav(Buffer.from(engine.FS.readFile('/out.wav')));
}

const escapeXml = (s: string) => s.replace(/[<>&"']/g, (c) => `&#${c.charCodeAt(0)};`);

/**
 * The SSML eSpeak reads: the text clause by clause, each with a seeded pitch
 * and rate offset whose size grows with `temperature` (0 → plain text), the
 * pitch scaled by `pitchFactor`.
 */
export function prosodyMarkup(text: string, temperature: number, seed: number, pitchFactor = 1): string {
  const random = rng(seed);
  const clauses = text.split(/(?<=[.!?;:,])\s+/).filter((c) => c.trim());
  const parts = clauses.map((clause) => {
    const pitch = Math.round(((1 + (random() * 2 - 1) * 0.15 * temperature) * pitchFactor - 1) * 100);
    const rate = 100 + Math.round((random() * 2 - 1) * 8 * temperature);
    const body = escapeXml(clause);
    return pitch === 0 && rate === 100 ? body : `<prosody pitch="${pitch >= 0 ? '+' : ''}${pitch}%" rate="${rate}%">${body}</prosody>`;
  });
  return `<speak>${parts.join(' ')}</speak>`;
}

/** The uploaded reference's median pitch, measured when the stored traits lack it. */
async function referencePitch(voice: SpeechVoice, tools: MediaTools): Promise<number | null> {
  if (voice.source !== 'upload' || typeof voice.traits.medianPitchHz === 'number' || !voice.blobSha256) return null;
  const local = await tools.blobFile(voice.blobSha256).catch(() => undefined);
  const pcm = local
    ? await decodePcm(tools.ffmpegPath, local.path, { sampleRate: 8000, maxSeconds: 60 })
        .catch(() => undefined)
        .finally(() => local.release())
    : undefined;
  if (!pcm) throw new MediaGenerationError('INVALID_REFERENCE', 'The reference recording of this voice could not be read.');
  return medianPitchHz(pcm);
}

/** Synthesizes the request's speech as mono PCM at its final level. */
export async function renderSpeech(req: SpeechRequest, tools: MediaTools): Promise<MonoPcm> {
  const settings = voiceSettings(req.voice, await referencePitch(req.voice, tools));
  const wpm = Math.round(clamp(175 * settings.rate * req.speed, 80, 450));
  const seed = seedOf(req.text, req.voice.id, req.temperature, req.seed);
  const voiceName = `${settings.language}${PITCH_CURVES[settings.register].variant}`;
  const run = (p: number, factor: number) =>
    espeak(['-m', '-v', voiceName, '-s', String(wpm), '-p', String(p)], prosodyMarkup(req.text, req.temperature, seed, factor));

  let p = pitchSetting(settings.register, settings.pitchHz);
  let factor = 1;
  let pcm = await run(p, factor);
  // Languages and texts move eSpeak's pitch: measure and correct (at most three times) while it is off by more
  // than 5 %: first eSpeak's base pitch, and once that is at its limit, an SSML pitch factor.
  for (let attempt = 0; attempt < 3; attempt++) {
    const measured = medianPitchHz(pcm);
    if (!measured || Math.abs(Math.log(measured / settings.pitchHz)) <= Math.log(1.05)) break;
    const corrected = pitchSetting(settings.register, settings.pitchHz * (pitchHzAt(settings.register, p) / measured));
    if (corrected !== p) p = corrected;
    else factor = clamp(factor * (settings.pitchHz / measured) ** 1.5, 0.5, 3);
    pcm = await run(p, factor);
  }
  if (pcm.samples.length === 0) throw new MediaGenerationError('GENERATION_FAILED', 'The speech synthesizer produced no audio for this text.');
  normalizePeak(pcm.samples, -10);
  applyGainDb(pcm.samples, settings.volumeDb + req.volume);
  return pcm;
}

/** The pitch (Hz) the calibration curve expects at `-p`. */
function pitchHzAt(register: VoiceSettings['register'], p: number): number {
  const curve = PITCH_CURVES[register].hz;
  const i = Math.min(
    curve.length - 2,
    Math.max(
      0,
      CURVE_P.findIndex((x, k) => p >= x && p <= CURVE_P[k + 1]!),
    ),
  );
  const t = (p - CURVE_P[i]!) / (CURVE_P[i + 1]! - CURVE_P[i]!);
  return Math.exp(Math.log(curve[i]!) + t * (Math.log(curve[i + 1]!) - Math.log(curve[i]!)));
}
