/**
 * Voices: the public catalog (seeded from server/catalog/voices.yaml), listing
 * with pagination, and upload of a private reference voice with the media
 * checks a real service makes (content type by bytes, duration consistency,
 * transcription must succeed).
 */
import fsp from 'node:fs/promises';
import path from 'node:path';
import { readYamlFile } from '../yaml-file.ts';
import type { components } from '../../generated/api.ts';
import type { Db } from '../storage/db.ts';
import * as store from '../storage/voices.ts';
import type { VoiceRow } from '../storage/voices.ts';
import { stageBlob, type Blobs } from '../storage/blobs.ts';
import { storeReferenced } from '../storage/blob-pins.ts';
import { DomainError, invalidRequest } from './errors.ts';
import { FAMILY_NAMES, sniff, type MediaFamily } from '../media/sniff.ts';
import { probeAv } from '../media/probe.ts';
import { BIDI_CONTROLS, overLimitOr } from './assets.ts';
import { decodePcm } from '../media/pcm.ts';
import { analyzeSpeechOffThread } from '../media/vad-thread.ts';
import { NoSpeechError, TranscriptionUnavailableError, type TranscriptionProvider } from '../media/transcription.ts';
import { newId } from './ids.ts';
import type { Clock } from './clock.ts';
import type { Catalog, ModelOf } from './catalog.ts';
import { requireModel } from './media-request.ts';

export type { VoiceRow };
type Voice = components['schemas']['Voice'];
type VoiceList = components['schemas']['VoiceList'];

export const VOICES_PER_PAGE = 50;
export const MAX_VOICE_FILE_BYTES = 50 * 1024 * 1024;
export const MIN_VOICE_SECONDS = 15;
export const MAX_VOICE_SECONDS = 300;
/**
 * How far the declared `duration` may be from the decoded audio: 1.5 s or 10 %
 * of the declared duration, whichever is larger (containers round durations and
 * clients measure them differently; a wrong file is off by far more).
 */
export function durationTolerance(declaredSeconds: number): number {
  return Math.max(1.5, 0.1 * declaredSeconds);
}

// ---------------------------------------------------------------- catalog

interface CatalogEntry {
  id: string;
  name: string;
  language: string;
  traits: Record<string, unknown>;
}

/** Reads the catalog file; a broken entry stops with a message naming it. */
export function loadVoiceCatalog(file: string): CatalogEntry[] {
  const doc = readYamlFile(file) as { voices?: unknown };
  if (!Array.isArray(doc?.voices)) throw new Error(`${file}: "voices" must be a list`);
  const seen = new Set<string>();
  return doc.voices.map((raw, i) => {
    const v = raw as CatalogEntry;
    const where = `${file}: voices[${i}]`;
    if (typeof v?.id !== 'string' || !/^voice_[0-9a-f]{24}$/.test(v.id)) throw new Error(`${where}: id must be voice_<24 hex>`);
    if (seen.has(v.id)) throw new Error(`${where}: duplicate id ${v.id}`);
    seen.add(v.id);
    if (typeof v.name !== 'string' || v.name.length === 0) throw new Error(`${where}: name must be a string`);
    if (typeof v.language !== 'string' || !/^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*$/.test(v.language)) {
      throw new Error(`${where}: language must be a BCP 47-style tag`);
    }
    if (typeof v.traits !== 'object' || v.traits === null) throw new Error(`${where}: traits must be an object`);
    return v;
  });
}

/** Upserts the catalog's public voices (idempotent; stable IDs from the file). */
export async function seedCatalogVoices(db: Db, clock: Clock, file: string): Promise<number> {
  const now = clock.now().toISOString();
  const rows: VoiceRow[] = loadVoiceCatalog(file).map((v) => ({
    id: v.id,
    account_id: null,
    name: v.name,
    language: v.language,
    visibility: 'public',
    state: 'ready',
    source: 'catalog',
    blob_sha256: null,
    duration_seconds: null,
    transcript: null,
    traits: JSON.stringify(v.traits),
    created_at: now,
  }));
  await store.syncCatalogVoices(db, rows);
  return rows.length;
}

// ---------------------------------------------------------------- listing

