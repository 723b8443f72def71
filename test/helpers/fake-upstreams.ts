/**
 * Local fakes of the remote media providers the adapters in
 * server/providers/remote/ call, so their tests never reach the network
 * (tests never reach the outside network). Each fake is a node:http server on 127.0.0.1, port 0,
 * answering the providers' documented wire shapes:
 *
 * - OpenAI Images, `POST /v1/images/generations` (JSON) and `POST /v1/images/edits`
 *   (multipart): https://platform.openai.com/docs/api-reference/images
 * - OpenAI speech, `POST /v1/audio/speech`: https://platform.openai.com/docs/api-reference/audio/createSpeech
 * - Replicate predictions: https://replicate.com/docs/reference/http
 * - fal's queue: https://docs.fal.ai/model-endpoints/queue
 *
 * Media bytes are real and made here, never downloaded: images with sharp,
 * tones and test-pattern video with the npm-shipped ffmpeg, WAV written by
 * hand; memoised per kind and parameters for the life of the process.
 *
 * Every request is recorded. `fail(route, ...faults)` makes the next requests
 * of a route answer with a fault instead (a status, a hang, malformed JSON,
 * media that lies about its type, oversize media). Output downloads
 * (`GET /files/{name}`) need no key, like the providers' signed delivery URLs.
 * Webhooks given to the Replicate fake are recorded, never called.
 */
import http from 'node:http';
import type net from 'node:net';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import crypto, { randomBytes } from 'node:crypto';
import sharp from 'sharp';
import { bundledFfmpegPath } from '../../server/media/binaries.ts';
import { runTool } from '../../server/media/run.ts';
import { formObject, requestViolation, responseViolation, type ContractName } from './upstream-contracts.ts';

// ---------------------------------------------------------------- public types

/** One file of a multipart/form-data body. */
export interface FormFile {
  name: string;
  filename: string;
  contentType: string;
  bytes: Buffer;
}

/** A multipart/form-data body, parsed. */
export interface FormBody {
  fields: Record<string, string>;
  files: FormFile[];
}

export interface RecordedRequest {
  method: string;
  /** The path without the query string. */
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  /** The body parsed, when it was sent as JSON and parses. */
  json?: unknown;
  /** The body parsed, when it was sent as multipart/form-data. */
  form?: FormBody;
}

/** A fault to answer one request with, instead of the normal answer. */
export type Fault =
  | { status: number; headers?: Record<string, string>; body?: string; afterWork?: boolean; echo?: boolean } // e.g. 429 with Retry-After, 500, 400 content policy; afterWork: the work is done (and counted), then this is answered (a gateway's 502), with the work's own answer as its body when echo
  | { hang: true } // never answer (keep the socket open until close())
  | { reset: true } // do the work, then reset the connection without answering (a request lost after it was carried out)
  | { malformed: true } // 200 with invalid JSON
  | { html: true } // the media bytes are replaced by an HTML page served with the media's content type
  | { oversize: number } // the media bytes are this many zero bytes (so a size limit can be tested)
  | { bytes: Buffer } // the media bytes are these (an image whose header lies about its size)
  | { stream: StreamedBody }; // the answer is a body made on the fly: huge, endless or trickling

/**
 * A body written on the fly, never held: `prefix`, then `fill` repeated up to
 * `totalBytes` (or forever, until the client goes), then `suffix`; in chunks
 * of `chunkBytes` every `intervalMs` (0: as fast as the client reads).
 */
export interface StreamedBody {
  status: number;
  contentType: string;
  prefix?: string;
  fill?: string;
  suffix?: string;
  totalBytes?: number;
  chunkBytes?: number;
  intervalMs?: number;
}

export interface FakeUpstream {
  /** e.g. http://127.0.0.1:PORT (no trailing slash). */
  url: string;
  /** Every request received, in order. */
  requests: RecordedRequest[];
  /**
   * Faults answered to the next requests of the given route, in order (then
   * normal answers again). `route` is a template such as 'POST /v1/images/edits',
   * 'POST /v1/models/{owner}/{name}/predictions', 'GET /files/{name}'; an
   * unknown one throws. A media fault (`html`, `oversize`) on a route that
   * only points at media (a prediction, a `url` answer) spoils that media's download.
   */
  fail(route: string, ...faults: Fault[]): void;
  /** Drops the faults still queued for `route` (the upstream is back). */
  recover(route: string): void;
  /** Requests the provider's published document refuses, and answers it does not describe (each fails the test at close). */
  violations: string[];
  /** Closes the server and any hanging sockets; throws when there were violations. */
  close(): Promise<void>;
}

export type FakeOpenAiImages = FakeUpstream & {
  /** Distinct generations made: successful requests, not counting Idempotency-Key replays. */
  generations(): number;
};

export type FakeOpenAiSpeech = FakeUpstream & {
  /** Speech made: requests answered with audio (or whose audio a fault after the work withheld). */
  syntheses(): number;
};

export type PredictionStatus = 'starting' | 'processing' | 'succeeded' | 'failed' | 'canceled' | 'aborted';

export type FakeReplicate = FakeUpstream & {
  /** Every prediction created, in order. */
  predictions(): Array<{ id: string; status: string; input: unknown; model?: string; version?: string }>;
  /** Forces a prediction still running into a terminal state (default: how it would end by itself). */
  finish(id: string, outcome?: 'succeeded' | 'failed' | 'canceled' | 'aborted'): void;
};

// ---------------------------------------------------------------- media bytes

type ImageFormat = 'png' | 'jpeg' | 'webp';
type AudioFormat = 'mp3' | 'opus' | 'aac' | 'flac' | 'wav' | 'pcm';
type MediaFault = { html: true } | { oversize: number } | { bytes: Buffer };

const IMAGE_TYPES = new Map<string, { format: ImageFormat; contentType: string }>([
  ['png', { format: 'png', contentType: 'image/png' }],
  ['jpeg', { format: 'jpeg', contentType: 'image/jpeg' }],
  ['webp', { format: 'webp', contentType: 'image/webp' }],
]);

