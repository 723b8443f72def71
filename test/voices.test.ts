/**
 * GET and POST /api/generate/voices at the real server: the explore catalog and
 * pagination, the upload rules one by one, the voice-activity check on real
 * synthesised speech versus silence, noise and tones, and a remote
 * OpenAI-compatible transcription provider.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { errorOf, startTestServer, type TestServer } from './helpers/server.ts';
import * as media from './helpers/media.ts';
import { until } from './helpers/poll.ts';
import { findVoice } from '../server/storage/voices.ts';
import { loadVoiceCatalog, seedCatalogVoices } from '../server/domain/voices.ts';
import { systemClock } from '../server/domain/clock.ts';

const VOICES = '/api/generate/voices';

interface Part {
  name: string;
  value: string | Buffer;
  filename?: string;
  type?: string;
}

/** A multipart body built by hand, for shapes FormData cannot make (an empty file name). */
function multipart(parts: Part[]): { body: Buffer; contentType: string } {
  const boundary = `----gemforge${Math.random().toString(16).slice(2)}`;
  const chunks: Buffer[] = [];
  for (const p of parts) {
    const disposition = `form-data; name="${p.name}"${p.filename !== undefined ? `; filename="${p.filename}"` : ''}`;
    const type = p.filename !== undefined ? `\r\nContent-Type: ${p.type ?? 'application/octet-stream'}` : '';
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: ${disposition}${type}\r\n\r\n`));
    chunks.push(typeof p.value === 'string' ? Buffer.from(p.value) : p.value);
    chunks.push(Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}

describe('voices', () => {
  let s: TestServer;
  let key: string;
  let accountId: string;
  let speech20: string;

  before(async () => {
    s = await startTestServer();
    ({ secret: key, accountId } = await s.user());
    speech20 = await media.speech(20);
  });
  after(() => s.close());

  async function send(parts: Part[], k = key): Promise<Response> {
    const { body, contentType } = multipart(parts);
    return fetch(new URL(VOICES, s.url), {
      method: 'POST',
      headers: { authorization: `Bearer ${k}`, 'content-type': contentType },
      body: body as Uint8Array<ArrayBuffer>,
    });
  }

  const fileParts = (file: Buffer | string, duration: string, filename = 'narration.wav'): Part[] => [
    { name: 'file', value: typeof file === 'string' ? fs.readFileSync(file) : file, filename, type: 'audio/wav' },
    { name: 'duration', value: duration },
    { name: 'rightsConfirmed', value: 'true' },
  ];

  async function createdVoice(res: Response): Promise<{ id: string; name: string; language: string | null; visibility: string; createdAt: string }> {
    const text = await res.text();
    assert.equal(res.status, 201, text);
    const { voice } = JSON.parse(text) as { voice: { id: string; name: string; language: string | null; visibility: string; createdAt: string } };
    assert.match(voice.id, /^voice_[0-9a-f]{24}$/);
    assert.equal(voice.visibility, 'private');
    return voice;
  }

  async function invalid(res: Response, pattern: RegExp, status = 422): Promise<void> {
    const e = await errorOf(res);
    assert.equal(e.status, status, e.message);
    assert.equal(e.code, 'INVALID_REQUEST');
    assert.match(e.message, pattern);
  }

  async function list(
    query: string,
    k = key,
  ): Promise<{
    voices: Array<{ id: string; name: string; language: string | null; visibility: string }>;
    page: number;
    perPage: number;
    total: number;
    hasMore: boolean;
  }> {
    const res = await fetch(new URL(`${VOICES}${query}`, s.url), { headers: { authorization: `Bearer ${k}` } });
    const text = await res.text();
    assert.equal(res.status, 200, text);
    return JSON.parse(text);
  }

  // ------------------------------------------------------------ listing

  it('when explore is listed, then more than 50 public voices page 50 at a time with pagination members', async () => {
    const catalogSize = loadVoiceCatalog(s.config.voiceCatalogPath).length;
    assert.ok(catalogSize > 50);
    const p1 = await list('?scope=explore');
    assert.deepEqual(Object.keys(p1).sort(), ['hasMore', 'page', 'perPage', 'total', 'voices']);
    assert.equal(p1.voices.length, 50);
    assert.deepEqual([p1.page, p1.perPage, p1.total, p1.hasMore], [1, 50, catalogSize, true]);
    const p2 = await list('?scope=explore&page=2');
    assert.equal(p2.voices.length, catalogSize - 50);
    assert.equal(p2.hasMore, false);
    const ids = new Set([...p1.voices, ...p2.voices].map((v) => v.id));
    assert.equal(ids.size, catalogSize, 'pages do not overlap');
    for (const v of p1.voices) {
      assert.equal(v.visibility, 'public');
      assert.equal(typeof v.language, 'string');
    }
    const names = p1.voices.map((v) => v.name);
    assert.deepEqual(
      names,
      [...names].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)),
      'stable order by name',
    );
    const p3 = await list('?scope=explore&page=3');
    assert.deepEqual([p3.voices.length, p3.total, p3.hasMore], [0, catalogSize, false]);
    assert.deepEqual((await list('?scope=explore&page=2')).voices, p2.voices, 'the same page twice is the same');
  });

  it('when a language is given, then it matches exactly or by primary subtag, case-insensitively', async () => {
    const catalog = loadVoiceCatalog(s.config.voiceCatalogPath);
    const en = await list('?scope=explore&language=en');
    assert.equal(en.total, catalog.filter((v) => v.language.toLowerCase().startsWith('en-')).length);
    assert.ok(en.voices.every((v) => /^en-/i.test(v.language!)));
    const enUs = await list('?scope=explore&language=EN-us');
    assert.equal(enUs.total, catalog.filter((v) => v.language === 'en-US').length);
    assert.ok(enUs.voices.every((v) => v.language === 'en-US'));
    assert.ok(new Set(catalog.map((v) => v.language.split('-')[0])).size >= 8, 'several languages');
    assert.equal((await list('?scope=explore&language=xx')).total, 0);
  });

  it('when the query breaks the contract, then 422 INVALID_REQUEST', async () => {
    for (const q of ['?page=0', '?page=10001', '?page=abc', '?scope=everyone', '?language=e', '?language=en_US', '?sort=name']) {
      const res = await fetch(new URL(`${VOICES}${q}`, s.url), { headers: { authorization: `Bearer ${key}` } });
      const e = await errorOf(res);
      assert.equal(e.status, 422, `${q}: ${e.message}`);
    }
  });

  it('when the catalog is seeded again, then nothing is duplicated', async () => {
    const n = await seedCatalogVoices(s.db, systemClock, s.config.voiceCatalogPath);
    await seedCatalogVoices(s.db, systemClock, s.config.voiceCatalogPath);
    assert.equal((await list('?scope=explore')).total, n);
  });

  it('when keys lack the scope or are missing, then 403 INSUFFICIENT_SCOPE or 401 INVALID_API_KEY', async () => {
    const generateOnly = (await s.key(accountId, { scopes: ['generate'] })).secret;
    const readOnly = (await s.key(accountId, { scopes: ['read'] })).secret;
    const listRes = await fetch(new URL(VOICES, s.url), { headers: { authorization: `Bearer ${generateOnly}` } });
    assert.equal((await errorOf(listRes)).code, 'INSUFFICIENT_SCOPE');
    assert.equal((await errorOf(await send(fileParts(speech20, '20'), readOnly))).code, 'INSUFFICIENT_SCOPE');
    assert.equal((await errorOf(await fetch(new URL(VOICES, s.url)))).code, 'INVALID_API_KEY');
    const anonymous = await fetch(new URL(VOICES, s.url), { method: 'POST', body: new FormData() });
    assert.equal((await errorOf(anonymous)).code, 'INVALID_API_KEY');
  });

  // ------------------------------------------------------------ upload: accepted

  it('when speech is uploaded, then a private draft named after the file appears in mine only', async () => {
    const owner = await s.user();
    const voice = await createdVoice(await send(fileParts(speech20, '20', 'My narration voice.wav'), owner.secret));
    assert.equal(voice.name, 'My narration voice');
    assert.ok(!Number.isNaN(Date.parse(voice.createdAt)));

    const mine = await list('', owner.secret);
    assert.deepEqual(
      mine.voices.map((v) => v.id),
      [voice.id],
    );
    assert.deepEqual([mine.total, mine.hasMore], [1, false]);
    const explore = [...(await list('?scope=explore&page=1')).voices, ...(await list('?scope=explore&page=2')).voices];
    assert.ok(!explore.some((v) => v.id === voice.id), 'never in explore');
    assert.ok(!(await list('?scope=mine')).voices.some((v) => v.id === voice.id), 'not in another account');

    const row = (await findVoice(s.db, voice.id))!;
    assert.equal(row.account_id, owner.accountId);
    assert.equal(row.source, 'upload');
    assert.ok(Math.abs(row.duration_seconds! - 20) < 0.2);
    const traits = JSON.parse(row.traits) as { medianPitchHz: number; syllablesPerSecond: number; transcriber: string };
    assert.ok(traits.medianPitchHz > 70 && traits.medianPitchHz < 250, JSON.stringify(traits));
    assert.equal(traits.transcriber, 'embedded-vad');
  });

  for (const format of ['mp3', 'wav', 'ogg', 'm4a', 'aac', 'flac', 'webm'] as const) {
    it(`when speech is uploaded as ${format}, then it is accepted by content`, async () => {
      const file = await media.encodeAudio(speech20, format, 'speech-20');
      const voice = await createdVoice(await send(fileParts(file, '20', `speech.${format}`)));
      assert.equal(voice.name, 'speech');
    });
  }

  it('when the file name is only an extension or blank, then the voice gets a dated default name', async () => {
    const voice = await createdVoice(await send(fileParts(speech20, '20', '.wav')));
    assert.match(voice.name, /^Voice \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC$/);
    const blank = await createdVoice(await send(fileParts(speech20, '20', '   .mp3')));
    assert.match(blank.name, /^Voice /);
    // An empty filename="" makes the part a plain text field for multipart parsers: 422.
    await invalid(await send(fileParts(speech20, '20', '')), /file must be an uploaded file part/);
  });

  it('when the declared duration is off by less than the tolerance (1.5 s or 10 %), then it is accepted', async () => {
    await createdVoice(await send(fileParts(speech20, '21.4')));
    await createdVoice(await send(fileParts(speech20, '18.6')));
  });

  // ------------------------------------------------------------ upload: rules one by one

  it('when duration is outside 15–300 or not a decimal, then 422', async () => {
    await invalid(await send(fileParts(speech20, '14.9')), /duration must match pattern/);
    await invalid(await send(fileParts(speech20, '300.5')), /duration must match pattern/);
    await invalid(await send(fileParts(speech20, 'twenty')), /duration/);
    await invalid(await send(fileParts(speech20, '-20')), /duration/);
  });

  it('when the declared duration does not match the audio, then 422 names both lengths', async () => {
    await invalid(await send(fileParts(speech20, '40')), /does not match the recording, which is 20\.0 s/);
    await invalid(await send(fileParts(speech20, '15')), /tolerance/);
  });

  it('when rightsConfirmed is not the literal true or is missing, then 422', async () => {
    const parts = fileParts(speech20, '20');
    await invalid(await send([parts[0]!, parts[1]!, { name: 'rightsConfirmed', value: 'false' }]), /rightsConfirmed/);
    await invalid(await send([parts[0]!, parts[1]!, { name: 'rightsConfirmed', value: 'TRUE' }]), /rightsConfirmed/);
    await invalid(await send([parts[0]!, parts[1]!]), /rightsConfirmed/);
  });

  it('when a field is missing or an extra field is sent, then 422', async () => {
    const [file, duration, rights] = fileParts(speech20, '20');
    await invalid(await send([file, rights]), /duration/);
    await invalid(await send([duration, rights]), /file/);
    await invalid(await send([file, duration, rights, { name: 'name', value: 'x' }]), /name|additional/i);
  });

  it('when file is a text field, a second file is sent, or the file part has another name, then 422', async () => {
    const [file, duration, rights] = fileParts(speech20, '20');
    await invalid(await send([{ name: 'file', value: 'not a file' }, duration, rights]), /file must be an uploaded file part/);
    await invalid(await send([file, { ...file, filename: 'second.wav' }, duration, rights]), /one file/);
    await invalid(await send([{ ...file, name: 'audio' }, duration, rights]), /file|audio/);
  });

  it('when the file is empty, not audio, or a video, then 422 says what is wrong', async () => {
    await invalid(await send(fileParts(Buffer.alloc(0), '20')), /empty/);
    await invalid(await send(fileParts(await media.image('png'), '20', 'photo.png')), /MP3, WAV, OGG, M4A, AAC, FLAC or WebM.*PNG/);
    await invalid(await send(fileParts(Buffer.from('garbage '.repeat(100)), '20')), /not a recognised audio format/);
    await invalid(await send(fileParts(await media.video('webm'), '20', 'clip.webm')), /video stream/);
    const wav = fs.readFileSync(speech20);
    await invalid(await send(fileParts(wav.subarray(0, 44), '20')), /could not be decoded/);
  });

  it('when the file is larger than 50 MiB, then 413', async () => {
    const big = media.wavOfSize(50 * 1024 * 1024 + 1);
    const e = await errorOf(await send(fileParts(big, '20')));
    assert.equal(e.status, 413, e.message);
    assert.match(e.message, /50 MiB/);
    assert.deepEqual(fs.readdirSync(`${s.dataDir}/tmp/multipart`), [], 'temp files are removed');
  });

  it('when a multipart body ends in the middle of the file, then 422 and the server keeps serving', async () => {
    const res = await fetch(new URL(VOICES, s.url), {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'multipart/form-data; boundary=XX' },
      body: '--XX\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\nabc',
    });
    const e = await errorOf(res);
    assert.equal(e.status, 422, e.message);
    assert.equal(e.code, 'INVALID_REQUEST');
    assert.equal((await fetch(new URL(`${VOICES}?scope=explore`, s.url), { headers: { authorization: `Bearer ${key}` } })).status, 200);
  });

  it('when the client drops the connection part-way through the file, then the server keeps serving and leaves no temp file', async () => {
    // The text fields first, as browsers send them, so the cut falls inside the file part.
    const { body, contentType } = multipart(fileParts(await media.speech(20), '20').reverse());
    const { port } = new URL(s.url);
    await new Promise<void>((resolve) => {
      const req = http.request({
        host: '127.0.0.1',
        port,
        path: VOICES,
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': contentType, 'content-length': body.length },
      });
      req.on('error', () => resolve());
      req.on('close', () => resolve());
      req.write(body.subarray(0, Math.floor(body.length / 2)), () => setTimeout(() => req.destroy(), 200));
    });
    assert.equal((await fetch(new URL(`${VOICES}?scope=explore`, s.url), { headers: { authorization: `Bearer ${key}` } })).status, 200);
    const left = () => fs.readdirSync(`${s.dataDir}/tmp/multipart`);
    await until('the temp files to be removed', () => left().length === 0, 5000, 20);
  });

  // ------------------------------------------------------------ transcription (voice activity)

  const negatives: Array<[string, () => Promise<string>, RegExp]> = [
    ['silence', () => media.silence(20), /silent/],
    ['white noise', () => media.noise(20, 'white'), /noise/],
    ['pink noise', () => media.noise(20, 'pink'), /noise/],
    ['a steady 220 Hz tone', () => media.tone(20, 220), /steady tone/],
    ['a steady 120 Hz tone', () => media.tone(20, 120), /steady tone/],
  ];
  for (const [what, make, pattern] of negatives) {
    it(`when the recording is ${what}, then transcription fails with 422`, async () => {
      await invalid(await send(fileParts(await make(), '20')), new RegExp(`Transcription failed.*${pattern.source}`));
    });
  }
});

describe('voices with a remote OpenAI-compatible transcription provider', () => {
  let s: TestServer;
  let fake: http.Server;
  let key: string;
  const seen: Array<{ url: string; auth: string | undefined; contentType: string; body: string }> = [];
  let reply: { status: number; body: string } = { status: 200, body: '{"text":"Hello, this is a reference recording."}' };

  before(async () => {
    fake = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        seen.push({
          url: req.url ?? '',
          auth: req.headers.authorization,
          contentType: req.headers['content-type'] ?? '',
          body: Buffer.concat(chunks).toString('latin1'),
        });
        res.writeHead(reply.status, { 'content-type': 'application/json' }).end(reply.body);
      });
    });
    await new Promise<void>((r) => fake.listen(0, '127.0.0.1', r));
    const { port } = fake.address() as AddressInfo;
    s = await startTestServer({
      env: { TRANSCRIPTION_URL: `http://127.0.0.1:${port}/v1`, TRANSCRIPTION_API_KEY: 'sk-test', TRANSCRIPTION_MODEL: 'whisper-test' },
    });
    ({ secret: key } = await s.user());
  });
  after(async () => {
    await s.close();
    fake.closeAllConnections();
    await new Promise((r) => fake.close(r));
  });

  async function upload(file: string): Promise<Response> {
    const form = new FormData();
    form.append('file', new Blob([fs.readFileSync(file)], { type: 'audio/wav' }), 'remote.wav');
    form.append('duration', '20');
    form.append('rightsConfirmed', 'true');
    return fetch(new URL(VOICES, s.url), { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: form });
  }

  it('when the provider returns text, then the voice is created with the transcript, and the request is OpenAI-shaped', async () => {
    reply = { status: 200, body: '{"text":"Hello, this is a reference recording."}' };
    const res = await upload(await media.speech(20));
    const text = await res.text();
    assert.equal(res.status, 201, text);
    const { voice } = JSON.parse(text) as { voice: { id: string } };
    const last = seen.at(-1)!;
    assert.equal(last.url, '/v1/audio/transcriptions');
    assert.equal(last.auth, 'Bearer sk-test');
    assert.match(last.contentType, /^multipart\/form-data; boundary=/);
    assert.match(last.body, /name="model"\r\n\r\nwhisper-test/);
    assert.match(last.body, /name="file"; filename="recording\.wav"/);
    const row = (await findVoice(s.db, voice.id))!;
    assert.equal(row.transcript, 'Hello, this is a reference recording.');
    assert.equal((JSON.parse(row.traits) as { transcriber: string }).transcriber, 'openai-compatible');
  });

  it('when the provider finds no text, then 422; when it fails, then 502 PROVIDER_ERROR', async () => {
    reply = { status: 200, body: '{"text":"  "}' };
    const empty = await errorOf(await upload(await media.speech(20)));
    assert.equal(empty.status, 422);
    assert.match(empty.message, /no speech/i);
    reply = { status: 500, body: '{"error":{"message":"boom"}}' };
    const failed = await errorOf(await upload(await media.speech(20)));
    assert.deepEqual([failed.status, failed.code], [502, 'PROVIDER_ERROR']);
  });

  it('when the provider replaces the embedded check, then the duration and format checks still apply first', async () => {
    const before = seen.length;
    const form = new FormData();
    form.append('file', new Blob([fs.readFileSync(await media.speech(20))]), 'x.wav');
    form.append('duration', '60');
    form.append('rightsConfirmed', 'true');
    const e = await errorOf(await fetch(new URL(VOICES, s.url), { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: form }));
    assert.equal(e.status, 422);
    assert.equal(seen.length, before, 'the provider was not called');
  });
});