/** The public summary of a voice (never `undefined` members: the response is validated). */
export function describeVoice(row: VoiceRow): Voice {
  return { id: row.id, name: row.name, language: row.language, visibility: row.visibility, createdAt: row.created_at };
}

export interface ListQuery {
  scope: 'mine' | 'explore';
  page: number;
  language?: string | undefined;
  /** Only the voices of this speech model (`voicesOfModel`); absent: every voice. */
  ids?: readonly string[] | undefined;
}

/**
 * The voices a speech model can speak with, for the list's `model` filter:
 * undefined when it speaks every voice (this server's own synthesizer), else the
 * voice IDs its upstream is mapped for. 422 MODEL_UNAVAILABLE when the id is not
 * a speech model of the catalog.
 */
export function voicesOfModel(catalog: Catalog, id: string, upstreamVoices: (model: string) => readonly string[] | undefined): readonly string[] | undefined {
  const speaks = (m: ModelOf<'audio'>) => {
    const operations = (m.capabilities as { operations?: unknown }).operations;
    return Array.isArray(operations) && operations.includes('speech');
  };
  requireModel(catalog, id, 'audio', speaks);
  return upstreamVoices(id);
}

/** One page of the caller's private voices or of the public voices. */
export async function listVoices(db: Db, accountId: string, q: ListQuery): Promise<VoiceList> {
  const { rows, total } = await store.listVoices(db, {
    scope: q.scope,
    accountId,
    language: q.language?.toLowerCase(),
    ids: q.ids,
    offset: (q.page - 1) * VOICES_PER_PAGE,
    limit: VOICES_PER_PAGE,
  });
  return { voices: rows.map(describeVoice), page: q.page, perPage: VOICES_PER_PAGE, total, hasMore: q.page * VOICES_PER_PAGE < total };
}

// ---------------------------------------------------------------- upload

const VOICE_FAMILIES = new Set<MediaFamily>(['mp3', 'wav', 'ogg', 'isobmff', 'aac', 'flac', 'webm']);
const FAMILY_MIME: Partial<Record<MediaFamily, string>> = {
  mp3: 'audio/mpeg',
  wav: 'audio/wav',
  ogg: 'audio/ogg',
  isobmff: 'audio/mp4',
  aac: 'audio/aac',
  flac: 'audio/flac',
  webm: 'audio/webm',
};
const ACCEPTED = 'MP3, WAV, OGG, M4A, AAC, FLAC or WebM audio';

export interface VoiceMediaTools {
  blobs: Blobs;
  ffmpegPath: string;
  ffprobePath: string;
  transcriber: TranscriptionProvider;
  /** Account policies on the voice's text (its name and transcript); throws the refusal. */
  screen?: ((texts: Array<{ field: string; text: string }>) => Promise<void>) | undefined;
}

export interface VoiceUploadInput {
  accountId: string;
  /** The uploaded file as multer stored it on disk. */
  file: { path: string; originalname: string; size: number };
  /** The `duration` form field (a decimal string, pattern-checked by the contract). */
  duration: string;
}