/** OpenAI's response formats: content type, and the ffmpeg encoder for those not written here. */
const AUDIO_TYPES = new Map<string, { format: AudioFormat; contentType: string; encode?: string[] }>([
  ['mp3', { format: 'mp3', contentType: 'audio/mpeg', encode: ['-c:a', 'libmp3lame', '-f', 'mp3'] }],
  ['opus', { format: 'opus', contentType: 'audio/opus', encode: ['-c:a', 'libopus', '-f', 'ogg'] }],
  ['aac', { format: 'aac', contentType: 'audio/aac', encode: ['-c:a', 'aac', '-f', 'adts'] }],
  ['flac', { format: 'flac', contentType: 'audio/flac', encode: ['-c:a', 'flac', '-f', 'flac'] }],
  ['wav', { format: 'wav', contentType: 'audio/wav' }],
  ['pcm', { format: 'pcm', contentType: 'audio/pcm' }],
]);

const SAMPLE_RATE = 24_000; // OpenAI speech is 24 kHz mono
const HTML_PAGE = '<html><body>not an image</body></html>';

const made = new Map<string, Promise<Buffer>>();
/** Makes bytes once per key; a failed make is tried again next time. */
function memo(key: string, make: () => Promise<Buffer>): Promise<Buffer> {
  let bytes = made.get(key);
  if (!bytes) {
    bytes = make();
    made.set(key, bytes);
    bytes.catch(() => made.delete(key));
  }
  return bytes;
}

const ffmpeg = (args: string[]) =>
  runTool(bundledFfmpegPath(), ['-v', 'error', '-nostdin', ...args], { timeoutMs: 120_000, maxStdoutBytes: 256 * 1024 * 1024 });

function imageBytes(format: ImageFormat, width: number, height: number): Promise<Buffer> {
  return memo(`image ${format} ${width}x${height}`, () =>
    sharp({ create: { width, height, channels: 4, background: { r: 200, g: 80, b: 40, alpha: 1 } } })
      .toFormat(format)
      .toBuffer(),
  );
}

/** 16-bit mono samples of a 440 Hz sine. */
function sinePcm(seconds: number): Buffer {
  const samples = Math.round(seconds * SAMPLE_RATE);
  const pcm = Buffer.alloc(samples * 2);
  for (let i = 0; i < samples; i++) pcm.writeInt16LE(Math.round(Math.sin((2 * Math.PI * 440 * i) / SAMPLE_RATE) * 10_000), i * 2);
  return pcm;
}

/** A RIFF/WAVE file around 16-bit mono PCM samples. */
function wavOf(pcm: Buffer): Buffer {
  const header = Buffer.alloc(44);
  header.write('RIFF', 0, 'ascii');
  header.writeUInt32LE(36 + pcm.length, 4);
  header.write('WAVEfmt ', 8, 'ascii');
  header.writeUInt32LE(16, 16); // fmt chunk size
  header.writeUInt16LE(1, 20); // PCM
  header.writeUInt16LE(1, 22); // mono
  header.writeUInt32LE(SAMPLE_RATE, 24);
  header.writeUInt32LE(SAMPLE_RATE * 2, 28); // bytes per second
  header.writeUInt16LE(2, 32); // bytes per frame
  header.writeUInt16LE(16, 34); // bits per sample
  header.write('data', 36, 'ascii');
  header.writeUInt32LE(pcm.length, 40);
  return Buffer.concat([header, pcm]);
}

function audioBytes(format: AudioFormat, seconds: number): Promise<Buffer> {
  return memo(`audio ${format} ${seconds}`, async () => {
    if (format === 'wav') return wavOf(sinePcm(seconds));
    if (format === 'pcm') return sinePcm(seconds);
    const encode = AUDIO_TYPES.get(format)?.encode ?? [];
    return ffmpeg(['-f', 'lavfi', '-i', `sine=frequency=440:sample_rate=${SAMPLE_RATE}:duration=${seconds}`, '-ac', '1', ...encode, 'pipe:1']);
  });
}

/** An H.264 test pattern in a plain (faststart) MP4, made through a temp file so the moov box is whole. */
function videoBytes(width: number, height: number, seconds: number): Promise<Buffer> {
  return memo(`video ${width}x${height} ${seconds}`, async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'gemforge-fake-upstream-'));
    const file = path.join(dir, 'out.mp4');
    try {
      const source = `testsrc=size=${width}x${height}:rate=24:duration=${seconds}`;
      await ffmpeg(['-f', 'lavfi', '-i', source, '-pix_fmt', 'yuv420p', '-c:v', 'libx264', '-preset', 'ultrafast', '-movflags', '+faststart', '-y', file]);
      return await fs.readFile(file);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
}

/** The bytes a media fault puts in place of the real ones. */
function spoil(bytes: Buffer, fault: MediaFault | undefined): Buffer {
  if (!fault) return bytes;
  if ('bytes' in fault) return fault.bytes;
  return 'html' in fault ? Buffer.from(HTML_PAGE) : Buffer.alloc(fault.oversize);
}

// ---------------------------------------------------------------- the server core

type Reply =
  | { status: number; json: unknown; headers?: Record<string, string> }
  | { status: number; bytes: Buffer; contentType: string; headers?: Record<string, string> }
  | { status: number; stream: StreamedBody };

/** Thrown by a handler to answer with an error (the fakes' one error path). */
class Refusal extends Error {
  constructor(readonly reply: Reply) {
    super(`refused with ${reply.status}`);
  }
}

interface Call {
  request: RecordedRequest;
  params: Record<string, string>;
  /** The fake's own address, for URLs in answers. */
  base: string;
  /** Set when this request's fault spoils the media it answers with or points at. */
  media?: MediaFault;
}

interface Route {
  /** 'METHOD /path/{param}', the name fail() takes. */
  route: string;
  /** Whether the bearer key is checked (downloads are public). */
  auth: boolean;
  /** Whether the provider's API document describes it (downloads from its file host are not). */
  documented?: false;
  handle(call: Call): Promise<Reply> | Reply;
}

interface Provider {
  routes: Route[];
  /** The provider's published API document its requests and answers are held to (upstream-contracts.ts). */
  contract: ContractName;
  /** The document's schema of an error answer, where it gives one. */
  errorSchema?(status: number): string | undefined;
  /** The provider's error body for a status. */
  error(status: number, message: string): unknown;
  /** How the key is sent: `Authorization: Bearer …` (default) or fal's `Authorization: Key …`. */
  authScheme?: 'Bearer' | 'Key';
  unauthorized: unknown;
}