describe('voices a model can use (the list model filter)', () => {
  let local: TestServer;
  let remote: TestServer;
  const [AVERY, CARTER] = ['voice_d3aaf74203c48ce692bb5225', 'voice_c5f1a4a68678135c9ac1a776'];
  before(async () => {
    local = await startTestServer();
    // No upstream is called by a list: an address on this machine that nothing serves.
    remote = await startTestServer({
      env: {
        SPEECH_UPSTREAM_URL: 'http://127.0.0.1:9/v1',
        SPEECH_UPSTREAM_MODELS: 'gemforge-speech-1=gpt-4o-mini-tts',
        SPEECH_UPSTREAM_VOICES: `${AVERY}=alloy,${CARTER}=onyx`,
      },
    });
  });
  after(async () => {
    await local?.close();
    await remote?.close();
  });
  const list = async (s: TestServer, query: string) => {
    const { secret } = await s.user();
    return s.call('GET', `/api/generate/voices?${query}`, { key: secret });
  };
  const ids = async (res: Response) => ((await res.json()) as { voices: Array<{ id: string }> }).voices.map((v) => v.id).sort();

  it('when a remote speech model is named, then only the voices mapped in SPEECH_UPSTREAM_VOICES are listed, and no private voice', async () => {
    const explore = await list(remote, 'scope=explore&model=gemforge-speech-1');
    assert.equal(explore.status, 200);
    const body = (await explore.clone().json()) as { total: number; hasMore: boolean };
    assert.deepEqual(await ids(explore), [AVERY, CARTER].sort());
    assert.equal(body.total, 2);
    assert.equal(body.hasMore, false);
    const mine = await list(remote, 'model=gemforge-speech-1');
    assert.deepEqual(await ids(mine), []);
    const language = await list(remote, 'scope=explore&model=gemforge-speech-1&language=en');
    assert.deepEqual(await ids(language), [AVERY, CARTER].sort(), 'the filters combine');
  });

  it("when this server's own speech model is named, then every public voice is listed, as without the filter", async () => {
    const all = await ids(await list(local, 'scope=explore'));
    const filtered = await list(local, 'scope=explore&model=gemforge-speech-1');
    assert.equal(filtered.status, 200);
    assert.deepEqual(await ids(filtered), all);
    assert.ok(all.length > 2);
  });

  it('when the model is not a speech model, then 422 MODEL_UNAVAILABLE', async () => {
    for (const model of ['gemforge-music-1', 'gemforge-image-1', 'no-such-model']) {
      const res = await list(local, `scope=explore&model=${model}`);
      const error = await errorOf(res);
      assert.equal(error.status, 422, model);
      assert.equal(error.code, 'MODEL_UNAVAILABLE');
    }
  });
});