async function readHead(file: string, bytes = 4100): Promise<Buffer> {
  const handle = await fsp.open(file, 'r');
  try {
    const buffer = Buffer.alloc(bytes);
    const { bytesRead } = await handle.read(buffer, 0, bytes, 0);
    return buffer.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}

/** busboy hands file names over as latin1; recover UTF-8 names when they round-trip. */
function decodeFilename(name: string): string {
  const utf8 = Buffer.from(name, 'latin1').toString('utf8');
  return utf8 !== name && !utf8.includes('\uFFFD') ? utf8 : name;
}

/** The voice name: the file name without its extension, or a dated default. */
export function voiceName(originalname: string | undefined, now: Date): string {
  // Control characters (a NUL cannot even be stored in Postgres) are no part of a name.
  const base = path
    .basename(
      decodeFilename(originalname ?? '')
        .replace(/[\u0000-\u001f\u007f]/g, '')
        .replace(BIDI_CONTROLS, ''),
    )
    .replace(/\.[^.]*$/, '')
    .trim();
  if (base) return Array.from(base).slice(0, 200).join('');
  return `Voice ${now.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/**
 * Creates an owned private draft voice from an uploaded recording. Checks, in
 * order: non-empty; the bytes are one of the accepted audio formats; the
 * declared duration is 15–300 s; the file decodes; the decoded length matches
 * the declared duration within durationTolerance(); transcription succeeds.
 */
export async function createVoice(db: Db, clock: Clock, tools: VoiceMediaTools, input: VoiceUploadInput): Promise<VoiceRow> {
  const { file } = input;
  if (file.size === 0) throw invalidRequest('file is empty: upload a recording of 1 byte to 50 MiB.');
  const family = sniff(await readHead(file.path));
  if (!family || !VOICE_FAMILIES.has(family)) {
    throw invalidRequest(`file must be ${ACCEPTED}; its bytes are ${family ? `a ${FAMILY_NAMES[family]} file` : 'not a recognised audio format'}.`);
  }
  const declared = Number(input.duration);
  if (!Number.isFinite(declared) || declared < MIN_VOICE_SECONDS || declared > MAX_VOICE_SECONDS) {
    throw invalidRequest(`duration must be ${MIN_VOICE_SECONDS} to ${MAX_VOICE_SECONDS} seconds, got ${input.duration}.`);
  }
  const av = await probeAv(tools.ffprobePath, file.path).catch(overLimitOr(undefined));
  if (!av || !av.audio) throw invalidRequest(`file could not be decoded as ${ACCEPTED}.`);
  if (av.video) throw invalidRequest('file has a video stream: upload the audio only.');
  const tolerance = durationTolerance(declared);
  const pcm = await decodePcm(tools.ffmpegPath, file.path, { sampleRate: 8000, maxSeconds: MAX_VOICE_SECONDS + tolerance + 5 }).catch(() => undefined);
  if (!pcm || pcm.samples.length === 0) throw invalidRequest(`file could not be decoded as ${ACCEPTED}.`);
  const measured = pcm.durationSeconds;
  if (Math.abs(measured - declared) > tolerance) {
    throw invalidRequest(
      `duration ${input.duration} s does not match the recording, which is ${measured.toFixed(1)} s long (tolerance ±${tolerance.toFixed(1)} s).`,
    );
  }

  const analysis = await analyzeSpeechOffThread(pcm.samples, pcm.sampleRate);
  const mimeType = FAMILY_MIME[family]!;
  let transcript;
  try {
    transcript = await tools.transcriber.transcribe({ file: file.path, mimeType, pcm, analysis });
  } catch (error) {
    if (error instanceof NoSpeechError) throw invalidRequest(`Transcription failed. ${error.message}`);
    if (error instanceof TranscriptionUnavailableError) {
      throw error.kind === 'unreachable'
        ? new DomainError('PROVIDER_UNAVAILABLE', 'The transcription service is unavailable; retry later.')
        : new DomainError('PROVIDER_ERROR', 'The transcription service failed; retry later.');
    }
    throw error;
  }

  const now = clock.now();
  const name = voiceName(file.originalname, now);
  await tools.screen?.([{ field: 'file name', text: name }, ...(transcript.text ? [{ field: 'transcript', text: transcript.text }] : [])]);
  const staged = await stageBlob(tools.blobs, file.path);
  const sha256 = staged.sha256;
  const row: VoiceRow = {
    id: newId('voice'),
    account_id: input.accountId,
    name,
    language: transcript.language,
    visibility: 'private',
    state: 'ready',
    source: 'upload',
    blob_sha256: sha256,
    duration_seconds: Math.round(measured * 1000) / 1000,
    transcript: transcript.text || null,
    traits: JSON.stringify({
      mimeType,
      codec: av.audio.codec,
      medianPitchHz: analysis.medianPitchHz,
      pitchIqrSemitones: analysis.pitchIqrSemitones,
      syllablesPerSecond: analysis.syllablesPerSecond,
      voicedSeconds: analysis.voicedSeconds,
      activeLevelDb: analysis.activeLevelDb,
      transcriber: transcript.provider,
    }),
    created_at: now.toISOString(),
  };
  try {
    await storeReferenced(db, sha256, now, staged.commit, (trx) => store.insertVoice(trx, row));
  } finally {
    await staged.discard();
  }
  return row;
}