const MAX_BODY = 64 * 1024 * 1024;

function readBody(req: http.IncomingMessage): Promise<{ body: Buffer; tooLarge: boolean }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY) chunks.push(chunk); // past the limit: drained, not kept
    });
    req.once('end', () => resolve({ body: Buffer.concat(chunks), tooLarge: size > MAX_BODY }));
    req.once('error', reject);
    req.once('close', () => req.complete || reject(new Error('request aborted')));
  });
}

function parseJson(bytes: Buffer): unknown {
  try {
    return JSON.parse(bytes.toString('utf8'));
  } catch {
    return undefined;
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Parses a multipart/form-data body (RFC 7578); undefined when it is not one. */
function parseMultipart(body: Buffer, contentType: string): FormBody | undefined {
  const boundary = /boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(contentType);
  if (!boundary) return undefined;
  const delimiter = Buffer.from(`--${boundary[1] ?? boundary[2]}`);
  const next = Buffer.concat([Buffer.from('\r\n'), delimiter]);
  // Field names are user text: no prototype, so `__proto__` is just a name.
  const form: FormBody = { fields: Object.create(null) as Record<string, string>, files: [] };
  let at = body.indexOf(delimiter);
  while (at >= 0) {
    const start = at + delimiter.length;
    if (body.subarray(start, start + 2).toString('latin1') === '--') return form; // the closing delimiter
    const end = body.indexOf(next, start);
    if (end < 0) return undefined; // truncated
    addPart(form, body.subarray(start, end));
    at = end + 2;
  }
  return undefined;
}

/** Adds one part (CRLF, headers, blank line, content) to the form; parts without a name are skipped. */
function addPart(form: FormBody, part: Buffer): void {
  const headEnd = part.indexOf('\r\n\r\n');
  if (headEnd < 0) return;
  const head = part.subarray(0, headEnd).toString('utf8');
  const content = part.subarray(headEnd + 4);
  const disposition = /content-disposition:[^\r\n]*/i.exec(head)?.[0] ?? '';
  const name = /;\s*name="([^"]*)"/i.exec(disposition)?.[1];
  if (name === undefined) return;
  const filename = /;\s*filename="([^"]*)"/i.exec(disposition)?.[1];
  if (filename === undefined) {
    form.fields[name] = content.toString('utf8');
    return;
  }
  const contentType = /content-type:\s*([^\r\n]*)/i.exec(head)?.[1].trim() || 'application/octet-stream';
  form.files.push({ name, filename, contentType, bytes: Buffer.from(content) });
}

function record(req: http.IncomingMessage, body: Buffer): RecordedRequest {
  const url = req.url ?? '/';
  const query = url.indexOf('?');
  const recorded: RecordedRequest = { method: req.method ?? 'GET', path: query < 0 ? url : url.slice(0, query), headers: { ...req.headers }, body };
  const type = req.headers['content-type'] ?? '';
  if (/json/i.test(type) && body.length > 0) recorded.json = parseJson(body);
  if (/^multipart\/form-data/i.test(type)) recorded.form = parseMultipart(body, type);
  return recorded;
}

/** A route template as a matcher: `{name}` is one path segment. */
function matcher(route: Route): (method: string, path: string) => Record<string, string> | undefined {
  const [method, template] = route.route.split(' ');
  const names: string[] = [];
  const source = template
    .split('/')
    .map((segment) => (/^\{\w+\}$/.test(segment) ? (names.push(segment.slice(1, -1)), '([^/]+)') : segment))
    .join('/');
  const pattern = new RegExp(`^${source}$`);
  return (m, p) => {
    const found = m === method ? pattern.exec(p) : null;
    if (!found) return undefined;
    try {
      return Object.fromEntries(names.map((name, i) => [name, decodeURIComponent(found[i + 1])]));
    } catch {
      return undefined; // a malformed escape matches nothing
    }
  };
}

/** The chunks of a StreamedBody, made as they are read. */
async function* streamedChunks(body: StreamedBody): AsyncGenerator<Buffer> {
  const chunkBytes = body.chunkBytes ?? 64 * 1024;
  const fill = body.fill ?? ' ';
  const block = Buffer.from(fill.repeat(Math.ceil(chunkBytes / fill.length)).slice(0, chunkBytes));
  const total = body.totalBytes ?? Infinity;
  if (body.prefix) yield Buffer.from(body.prefix);
  for (let sent = 0; sent < total; sent += block.length) {
    yield total - sent < block.length ? block.subarray(0, total - sent) : block;
    if (body.intervalMs) await new Promise((resolve) => setTimeout(resolve, body.intervalMs));
  }
  if (body.suffix) yield Buffer.from(body.suffix);
}

/** Writes a StreamedBody with backpressure, until it is whole or the client (or close()) ends the socket. */
async function sendStream(res: http.ServerResponse, body: StreamedBody): Promise<void> {
  res.writeHead(body.status, { 'content-type': body.contentType, 'x-request-id': `req_${randomId(24)}` });
  await pipeline(Readable.from(streamedChunks(body)), res);
}

function send(res: http.ServerResponse, reply: Reply): void {
  if (res.headersSent || res.destroyed) return; // closed meanwhile (close(), or the client left)
  if ('stream' in reply) return void sendStream(res, reply.stream).catch(() => res.destroy());
  const bytes = 'json' in reply ? Buffer.from(JSON.stringify(reply.json)) : reply.bytes;
  const contentType = 'json' in reply ? 'application/json' : reply.contentType;
  try {
    res.writeHead(reply.status, { 'content-type': contentType, 'content-length': bytes.length, 'x-request-id': `req_${randomId(24)}`, ...reply.headers });
    res.end(bytes);
  } catch {
    res.destroy(); // e.g. a fault header a test wrote with characters HTTP forbids
  }
}

/** The answer to a `{ status }` fault: the given body, or the provider's error body. */
function faultReply(fault: { status: number; headers?: Record<string, string>; body?: string }, provider: Provider): Reply {
  const headers = Object.fromEntries(Object.entries(fault.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]));
  if (fault.body === undefined) return { status: fault.status, json: provider.error(fault.status, `fake upstream fault ${fault.status}`), headers };
  return { status: fault.status, bytes: Buffer.from(fault.body), contentType: 'application/json', headers };
}

/** Sleeps that close() cuts short, so no timer outlives a fake. */
function sleeper() {
  const pending = new Set<() => void>();
  return {
    sleep(ms: number): Promise<void> {
      if (!(ms > 0)) return Promise.resolve();
      return new Promise((resolve) => {
        const done = () => {
          clearTimeout(timer);
          pending.delete(done);
          resolve();
        };
        const timer = setTimeout(done, ms);
        pending.add(done);
      });
    },
    wakeAll: () => [...pending].forEach((done) => done()),
  };
}

/** Starts a fake answering `provider`'s routes, with recording, faults, delay and bearer auth. */
async function serve(provider: Provider, options: { apiKey?: string; delayMs?: number }): Promise<FakeUpstream> {
  const requests: RecordedRequest[] = [];
  const violations: string[] = [];
  const faults = new Map<string, Fault[]>(provider.routes.map((r) => [r.route, []]));
  const routes = provider.routes.map((route) => ({ route, match: matcher(route) }));
  const sockets = new Set<net.Socket>();
  const sleeps = sleeper();
  let base = '';

  async function answer(req: http.IncomingMessage): Promise<Reply | 'reset' | undefined> {
    const { body, tooLarge } = await readBody(req);
    const request = record(req, body);
    requests.push(request);
    if (tooLarge) return { status: 413, json: provider.error(413, 'Request body too large.') };
    const found = routes.map(({ route, match }) => ({ route, params: match(request.method, request.path) })).find((r) => r.params);
    if (!found?.params) return { status: 404, json: provider.error(404, `Invalid URL (${request.method} ${request.path})`) };
    const documented = found.route.documented !== false;
    // What the real API refuses is refused here, and fails the test (close() throws).
    const violation = documented
      ? requestViolation(
          provider.contract,
          request.method,
          request.path,
          request.form ? formObject(request.form) : request.body.length > 0 ? request.json : undefined,
        )
      : undefined;
    if (violation) {
      violations.push(`request: ${violation}`);
      return { status: 400, json: provider.error(400, violation) };
    }
    /** The route's own answer (a Refusal is one), held to the document's shapes. */
    const handled = async (call: Call): Promise<Reply> => {
      let reply: Reply;
      try {
        reply = await found.route.handle(call);
      } catch (error) {
        if (!(error instanceof Refusal)) throw error;
        reply = error.reply;
      }
      const wrong =
        documented && 'json' in reply
          ? responseViolation(provider.contract, request.method, request.path, reply.status, reply.json, provider.errorSchema)
          : undefined;
      if (wrong) violations.push(`the fake's answer: ${wrong}`);
      return reply;
    };
    const fault = faults.get(found.route.route)?.shift();
    if (fault && 'hang' in fault) return undefined; // the socket stays open until close()
    await sleeps.sleep(options.delayMs ?? 0);
    if (fault && 'status' in fault && !fault.afterWork) return faultReply(fault, provider);
    if (fault && 'stream' in fault) return { status: fault.stream.status, stream: fault.stream };
    if (fault && 'malformed' in fault) return { status: 200, bytes: Buffer.from('{"created": 1700000000, "data": [{"b64_'), contentType: 'application/json' };
    if (found.route.auth && options.apiKey !== undefined && req.headers.authorization !== `${provider.authScheme ?? 'Bearer'} ${options.apiKey}`) {
      return { status: 401, json: provider.unauthorized };
    }
    if (fault && 'reset' in fault) {
      await handled({ request, params: found.params, base });
      return 'reset';
    }
    if (fault && 'status' in fault) {
      const done = await handled({ request, params: found.params, base });
      return fault.echo && 'json' in done ? { status: fault.status, json: done.json } : faultReply(fault, provider);
    }
    return handled({ request, params: found.params, base, ...(fault && { media: fault }) });
  }

  const server = http.createServer((req, res) => {
    answer(req).then(
      (reply) => (reply === 'reset' ? req.socket.destroy() : reply && send(res, reply)),
      (error: unknown) =>
        send(res, error instanceof Refusal ? error.reply : { status: 500, json: provider.error(500, `The fake upstream failed: ${String(error)}`) }),
    );
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;

  return {
    url: base,
    requests,
    recover(route) {
      faults.get(route)?.splice(0);
    },
    fail(route, ...more) {
      const queue = faults.get(route);
      if (!queue) throw new Error(`the fake has no route '${route}' (it has: ${[...faults.keys()].join(', ')})`);
      queue.push(...more);
    },
    violations,
    async close() {
      sleeps.wakeAll();
      const closed = new Promise<void>((resolve) => server.close(() => resolve())); // resolves on a second close too
      for (const socket of sockets) socket.destroy();
      await closed;
      // A request the real API would refuse (or an answer it never gives) fails the test that caused it.
      if (violations.length > 0) throw new Error(`outside the provider's published API document:\n${violations.splice(0).join('\n')}`);
    },
  };
}

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';
function randomId(length: number): string {
  return [...randomBytes(length)].map((b) => ALPHABET[b % ALPHABET.length]).join('');
}

/** The request body as a JSON object, or the provider's 400. */
function jsonObject(call: Call, refuse: (message: string) => Refusal): Record<string, unknown> {
  const value = call.request.json ?? parseJson(call.request.body);
  if (!isRecord(value)) throw refuse('We could not parse the JSON body of your request. The body must be a JSON object.');
  return value;
}

// ---------------------------------------------------------------- OpenAI

function openAiBody(status: number, message: string, param: string | null = null, code: string | null = null): unknown {
  const type = status === 429 ? 'requests' : status >= 500 ? 'server_error' : 'invalid_request_error';
  return { error: { message, type, param, code: code ?? (status === 429 ? 'rate_limit_exceeded' : null) } };
}

function openAiRefusal(status: number, message: string, param: string | null = null, code: string | null = null): Refusal {
  return new Refusal({ status, json: openAiBody(status, message, param, code) });
}

function openAi(routes: Route[]): Provider {
  return {
    routes,
    contract: 'openai',
    errorSchema: () => 'ErrorResponse',
    error: (status, message) => openAiBody(status, message),
    unauthorized: openAiBody(401, 'Incorrect API key provided.', null, 'invalid_api_key'),
  };
}

/** A checked image request (generation or edit). */
interface ImageJob {
  model: string;
  prompt: string;
  n: number;
  width: number;
  height: number;
  format: ImageFormat;
  contentType: string;
  url: boolean;
}

/** The image models OpenAI documents, by name prefix: their sizes and longest prompt. */
const IMAGE_MODELS: Array<[string, { sizes: string[]; maxPrompt: number }]> = [
  ['gpt-image', { sizes: ['1024x1024', '1536x1024', '1024x1536'], maxPrompt: 32000 }],
  ['chatgpt-image', { sizes: ['1024x1024', '1536x1024', '1024x1536'], maxPrompt: 32000 }],
  ['dall-e-3', { sizes: ['1024x1024', '1792x1024', '1024x1792'], maxPrompt: 4000 }],
  ['dall-e-2', { sizes: ['256x256', '512x512', '1024x1024'], maxPrompt: 1000 }],
];

/** `size` as width and height: "WxH" (16–4096 each), "auto" or absent meaning 1024x1024. */
function parseSize(size: unknown): { width: number; height: number } | undefined {
  if (size === undefined || size === 'auto') return { width: 1024, height: 1024 };
  const m = typeof size === 'string' ? /^(\d{1,4})x(\d{1,4})$/.exec(size) : null;
  const [width, height] = m ? [Number(m[1]), Number(m[2])] : [0, 0];
  return width >= 16 && height >= 16 && width <= 4096 && height <= 4096 ? { width, height } : undefined;
}

/** Checks the fields both image routes share; throws the API's 400/404 errors. */
function imageJob(input: Record<string, unknown>, answerUrl: boolean): ImageJob {
  const { model, prompt } = input;
  if (typeof model !== 'string' || model === '') throw openAiRefusal(400, "Missing required parameter: 'model'.", 'model');
  if (typeof prompt !== 'string' || prompt === '') throw openAiRefusal(400, "Missing required parameter: 'prompt'.", 'prompt');
  const limits = IMAGE_MODELS.find(([prefix]) => model.startsWith(prefix))?.[1];
  if (!limits) throw openAiRefusal(404, `The model '${model}' does not exist or you do not have access to it.`, null, 'model_not_found');
  if (prompt.length > limits.maxPrompt)
    throw openAiRefusal(
      400,
      `Invalid 'prompt': string too long. Expected a string with maximum length ${limits.maxPrompt}, but got a string with length ${prompt.length} instead.`,
      'prompt',
      'string_above_max_length',
    );
  if (input.size !== undefined && input.size !== 'auto' && !limits.sizes.includes(String(input.size))) {
    throw openAiRefusal(
      400,
      `Invalid value: '${String(input.size)}'. Supported values are: ${limits.sizes.map((x) => `'${x}'`).join(', ')}.`,
      'size',
      'invalid_value',
    );
  }
  const n = input.n === undefined ? 1 : Number(input.n);
  if (!Number.isInteger(n) || n < 1 || n > 10) throw openAiRefusal(400, `Invalid 'n': expected an integer between 1 and 10, got ${String(input.n)}.`, 'n');
  const size = parseSize(input.size);
  if (!size) throw openAiRefusal(400, `Invalid value for 'size': '${String(input.size)}'.`, 'size');
  const type = IMAGE_TYPES.get(String(input.output_format ?? 'png'));
  if (!type)
    throw openAiRefusal(
      400,
      `Invalid value for 'output_format': '${String(input.output_format)}'. Supported values are: 'png', 'jpeg', and 'webp'.`,
      'output_format',
    );
  if (prompt.includes('content-policy')) {
    throw openAiRefusal(400, 'Your request was rejected as a result of our safety system.', null, 'content_policy_violation');
  }
  return { model, prompt, n, ...size, ...type, url: answerUrl || input.response_format === 'url' };
}

/**
 * The OpenAI Images fake: generations and edits, answered in base64 or as
 * `url`s served from `GET /files/{name}`. A repeated POST with the same
 * `Idempotency-Key` on the same route gets the first answer again.
 */
export async function startFakeOpenAiImages(
  options: { apiKey?: string; answer?: 'b64_json' | 'url'; delayMs?: number; outputHost?: string } = {},
): Promise<FakeOpenAiImages> {
  const files = new Map<string, { bytes: Buffer; contentType: string }>();
  const answers = new Map<string, Promise<Reply>>();
  let generations = 0;

  async function generate(job: ImageJob, call: Call): Promise<Reply> {
    const bytes = spoil(await imageBytes(job.format, job.width, job.height), call.media);
    const data = Array.from({ length: job.n }, () => {
      const revised = job.model.startsWith('dall-e-3') ? { revised_prompt: job.prompt } : {};
      if (!job.url) return { b64_json: bytes.toString('base64'), ...revised };
      const name = `${randomId(20)}.${job.format}`;
      files.set(name, { bytes, contentType: job.contentType });
      // `outputHost` names the fake another way in its URLs (`localhost`), for address-policy tests.
      const base = options.outputHost ? call.base.replace('127.0.0.1', options.outputHost) : call.base;
      return { url: `${base}/files/${name}`, ...revised };
    });
    generations++;
    // The GPT image models report their format, size and token usage; the DALL·E models do not.
    const usage = { total_tokens: 100, input_tokens: 50, output_tokens: 50, input_tokens_details: { text_tokens: 50, image_tokens: 0 } };
    const gptImage = job.model.startsWith('gpt-image') ? { output_format: job.format, size: `${job.width}x${job.height}`, usage } : {};
    return { status: 200, json: { created: Math.floor(Date.now() / 1000), data, ...gptImage } };
  }

  /** Runs `make` once per Idempotency-Key and route; errors are not kept, so a retry tries again. */
  function once(call: Call, route: string, make: () => Promise<Reply>): Promise<Reply> {
    const header = call.request.headers['idempotency-key'];
    const key = Array.isArray(header) ? header.join(',') : header;
    if (!key) return make();
    const id = `${route} ${key}`;
    let reply = answers.get(id);
    if (!reply) {
      reply = make();
      answers.set(id, reply);
      reply.then(
        (r) => r.status < 300 || answers.delete(id),
        () => answers.delete(id),
      );
    }
    return reply;
  }

  const routes: Route[] = [
    {
      route: 'POST /v1/images/generations',
      auth: true,
      handle: (call) =>
        once(call, 'generations', async () =>
          generate(
            imageJob(
              jsonObject(call, (m) => openAiRefusal(400, m)),
              options.answer === 'url',
            ),
            call,
          ),
        ),
    },
    {
      route: 'POST /v1/images/edits',
      auth: true,
      handle: (call) =>
        once(call, 'edits', async () => {
          const form = call.request.form;
          if (!form) throw openAiRefusal(400, 'Image edits take a multipart/form-data body (a boundary in Content-Type, every part closed).');
          // dall-e-2 takes one image as `image`; the GPT image models take `image` or several as `image[]`; dall-e-3 has no edits.
          const field = form.fields.model === 'dall-e-2' ? ['image'] : ['image', 'image[]'];
          if (form.fields.model === 'dall-e-3') throw openAiRefusal(400, 'Image edits are not supported for dall-e-3.', 'model');
          if (!form.files.some((f) => field.includes(f.name))) throw openAiRefusal(400, "Missing required parameter: 'image'.", 'image');
          return generate(imageJob(form.fields, options.answer === 'url'), call);
        }),
    },
    {
      route: 'GET /files/{name}',
      auth: false,
      documented: false,
      handle: (call) => {
        const file = files.get(call.params.name);
        if (!file) throw openAiRefusal(404, 'File not found.');
        return { status: 200, bytes: spoil(file.bytes, call.media), contentType: file.contentType };
      },
    },
  ];
  const fake = await serve(openAi(routes), options);
  return { ...fake, generations: () => generations };
}

const VOICES = new Set(['alloy', 'ash', 'ballad', 'coral', 'echo', 'fable', 'nova', 'onyx', 'sage', 'shimmer', 'verse']);

/**
 * The OpenAI speech fake: the answer is the audio itself, a 440 Hz tone of
 * max(1, round(input.length / 15 / speed)) seconds in `response_format`.
 */
export async function startFakeOpenAiSpeech(options: { apiKey?: string; delayMs?: number } = {}): Promise<FakeOpenAiSpeech> {
  let syntheses = 0;
  const speech: Route = {
    route: 'POST /v1/audio/speech',
    auth: true,
    async handle(call) {
      const body = jsonObject(call, (m) => openAiRefusal(400, m));
      const { model, input, voice } = body;
      if (typeof model !== 'string' || model === '') throw openAiRefusal(400, "Missing required parameter: 'model'.", 'model');
      if (typeof input !== 'string' || input === '') throw openAiRefusal(400, "Missing required parameter: 'input'.", 'input');
      if (input.length > 4096) throw openAiRefusal(400, "Invalid 'input': string too long. Expected a string with maximum length 4096.", 'input');
      if (typeof voice !== 'string' || voice === '') throw openAiRefusal(400, "Missing required parameter: 'voice'.", 'voice');
      if (!VOICES.has(voice)) throw openAiRefusal(400, `Invalid value for 'voice': '${voice}'. Supported values are: ${[...VOICES].join(', ')}.`, 'voice');
      const type = AUDIO_TYPES.get(String(body.response_format ?? 'mp3'));
      if (!type) throw openAiRefusal(400, `Invalid value for 'response_format': '${String(body.response_format)}'.`, 'response_format');
      const speed = body.speed ?? 1;
      if (typeof speed !== 'number' || !(speed >= 0.25 && speed <= 4))
        throw openAiRefusal(400, "Invalid 'speed': expected a number between 0.25 and 4.0.", 'speed');
      const seconds = Math.max(1, Math.round(input.length / 15 / speed));
      const bytes = spoil(await audioBytes(type.format, seconds), call.media);
      syntheses++;
      return { status: 200, bytes, contentType: type.contentType };
    },
  };
  return { ...(await serve(openAi([speech]), options)), syntheses: () => syntheses };
}

// ---------------------------------------------------------------- Replicate

interface Prediction {
  id: string;
  model?: string;
  version: string;
  input: Record<string, unknown>;
  status: PredictionStatus;
  createdAt: number;
  startedAt?: number;
  completedAt?: number;
  error: string | null;
  /** Set by a media fault on a request about this prediction: its download lies. */
  media?: MediaFault;
}

const STARTING_MS = 100;
const TERMINAL = new Set<PredictionStatus>(['succeeded', 'failed', 'canceled', 'aborted']);
const NSFW = 'NSFW content detected. Try running it again, or try a different prompt.';
const OUTPUT_EXT = { video: 'mp4', audio: 'mp3', image: 'png' } as const;
const ASPECTS = new Map<string, [number, number]>([
  ['16:9', [640, 360]],
  ['9:16', [360, 640]],
  ['1:1', [480, 480]],
]);

function replicateBody(status: number, detail: string): unknown {
  return status === 404 ? { detail: 'Not found.', status } : { title: http.STATUS_CODES[status] ?? 'Error', detail, status };
}

function invalid(field: string, description: string): Refusal {
  const json = {
    title: 'Input validation failed',
    detail: `- ${field}: ${description}`,
    status: 422,
    invalid_fields: [{ type: 'required', field, description }],
  };
  return new Refusal({ status: 422, json });
}

const notFound = () => new Refusal({ status: 404, json: replicateBody(404, '') });

/** A positive number of seconds from the input, at most `max`, or the fallback. */
function secondsOf(value: unknown, fallback: number, max: number): number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? Math.min(value, max) : fallback;
}

/** A succeeded prediction's output file, from its input (duration, aspect_ratio). */
async function outputFile(kind: keyof typeof OUTPUT_EXT, input: Record<string, unknown>): Promise<{ bytes: Buffer; contentType: string }> {
  if (kind === 'image') return { bytes: await imageBytes('png', 512, 512), contentType: 'image/png' };
  if (kind === 'audio') return { bytes: await audioBytes('mp3', secondsOf(input.duration, 5, 120)), contentType: 'audio/mpeg' };
  const [width, height] = ASPECTS.get(String(input.aspect_ratio)) ?? [320, 240];
  return { bytes: await videoBytes(width, height, secondsOf(input.duration, 2, 30)), contentType: 'video/mp4' };
}

/**
 * The Replicate fake. Predictions move by time, read lazily: `starting`, then
 * `processing` after 100 ms, then `succeeded` (or `failed` when the prompt
 * holds "content-policy") `processingMs` after creation; with Infinity they
 * wait for finish(). The output is `<url>/files/<id>.<mp4|mp3|png>`; `outputShape`
 * answers it as a list, an object of named outputs (`{"video": url}`), or the
 * bytes inline as a `data:` URL, the shapes Replicate's models use.
 */
export async function startFakeReplicate(
  options: { apiKey?: string; processingMs?: number; outputs?: 'video' | 'audio' | 'image'; outputShape?: 'url' | 'list' | 'object' | 'data' } = {},
): Promise<FakeReplicate> {
  const processingMs = options.processingMs ?? 300;
  const kind = options.outputs ?? 'video';
  const predictions = new Map<string, Prediction>();

  const natural = (p: Prediction): PredictionStatus =>
    typeof p.input.prompt === 'string' && p.input.prompt.includes('content-policy') ? 'failed' : 'succeeded';

  function settle(p: Prediction, status: PredictionStatus, at: number): void {
    p.status = status;
    p.startedAt ??= Math.min(at, p.createdAt + STARTING_MS);
    p.completedAt = at;
    if (status === 'failed') p.error = natural(p) === 'failed' ? NSFW : 'Prediction failed.';
  }

  /** Brings a prediction up to date with the clock. */
  function advance(p: Prediction): void {
    if (TERMINAL.has(p.status)) return;
    const age = Date.now() - p.createdAt;
    if (age >= processingMs) settle(p, natural(p), p.createdAt + processingMs);
    else if (age >= STARTING_MS) {
      p.status = 'processing';
      p.startedAt ??= p.createdAt + STARTING_MS;
    }
  }

  async function toJson(p: Prediction, base: string): Promise<unknown> {
    const iso = (ms: number) => new Date(ms).toISOString();
    const succeeded = p.status === 'succeeded';
    const url = `${base}/files/${p.id}.${OUTPUT_EXT[kind]}`;
    let output: unknown = url;
    if (options.outputShape === 'list') output = [url];
    if (options.outputShape === 'object') output = { [kind]: url, seed: 7 };
    if (options.outputShape === 'data' && succeeded) {
      const file = await outputFile(kind, p.input);
      output = `data:${file.contentType};base64,${file.bytes.toString('base64')}`;
    }
    return {
      id: p.id,
      // Replicate names the model of every prediction; a bare version id does not say which here.
      model: p.model ?? 'unknown/model-of-version',
      version: p.version,
      input: p.input,
      logs: '',
      output: succeeded ? output : null,
      data_removed: false,
      error: p.error,
      status: p.status,
      created_at: iso(p.createdAt),
      ...(p.startedAt !== undefined && { started_at: iso(p.startedAt) }),
      ...(p.completedAt !== undefined && { completed_at: iso(p.completedAt) }),
      ...(succeeded && { metrics: { predict_time: (p.completedAt! - p.createdAt) / 1000 } }),
      source: 'api',
      urls: { cancel: `${base}/v1/predictions/${p.id}/cancel`, get: `${base}/v1/predictions/${p.id}`, web: `https://replicate.com/p/${p.id}` },
    };
  }

  async function create(call: Call, body: Record<string, unknown>, model: string | undefined, version: string): Promise<Reply> {
    if (!isRecord(body.input)) throw invalid('input', 'input is required');
    const p: Prediction = { id: randomId(26), model, version, input: body.input, status: 'starting', createdAt: Date.now(), error: null, media: call.media };
    predictions.set(p.id, p);
    return { status: 201, json: await toJson(p, call.base) };
  }

  /** The prediction named by the path, brought up to date; a media fault here spoils its download. */
  function found(call: Call): Prediction {
    const p = predictions.get(call.params.id);
    if (!p) throw notFound();
    advance(p);
    if (call.media) p.media = call.media;
    return p;
  }

  const body = (call: Call) => jsonObject(call, (m) => new Refusal({ status: 400, json: replicateBody(400, m) }));
  const routes: Route[] = [
    {
      route: 'POST /v1/models/{owner}/{name}/predictions',
      auth: true,
      handle: (call) => create(call, body(call), `${call.params.owner}/${call.params.name}`, 'hidden'),
    },
    {
      route: 'POST /v1/predictions',
      auth: true,
      handle(call) {
        const b = body(call);
        const version = typeof b.version === 'string' ? b.version : '';
        const named = /^([\w.-]+\/[\w.-]+)(?::([\w-]+))?$/.exec(version); // owner/name or owner/name:hash
        if (named) return create(call, b, named[1], named[2] ?? 'hidden');
        if (/^[0-9a-f]{64}$/.test(version)) return create(call, b, undefined, version);
        throw invalid('version', 'version must be a 64-character version id or owner/name:version');
      },
    },
    { route: 'GET /v1/predictions/{id}', auth: true, handle: async (call) => ({ status: 200, json: await toJson(found(call), call.base) }) },
    {
      route: 'POST /v1/predictions/{id}/cancel',
      auth: true,
      async handle(call) {
        const p = found(call);
        if (!TERMINAL.has(p.status)) settle(p, 'canceled', Date.now());
        return { status: 200, json: await toJson(p, call.base) };
      },
    },
    {
      route: 'GET /files/{name}',
      auth: false,
      documented: false,
      async handle(call) {
        const [id, ext] = call.params.name.split('.');
        const p = predictions.get(id);
        if (p) advance(p);
        if (!p || p.status !== 'succeeded' || ext !== OUTPUT_EXT[kind]) throw notFound();
        const file = await outputFile(kind, p.input);
        return { status: 200, bytes: spoil(file.bytes, call.media ?? p.media), contentType: file.contentType };
      },
    },
  ];

  const provider: Provider = {
    routes,
    contract: 'replicate',
    error: replicateBody,
    unauthorized: { title: 'Unauthenticated', detail: 'You did not pass a valid authentication token', status: 401 },
  };
  const fake = await serve(provider, options);
  return {
    ...fake,
    predictions: () =>
      [...predictions.values()].map((p) => {
        advance(p);
        return { id: p.id, status: p.status, input: p.input, ...(p.model !== undefined && { model: p.model }), version: p.version };
      }),
    finish(id, outcome) {
      const p = predictions.get(id);
      if (!p) throw new Error(`the fake has no prediction ${id}`);
      advance(p);
      if (!TERMINAL.has(p.status)) settle(p, outcome ?? natural(p), Date.now());
    },
  };
}

// ---------------------------------------------------------------- fal

export type FakeFal = FakeUpstream & {
  /** Every request submitted, in order (`canceled`: a cancel was accepted while it ran). */
  submitted(): Array<{ id: string; model: string; input: unknown; status: string; canceled: boolean }>;
  /** Completes every request still queued or running. */
  completeAll(): void;
};

interface QueuedRequest {
  id: string;
  model: string;
  app: string;
  input: Record<string, unknown>;
  createdAt: number;
  completedAt?: number;
  canceled: boolean;
}

/**
 * The fal queue fake. A submitted request is IN_QUEUE, IN_PROGRESS after
 * 100 ms, COMPLETED `processingMs` after submission (Infinity: only by
 * completeAll()). Its result is the model's output: `{"images": [{url, …}]}`
 * for image models, `{"video": {url, …}}` for video models, served from
 * `GET /files/{id}.{png|mp4}`. Errors are `{"detail": …}`, as fal's are. A
 * cancelled request completes at once; its result answers 400 (how fal
 * answers a cancelled request's result is not documented: an assumption,
 * which only the cancellation tests reach).
 */
export async function startFakeFal(options: { apiKey?: string; processingMs?: number; outputs?: 'image' | 'video' } = {}): Promise<FakeFal> {
  const processingMs = options.processingMs ?? 300;
  const kind = options.outputs ?? 'image';
  const queued = new Map<string, QueuedRequest>();
  const detail = (status: number, message: string) => new Refusal({ status, json: { detail: message } });
  const statusOf = (q: QueuedRequest): 'IN_QUEUE' | 'IN_PROGRESS' | 'COMPLETED' => {
    if (q.completedAt === undefined && Date.now() - q.createdAt >= processingMs) q.completedAt = q.createdAt + processingMs;
    if (q.completedAt !== undefined) return 'COMPLETED';
    return Date.now() - q.createdAt >= STARTING_MS ? 'IN_PROGRESS' : 'IN_QUEUE';
  };
  const urls = (q: QueuedRequest, base: string) => {
    const at = `${base}/${q.app}/requests/${q.id}`;
    return { request_id: q.id, response_url: at, status_url: `${at}/status`, cancel_url: `${at}/cancel` };
  };
  const found = (call: Call): QueuedRequest => {
    const q = queued.get(call.params.id);
    if (!q || q.app !== `${call.params.owner}/${call.params.alias}`) throw detail(404, 'Request not found');
    return q;
  };
  const submit = (call: Call): Reply => {
    const input = jsonObject(call, (m) => detail(422, m));
    const model = call.request.path.slice(1);
    const q: QueuedRequest = { id: crypto.randomUUID(), model, app: model.split('/').slice(0, 2).join('/'), input, createdAt: Date.now(), canceled: false };
    queued.set(q.id, q);
    return { status: 200, json: { status: 'IN_QUEUE', ...urls(q, call.base), queue_position: 0 } };
  };
  const routes: Route[] = [
    { route: 'POST /{owner}/{alias}', auth: true, handle: submit },
    { route: 'POST /{owner}/{alias}/{path}', auth: true, handle: submit },
    { route: 'POST /{owner}/{alias}/{path}/{subpath}', auth: true, handle: submit },
    {
      route: 'GET /{owner}/{alias}/requests/{id}/status',
      auth: true,
      handle(call) {
        const q = found(call);
        const status = statusOf(q);
        const logs = status === 'IN_QUEUE' ? {} : { logs: null };
        return {
          status: 200,
          json: {
            status,
            ...urls(q, call.base),
            ...(status === 'IN_QUEUE' && { queue_position: 0 }),
            ...logs,
            ...(status === 'COMPLETED' && { metrics: { inference_time: (q.completedAt! - q.createdAt) / 1000 } }),
          },
        };
      },
    },
    {
      route: 'GET /{owner}/{alias}/requests/{id}',
      auth: true,
      async handle(call) {
        const q = found(call);
        if (statusOf(q) !== 'COMPLETED') throw detail(400, 'Request is still in progress');
        if (q.canceled) throw detail(400, 'Request was cancelled');
        const url = `${call.base}/files/${q.id}.${OUTPUT_EXT[kind]}`;
        if (kind === 'video') return { status: 200, json: { video: { url, content_type: 'video/mp4', file_name: `${q.id}.mp4` } } };
        return {
          status: 200,
          json: {
            images: [{ url, width: 512, height: 512, content_type: 'image/png' }],
            seed: 7,
            has_nsfw_concepts: [false],
            prompt: String(q.input.prompt ?? ''),
          },
        };
      },
    },
    {
      route: 'PUT /{owner}/{alias}/requests/{id}/cancel',
      auth: true,
      handle(call) {
        const q = found(call);
        if (statusOf(q) === 'COMPLETED') return { status: 400, json: { status: 'ALREADY_COMPLETED' } };
        q.canceled = true;
        q.completedAt = Date.now();
        return { status: 202, json: { status: 'CANCELLATION_REQUESTED' } };
      },
    },
    {
      route: 'GET /files/{name}',
      auth: false,
      documented: false,
      async handle(call) {
        const [id, ext] = call.params.name.split('.');
        const q = queued.get(id);
        if (!q || q.canceled || statusOf(q) !== 'COMPLETED' || ext !== OUTPUT_EXT[kind]) throw detail(404, 'Not found');
        const file = await outputFile(kind, q.input);
        return { status: 200, bytes: spoil(file.bytes, call.media), contentType: file.contentType };
      },
    },
  ];
  const provider: Provider = {
    routes,
    contract: 'fal',
    authScheme: 'Key',
    error: (_status, message) => ({ detail: message }),
    unauthorized: { detail: 'Unauthorized' },
  };
  const fake = await serve(provider, options);
  return {
    ...fake,
    submitted: () => [...queued.values()].map((q) => ({ id: q.id, model: q.model, input: q.input, status: statusOf(q), canceled: q.canceled })),
    completeAll() {
      for (const q of queued.values()) if (statusOf(q) !== 'COMPLETED') q.completedAt = Date.now();
    },
  };
}
