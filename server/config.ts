/**
 * Configuration, read once at start from the environment, so every setting and its default is in one typed place.
 * Nothing else in the server reads `process.env`.
 */
import crypto from 'node:crypto';
import path from 'node:path';
import { bundledFfmpegPath, bundledFfprobePath } from './media/binaries.ts';
import { isAddressOrRange } from './addresses.ts';
import { checkAllowedHost } from './authority.ts';

export interface Config {
  /** Interface to bind (`HOST`, default 127.0.0.1). */
  host: string;
  /** Port to bind (`PORT`, default 8080; 0 picks a free port). */
  port: number;
  /** Directory for the SQLite database, blobs and the server secret (`DATA_DIR`, default ./data). */
  dataDir: string;
  /** knex connection string for a server database (`DATABASE_URL`); SQLite under dataDir when absent. */
  databaseUrl: string | undefined;
  /**
   * SQLite's `synchronous` (`SQLITE_SYNCHRONOUS`, NORMAL or FULL, default NORMAL):
   * NORMAL survives process crashes; FULL also the last commits across power loss (storage/db.ts).
   */
  sqliteSynchronous: 'NORMAL' | 'FULL';
  /** Validate responses against the contract (`VALIDATE_RESPONSES`, default on unless NODE_ENV=production). */
  validateResponses: boolean;
  /** pino level (`LOG_LEVEL`, default info; `silent` in tests). */
  logLevel: string;
  /** The editable model catalog (`CATALOG_PATH`). */
  catalogPath: string;
  /** The contract file served and enforced (`OPENAPI_PATH`). */
  openapiPath: string;
  /** Prefix of API key secrets (fixed: `gf`). */
  keyPrefix: string;
  /** ffmpeg binary (`FFMPEG_PATH`, default the npm-shipped static build). */
  ffmpegPath: string;
  /** ffprobe binary (`FFPROBE_PATH`, default the npm-shipped static build). */
  ffprobePath: string;
  /** The public voice catalog seeded at start (`VOICE_CATALOG_PATH`). */
  voiceCatalogPath: string;
  /**
   * OpenAI-compatible transcription endpoint (`TRANSCRIPTION_URL`, a base such as
   * `http://host:8000` or `…/v1`, or the full `…/v1/audio/transcriptions`); when
   * absent the embedded voice-activity check stands in for transcription.
   */
  transcriptionUrl: string | undefined;
  /** Bearer key for the transcription endpoint (`TRANSCRIPTION_API_KEY`). */
  transcriptionApiKey: string | undefined;
  /** Model name sent to the transcription endpoint (`TRANSCRIPTION_MODEL`, default whisper-1). */
  transcriptionModel: string;
  /** Pause between streamed tokens of the local text model in ms (`TEXT_STREAM_DELAY_MS`, default 5). */
  textStreamDelayMs: number;
  /**
   * OpenAI-compatible chat-completions server for real text (`TEXT_UPSTREAM_URL`, a base
   * such as `http://localhost:11434`, `…/v1`, or the full `…/v1/chat/completions`).
   */
  textUpstreamUrl: string | undefined;
  /** Bearer key for the upstream (`TEXT_UPSTREAM_API_KEY`). */
  textUpstreamApiKey: string | undefined;
  /**
   * Catalog text model → upstream model name (`TEXT_UPSTREAM_MODELS`, e.g.
   * `gemforge-text-1=llama3.2,other-id=qwen2.5`). Unmapped text models stay local.
   */
  textUpstreamModels: Record<string, string>;
  /**
   * Named upstream keys a catalog model's `deployments:` refer to by name
   * (`UPSTREAM_KEYS`, e.g. `openai-a=sk-…,openai-b=sk-…`), so no key is written
   * in the catalog file.
   */
  upstreamKeys: Record<string, string>;
  /** Consecutive failures that open a deployment's circuit breaker (`BREAKER_FAILURES`, default 5). */
  breakerFailures: number;
  /** Seconds an open breaker waits before letting one probe through (`BREAKER_COOLDOWN_SECONDS`, default 30). */
  breakerCooldownSeconds: number;
  /** OpenAI-compatible Images API for image models (`IMAGE_UPSTREAM_URL`, a base such as `https://api.openai.com`). */
  imageUpstreamUrl: string | undefined;
  imageUpstreamApiKey: string | undefined;
  /** Catalog image model → upstream model (`IMAGE_UPSTREAM_MODELS`, e.g. `gemforge-image-1=gpt-image-1`). */
  imageUpstreamModels: Record<string, string>;
  /** The image upstream honours `Idempotency-Key` (`IMAGE_UPSTREAM_IDEMPOTENT`): an interrupted call is sent again, not held. */
  imageUpstreamIdempotent: boolean;
  /** OpenAI-compatible speech (`SPEECH_UPSTREAM_URL`, `…_API_KEY`, `…_MODELS`, `…_VOICES`, `…_IDEMPOTENT`). */
  speechUpstreamUrl: string | undefined;
  speechUpstreamApiKey: string | undefined;
  speechUpstreamModels: Record<string, string>;
  /** Catalog voice id → upstream voice name (`SPEECH_UPSTREAM_VOICES`, e.g. `voice_ember=alloy`). */
  speechUpstreamVoices: Record<string, string>;
  speechUpstreamIdempotent: boolean;
  /** A prediction API in Replicate's shape (`REPLICATE_API_URL`, default https://api.replicate.com). */
  replicateApiUrl: string;
  replicateApiToken: string | undefined;
  /**
   * How often a running prediction is read (`REPLICATE_POLL_MS`). The default
   * keeps 64 remote jobs (WORKER_REMOTE_CONCURRENCY's default) at 1,920 reads a
   * minute, within Replicate's 3,000 a minute.
   */
  replicatePollMs: number;
  /**
   * Reads (polls, cancels) a minute this process sends to one Replicate
   * deployment, whatever the number of jobs (`REPLICATE_READS_PER_MINUTE`).
   * Replicate allows 3,000 a minute to its endpoints other than creating one;
   * the default leaves room for the bucket's one-second burst.
   */
  replicateReadsPerMinute: number;
  /** A queue API in fal's shape (`FAL_QUEUE_URL`, default https://queue.fal.run; `FAL_KEY`, sent as `Authorization: Key …`). */
  falQueueUrl: string;
  falKey: string | undefined;
  /** How often a queued fal request's status is read (`FAL_POLL_MS`). */
  falPollMs: number;
  /** Reads (status, result, cancel) a minute this process sends to one fal deployment (`FAL_READS_PER_MINUTE`). */
  falReadsPerMinute: number;
  /** Where media bytes live (`BLOB_STORE`): `local` (DATA_DIR/blobs) or `s3` (S3-compatible object storage, S3_*). */
  blobStore: 'local' | 's3';
  s3: { endpoint: string | undefined; bucket: string; region: string; forcePathStyle: boolean; prefix: string };
  /** The URL-signing key shared by every instance (`SIGNING_SECRET`); unset: the database's keys. */
  signingSecret: Buffer | undefined;
  /** Earlier secrets that still verify links until they expire (`SIGNING_SECRET_PREVIOUS`, comma-separated). */
  signingSecretPrevious: Buffer[];
  /** A remote output's whole time budget (`REMOTE_DEADLINE_SECONDS`): past it a prediction is cancelled and the slot fails, an unanswered call is held. */
  remoteDeadlineSeconds: number;
  /** One request to a remote provider (`REMOTE_ATTEMPT_TIMEOUT_SECONDS`). */
  remoteAttemptTimeoutSeconds: number;
  /** The largest output taken from a remote provider (`REMOTE_OUTPUT_MAX_BYTES`). */
  remoteOutputMaxBytes: number;
  /**
   * Where output URLs given by an upstream may point besides public addresses
   * (`REMOTE_FETCH_ALLOW`, comma-separated addresses, CIDR ranges or host names):
   * a self-hosted upstream on a private network. Empty: public addresses only.
   */
  remoteFetchAllow: string[];
  /** Worker loops for remote providers' jobs (`WORKER_REMOTE_CONCURRENCY`), apart from WORKER_CONCURRENCY. */
  workerRemoteConcurrency: number;
  /** Honour `[[scenario:…]]` prompt markers (`SCENARIOS_ENABLED`, default true). */
  scenariosEnabled: boolean;
  /** Run the media worker inside the server (`WORKER_ENABLED`, default true; off when `gemforge worker` runs it). */
  workerEnabled: boolean;
  /** Jobs a worker runs at once (`WORKER_CONCURRENCY`, default 2). */
  workerConcurrency: number;
  /** A running job's lease in ms (`WORKER_LEASE_MS`, default 30000); a worker that stops renewing it loses the job. */
  workerLeaseMs: number;
  /** How often an idle worker looks for jobs, in ms (`WORKER_POLL_MS`, default 250). */
  workerPollMs: number;
  /**
   * First backoff of a job re-queued after its worker died, in ms
   * (`WORKER_RETRY_BACKOFF_MS`, default 1000); it doubles per attempt, up to a minute.
   */
  workerRetryBackoffMs: number;
  /**
   * How many times a job whose output could not be stored (object store or
   * database down, disk full) is handed back before the slot fails
   * (`WORKER_STORE_RETRIES`, default 20: with the doubling backoff about a quarter of an hour).
   */
  workerStoreRetries: number;
  /** `gemforge worker`'s own listener for /metrics and /healthz (`WORKER_METRICS_PORT`, on `METRICS_HOST`); none when unset. */
  workerMetricsPort: number | undefined;
  /**
   * Fair share: jobs of one account running at once in the local lane
   * (`ACCOUNT_LOCAL_CONCURRENCY`, default 2; 0: no cap), across every worker; an
   * operator overrides it per account (`gemforge admin account update --local-concurrency`).
   */
  accountLocalConcurrency: number;
  /** The same for the remote lane (`ACCOUNT_REMOTE_CONCURRENCY`, default 16; 0: no cap). */
  accountRemoteConcurrency: number;
  /**
   * Admission: media tasks one account may have queued (not yet claimed) at once
   * (`ACCOUNT_QUEUED_TASKS`, default 5000; 0: no cap); per account with
   * `gemforge admin account update --queued-tasks`. Past it a submission answers 503
   * TEMPORARILY_UNAVAILABLE with Retry-After.
   */
  accountQueuedTasks: number;
  /**
   * Admission: request rates as token buckets in the database (every API instance
   * shares them), media and text submissions counted apart: per API key
   * (`KEY_MEDIA_RATE` / `KEY_TEXT_RATE`, default 50 per second each) and per account
   * (`ACCOUNT_MEDIA_RATE` / `ACCOUNT_TEXT_RATE`, default 100 per second each), each
   * bucket holding `RATE_BURST_SECONDS` (default 20) seconds of its rate. 0 turns a
   * bucket off. Past a rate a submission answers 503 TEMPORARILY_UNAVAILABLE with Retry-After.
   */
  rates: { keyMedia: number; keyText: number; accountMedia: number; accountText: number; burstSeconds: number };
  /** Lifetime of a signed output URL in seconds (`SIGNED_URL_TTL_SECONDS`, default 3600). */
  signedUrlTtlSeconds: number;
  /** On SIGTERM/SIGINT, how long in-flight requests and text generations may finish (`SHUTDOWN_GRACE_SECONDS`, default 30). */
  shutdownGraceSeconds: number;
  /** Prometheus metrics at /metrics on the main port, for `Authorization: Bearer` this token (`METRICS_TOKEN`). */
  metricsToken: string | undefined;
  /** Or on a listener of their own (`METRICS_PORT`, on `METRICS_HOST`, default 127.0.0.1). Neither: no metrics served. */
  metricsPort: number | undefined;
  metricsHost: string;
  /** On SIGTERM: how long the server keeps listening while /readyz answers 503, before it stops accepting connections (`SHUTDOWN_READINESS_DELAY_SECONDS`). */
  shutdownReadinessDelaySeconds: number;
  /** How long task outputs are kept, in seconds (`OUTPUT_RETENTION_SECONDS`, default 7 days). */
  outputRetentionSeconds: number;
  /**
   * Public base URL for signed links (`PUBLIC_BASE_URL`, an absolute http(s) URL); default:
   * the request's `Host` when it is allowed (`allowedHosts`), else this connection's own address.
   */
  publicBaseUrl: string | undefined;
  /**
   * Host names whose `Host` header may appear in signed links when PUBLIC_BASE_URL is unset
   * (`ALLOWED_HOSTS`, comma-separated: `api.example.com`, `.example.com` for a domain and its
   * subdomains, `*` for any valid name); empty: this machine's own names (http/base-url.ts).
   */
  allowedHosts: string[];
  /** The embedded moderation policy, categories of terms and patterns (`MODERATION_POLICY_PATH`). */
  moderationPolicyPath: string;
  /**
   * OpenAI-compatible moderation endpoint (`MODERATION_URL`, a base such as `http://host:8000`,
   * `…/v1`, or the full `…/v1/moderations`); when absent the embedded policy decides.
   */
  moderationUrl: string | undefined;
  /** Bearer key for the moderation endpoint (`MODERATION_API_KEY`). */
  moderationApiKey: string | undefined;
  /** Model name sent to the moderation endpoint (`MODERATION_MODEL`, default omni-moderation-latest). */
  moderationModel: string;
  /**
   * Who decides on text (`MODERATION_MODE`): `embedded` (the policy file), `remote` (the
   * MODERATION_URL endpoint) or `both` (what the embedded policy passes is asked of the endpoint
   * too). Default: `remote` when MODERATION_URL is set, else `embedded`.
   */
  moderationMode: 'embedded' | 'remote' | 'both';
  /**
   * What a `remote` or `both` mode does while the endpoint fails (`MODERATION_REMOTE_FALLBACK`):
   * `closed` (default) refuses with 503/502 as before, `open` lets the embedded verdict stand.
   */
  moderationRemoteFallback: 'closed' | 'open';
  /**
   * Whether the embedded policy's learned classifier judges beside its rules (`MODERATION_CLASSIFIER`,
   * `on` by default, `off`): the rules alone catch about 70 % of harmful requests nobody tuned them
   * on, the two together over 90 %, and the classifier's gate keeps it off text unlike its training
   * sets (docs/policies.md, "The learned classifier", "Why it is on").
   */
  moderationClassifier: boolean;
  /** Moderation refusals of one account within the window that block it (`MODERATION_BLOCK_THRESHOLD`, default 5; 0: never). */
  moderationBlockThreshold: number;
  /** The window those refusals are counted in, in seconds (`MODERATION_BLOCK_WINDOW_SECONDS`, default 86400). */
  moderationBlockWindowSeconds: number;
  /**
   * Long texts judged by the embedded policy off the event loop (providers/moderation/off-thread.ts):
   * a request's texts of at least `minChars` characters together (`MODERATION_THREAD_MIN_CHARS`,
   * default 1000; 0: every text) go to worker threads (`MODERATION_THREADS`, default 2), with up to
   * `queue` more waiting (`MODERATION_THREAD_QUEUE`, default 128) before a request is refused with 503.
   */
  moderationThreads: { threads: number; queue: number; minChars: number };
  /**
   * Proxies whose `X-Forwarded-For` is believed (`TRUST_PROXY`, comma-separated addresses or
   * CIDR ranges, or `loopback`, `linklocal`, `uniquelocal`); empty: the socket's address is the client's.
   */
  trustProxy: string[];
  /**
   * Browser origins allowed to call the API paths cross-origin (`CORS_ORIGINS`, comma-separated
   * exact origins such as `https://app.example.com`); empty (the default): no CORS headers at all.
   */
  corsOrigins: string[];
  /** Operator-supplied CIDR → region file for regional restrictions (`REGIONS_FILE`); none: every region is unknown. */
  regionsFile: string | undefined;
  /** Account console sessions: idle and absolute lifetimes in seconds (`CONSOLE_SESSION_IDLE_SECONDS`, default 1800; `CONSOLE_SESSION_MAX_SECONDS`, default 43200). */
  consoleSession: { idleSeconds: number; maxSeconds: number };
  /**
   * Console password hashing off the event loop (domain/password-pool.ts): worker threads
   * (`CONSOLE_HASH_THREADS`, default 2) and jobs queued beyond them before a sign-in is
   * refused with 503 (`CONSOLE_HASH_QUEUE`, default 64).
   */
  consoleHashing: { threads: number; queue: number };
}

const root = path.resolve(import.meta.dirname, '..');

function parseBool(value: string | undefined, fallback: boolean): boolean {
  if (value === undefined || value === '') return fallback;
  return !['0', 'false', 'no', 'off'].includes(value.toLowerCase());
}

function parsePort(value: string | undefined, name = 'PORT'): number {
  if (value === undefined || value === '') return 8080;
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`${name} must be an integer 0-65535, got "${value}"`);
  }
  return port;
}

function parseSynchronous(value: string | undefined): 'NORMAL' | 'FULL' {
  const v = (value || 'NORMAL').toUpperCase();
  if (v !== 'NORMAL' && v !== 'FULL') throw new Error(`SQLITE_SYNCHRONOUS must be NORMAL or FULL, got "${value}"`);
  return v;
}

function parseDelay(value: string | undefined): number {
  if (value === undefined || value === '') return 5;
  const ms = Number(value);
  if (!Number.isFinite(ms) || ms < 0 || ms > 60_000) throw new Error(`TEXT_STREAM_DELAY_MS must be 0-60000, got "${value}"`);
  return ms;
}

/** `a=b,c=d` → `{a: 'b', c: 'd'}`. */
function parseMapping(value: string | undefined, name: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of (value ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const eq = pair.indexOf('=');
    if (eq <= 0 || eq === pair.length - 1) throw new Error(`${name} must look like "catalog-id=upstream-model,…", got "${pair}"`);
    out[pair.slice(0, eq).trim()] = pair.slice(eq + 1).trim();
  }
  return out;
}

function parseBlobStore(value: string | undefined, bucket: string | undefined): 'local' | 's3' {
  const store = value || 'local';
  if (store !== 'local' && store !== 's3') throw new Error(`BLOB_STORE must be local or s3, got "${value}"`);
  if (store === 's3' && !bucket) throw new Error('BLOB_STORE=s3 needs S3_BUCKET (and S3_ENDPOINT for a store other than AWS S3)');
  return store;
}

function checkMetricsToken(value: string): string {
  if (value.length < 16) throw new Error('METRICS_TOKEN must be at least 16 characters');
  return value;
}

/** `MODERATION_MODE`, `MODERATION_REMOTE_FALLBACK` and `MODERATION_CLASSIFIER`, checked now: remote modes need MODERATION_URL. */
export function parseModeration(env: NodeJS.ProcessEnv): Pick<Config, 'moderationMode' | 'moderationRemoteFallback' | 'moderationClassifier'> {
  const mode = env.MODERATION_MODE || (env.MODERATION_URL ? 'remote' : 'embedded');
  if (mode !== 'embedded' && mode !== 'remote' && mode !== 'both') throw new Error(`MODERATION_MODE must be embedded, remote or both, got "${mode}"`);
  if (mode !== 'embedded' && !env.MODERATION_URL) throw new Error(`MODERATION_MODE=${mode} needs MODERATION_URL`);
  const fallback = env.MODERATION_REMOTE_FALLBACK || 'closed';
  if (fallback !== 'closed' && fallback !== 'open') throw new Error(`MODERATION_REMOTE_FALLBACK must be closed or open, got "${fallback}"`);
  const classifier = env.MODERATION_CLASSIFIER || 'on';
  if (classifier !== 'on' && classifier !== 'off') throw new Error(`MODERATION_CLASSIFIER must be on or off, got "${classifier}"`);
  return { moderationMode: mode, moderationRemoteFallback: fallback, moderationClassifier: classifier === 'on' };
}

function parseWhole(value: string | undefined, fallback: number, name: string, min: number): number {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < min) throw new Error(`${name} must be a whole number ≥ ${min}, got "${value}"`);
  return n;
}

/** `PUBLIC_BASE_URL`: an absolute http(s) URL without query or fragment, checked now so a typo stops the start. */
function parsePublicBaseUrl(value: string | undefined): string | undefined {
  if (value === undefined || value === '') return undefined;
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.search || url.hash || url.username || url.password) {
    throw new Error(`PUBLIC_BASE_URL must be an absolute http(s) URL without credentials, query or fragment (https://api.example.com), got "${value}"`);
  }
  return url.href.replace(/\/+$/, '');
}

const PROXY_NAMES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/** `TRUST_PROXY`: addresses, CIDR ranges or proxy-addr's names, checked now so a typo stops the start. */
function parseTrustProxy(value: string | undefined): string[] {
  const entries = (value ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
  for (const entry of entries) {
    if (!PROXY_NAMES.has(entry) && !isAddressOrRange(entry)) {
      throw new Error(`TRUST_PROXY must list IP addresses, CIDR ranges, loopback, linklocal or uniquelocal; got "${entry}"`);
    }
  }
  return entries;
}

/** `CORS_ORIGINS`: exact origins (scheme, host, optional port; no path), checked now so a typo stops the start. */
function parseCorsOrigins(value: string | undefined): string[] {
  const entries = (value ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
  return entries.map((entry) => {
    let url: URL | undefined;
    try {
      url = new URL(entry);
    } catch {
      url = undefined;
    }
    // A browser sends its Origin as scheme://host[:port] exactly: anything more would never match.
    if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.origin !== entry.replace(/\/$/, '').toLowerCase()) {
      throw new Error(`CORS_ORIGINS must list exact origins such as https://app.example.com (no path, no *), got "${entry}"`);
    }
    return url.origin;
  });
}

/** `REMOTE_FETCH_ALLOW`: addresses, CIDR ranges or host names (lower-cased), checked now so a typo stops the start. */
function parseFetchAllow(value: string | undefined): string[] {
  const entries = (value ?? '')
    .split(',')
    .map((p) => p.trim().toLowerCase())
    .filter(Boolean);
  for (const entry of entries) {
    if (!isAddressOrRange(entry) && !/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/.test(entry)) {
      throw new Error(`REMOTE_FETCH_ALLOW must list IP addresses, CIDR ranges or host names; got "${entry}"`);
    }
  }
  return entries;
}

/** Builds the configuration from an environment (defaults to `process.env`), with overrides for tests. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: Partial<Config> = {}): Config {
  const production = env.NODE_ENV === 'production';
  return {
    host: env.HOST || '127.0.0.1',
    port: parsePort(env.PORT),
    dataDir: path.resolve(env.DATA_DIR || path.join(process.cwd(), 'data')),
    databaseUrl: env.DATABASE_URL || undefined,
    sqliteSynchronous: parseSynchronous(env.SQLITE_SYNCHRONOUS),
    validateResponses: parseBool(env.VALIDATE_RESPONSES, !production),
    logLevel: env.LOG_LEVEL || 'info',
    catalogPath: path.resolve(env.CATALOG_PATH || path.join(root, 'server/catalog/models.yaml')),
    openapiPath: path.resolve(env.OPENAPI_PATH || path.join(root, 'openapi/openapi.yaml')),
    keyPrefix: 'gf',
    ffmpegPath: env.FFMPEG_PATH || bundledFfmpegPath(),
    ffprobePath: env.FFPROBE_PATH || bundledFfprobePath(),
    voiceCatalogPath: path.resolve(env.VOICE_CATALOG_PATH || path.join(root, 'server/catalog/voices.yaml')),
    transcriptionUrl: env.TRANSCRIPTION_URL || undefined,
    transcriptionApiKey: env.TRANSCRIPTION_API_KEY || undefined,
    transcriptionModel: env.TRANSCRIPTION_MODEL || 'whisper-1',
    textStreamDelayMs: parseDelay(env.TEXT_STREAM_DELAY_MS),
    textUpstreamUrl: env.TEXT_UPSTREAM_URL || undefined,
    textUpstreamApiKey: env.TEXT_UPSTREAM_API_KEY || undefined,
    textUpstreamModels: parseMapping(env.TEXT_UPSTREAM_MODELS, 'TEXT_UPSTREAM_MODELS'),
    upstreamKeys: parseMapping(env.UPSTREAM_KEYS, 'UPSTREAM_KEYS'),
    breakerFailures: parseWhole(env.BREAKER_FAILURES, 5, 'BREAKER_FAILURES', 1),
    breakerCooldownSeconds: parseWhole(env.BREAKER_COOLDOWN_SECONDS, 30, 'BREAKER_COOLDOWN_SECONDS', 1),
    imageUpstreamUrl: env.IMAGE_UPSTREAM_URL || undefined,
    imageUpstreamApiKey: env.IMAGE_UPSTREAM_API_KEY || undefined,
    imageUpstreamModels: parseMapping(env.IMAGE_UPSTREAM_MODELS, 'IMAGE_UPSTREAM_MODELS'),
    imageUpstreamIdempotent: parseBool(env.IMAGE_UPSTREAM_IDEMPOTENT, false),
    speechUpstreamUrl: env.SPEECH_UPSTREAM_URL || undefined,
    speechUpstreamApiKey: env.SPEECH_UPSTREAM_API_KEY || undefined,
    speechUpstreamModels: parseMapping(env.SPEECH_UPSTREAM_MODELS, 'SPEECH_UPSTREAM_MODELS'),
    speechUpstreamVoices: parseMapping(env.SPEECH_UPSTREAM_VOICES, 'SPEECH_UPSTREAM_VOICES'),
    speechUpstreamIdempotent: parseBool(env.SPEECH_UPSTREAM_IDEMPOTENT, false),
    replicateApiUrl: env.REPLICATE_API_URL || 'https://api.replicate.com',
    replicateApiToken: env.REPLICATE_API_TOKEN || undefined,
    replicatePollMs: parseWhole(env.REPLICATE_POLL_MS, 2000, 'REPLICATE_POLL_MS', 10),
    replicateReadsPerMinute: parseWhole(env.REPLICATE_READS_PER_MINUTE, 2900, 'REPLICATE_READS_PER_MINUTE', 1),
    falQueueUrl: env.FAL_QUEUE_URL || 'https://queue.fal.run',
    falKey: env.FAL_KEY || undefined,
    falPollMs: parseWhole(env.FAL_POLL_MS, 2000, 'FAL_POLL_MS', 10),
    falReadsPerMinute: parseWhole(env.FAL_READS_PER_MINUTE, 2900, 'FAL_READS_PER_MINUTE', 1),
    blobStore: parseBlobStore(env.BLOB_STORE, env.S3_BUCKET),
    s3: {
      endpoint: env.S3_ENDPOINT || undefined,
      bucket: env.S3_BUCKET ?? '',
      region: env.S3_REGION || 'us-east-1',
      forcePathStyle: parseBool(env.S3_FORCE_PATH_STYLE, false),
      prefix: env.S3_PREFIX ? `${env.S3_PREFIX.replace(/\/+$/, '')}/` : '',
    },
    signingSecret: env.SIGNING_SECRET ? parseSecret(env.SIGNING_SECRET, 'SIGNING_SECRET') : undefined,
    signingSecretPrevious: (env.SIGNING_SECRET_PREVIOUS ?? '')
      .split(',')
      .filter((v) => v.trim() !== '')
      .map((v) => parseSecret(v, 'SIGNING_SECRET_PREVIOUS')),
    remoteDeadlineSeconds: parseWhole(env.REMOTE_DEADLINE_SECONDS, 900, 'REMOTE_DEADLINE_SECONDS', 1),
    remoteAttemptTimeoutSeconds: parseWhole(env.REMOTE_ATTEMPT_TIMEOUT_SECONDS, 120, 'REMOTE_ATTEMPT_TIMEOUT_SECONDS', 1),
    remoteOutputMaxBytes: parseWhole(env.REMOTE_OUTPUT_MAX_BYTES, 256 * 1024 * 1024, 'REMOTE_OUTPUT_MAX_BYTES', 1024),
    remoteFetchAllow: parseFetchAllow(env.REMOTE_FETCH_ALLOW),
    workerRemoteConcurrency: parseWhole(env.WORKER_REMOTE_CONCURRENCY, 64, 'WORKER_REMOTE_CONCURRENCY', 1),
    scenariosEnabled: parseBool(env.SCENARIOS_ENABLED, true),
    workerEnabled: parseBool(env.WORKER_ENABLED, true),
    workerConcurrency: parseWhole(env.WORKER_CONCURRENCY, 2, 'WORKER_CONCURRENCY', 1),
    workerLeaseMs: parseWhole(env.WORKER_LEASE_MS, 30_000, 'WORKER_LEASE_MS', 100),
    workerPollMs: parseWhole(env.WORKER_POLL_MS, 250, 'WORKER_POLL_MS', 10),
    workerRetryBackoffMs: parseWhole(env.WORKER_RETRY_BACKOFF_MS, 1000, 'WORKER_RETRY_BACKOFF_MS', 0),
    workerStoreRetries: parseWhole(env.WORKER_STORE_RETRIES, 20, 'WORKER_STORE_RETRIES', 0),
    workerMetricsPort: env.WORKER_METRICS_PORT ? parsePort(env.WORKER_METRICS_PORT, 'WORKER_METRICS_PORT') : undefined,
    accountLocalConcurrency: parseWhole(env.ACCOUNT_LOCAL_CONCURRENCY, 2, 'ACCOUNT_LOCAL_CONCURRENCY', 0),
    accountRemoteConcurrency: parseWhole(env.ACCOUNT_REMOTE_CONCURRENCY, 16, 'ACCOUNT_REMOTE_CONCURRENCY', 0),
    accountQueuedTasks: parseWhole(env.ACCOUNT_QUEUED_TASKS, 5000, 'ACCOUNT_QUEUED_TASKS', 0),
    rates: {
      keyMedia: parseWhole(env.KEY_MEDIA_RATE, 50, 'KEY_MEDIA_RATE', 0),
      keyText: parseWhole(env.KEY_TEXT_RATE, 50, 'KEY_TEXT_RATE', 0),
      accountMedia: parseWhole(env.ACCOUNT_MEDIA_RATE, 100, 'ACCOUNT_MEDIA_RATE', 0),
      accountText: parseWhole(env.ACCOUNT_TEXT_RATE, 100, 'ACCOUNT_TEXT_RATE', 0),
      burstSeconds: parseWhole(env.RATE_BURST_SECONDS, 20, 'RATE_BURST_SECONDS', 1),
    },
    signedUrlTtlSeconds: parseWhole(env.SIGNED_URL_TTL_SECONDS, 3600, 'SIGNED_URL_TTL_SECONDS', 1),
    shutdownGraceSeconds: parseWhole(env.SHUTDOWN_GRACE_SECONDS, 30, 'SHUTDOWN_GRACE_SECONDS', 0),
    metricsToken: env.METRICS_TOKEN ? checkMetricsToken(env.METRICS_TOKEN) : undefined,
    metricsPort: env.METRICS_PORT ? parsePort(env.METRICS_PORT, 'METRICS_PORT') : undefined,
    metricsHost: env.METRICS_HOST || '127.0.0.1',
    shutdownReadinessDelaySeconds: parseWhole(env.SHUTDOWN_READINESS_DELAY_SECONDS, 0, 'SHUTDOWN_READINESS_DELAY_SECONDS', 0),
    outputRetentionSeconds: parseWhole(env.OUTPUT_RETENTION_SECONDS, 7 * 24 * 3600, 'OUTPUT_RETENTION_SECONDS', 1),
    publicBaseUrl: parsePublicBaseUrl(env.PUBLIC_BASE_URL),
    allowedHosts: (env.ALLOWED_HOSTS ?? '')
      .split(',')
      .filter((e) => e.trim() !== '')
      .map(checkAllowedHost),
    moderationPolicyPath: path.resolve(env.MODERATION_POLICY_PATH || path.join(root, 'server/catalog/moderation.yaml')),
    moderationUrl: env.MODERATION_URL || undefined,
    moderationApiKey: env.MODERATION_API_KEY || undefined,
    moderationModel: env.MODERATION_MODEL || 'omni-moderation-latest',
    ...parseModeration(env),
    moderationBlockThreshold: parseWhole(env.MODERATION_BLOCK_THRESHOLD, 5, 'MODERATION_BLOCK_THRESHOLD', 0),
    moderationBlockWindowSeconds: parseWhole(env.MODERATION_BLOCK_WINDOW_SECONDS, 86_400, 'MODERATION_BLOCK_WINDOW_SECONDS', 1),
    moderationThreads: {
      threads: parseWhole(env.MODERATION_THREADS, 2, 'MODERATION_THREADS', 1),
      queue: parseWhole(env.MODERATION_THREAD_QUEUE, 128, 'MODERATION_THREAD_QUEUE', 0),
      minChars: parseWhole(env.MODERATION_THREAD_MIN_CHARS, 1_000, 'MODERATION_THREAD_MIN_CHARS', 0),
    },
    trustProxy: parseTrustProxy(env.TRUST_PROXY),
    corsOrigins: parseCorsOrigins(env.CORS_ORIGINS),
    regionsFile: env.REGIONS_FILE ? path.resolve(env.REGIONS_FILE) : undefined,
    consoleSession: {
      idleSeconds: parseWhole(env.CONSOLE_SESSION_IDLE_SECONDS, 1800, 'CONSOLE_SESSION_IDLE_SECONDS', 60),
      maxSeconds: parseWhole(env.CONSOLE_SESSION_MAX_SECONDS, 43_200, 'CONSOLE_SESSION_MAX_SECONDS', 60),
    },
    consoleHashing: {
      threads: parseWhole(env.CONSOLE_HASH_THREADS, 2, 'CONSOLE_HASH_THREADS', 1),
      queue: parseWhole(env.CONSOLE_HASH_QUEUE, 64, 'CONSOLE_HASH_QUEUE', 0),
    },
    ...overrides,
  };
}

/** A secret given in configuration: 64 hex characters (32 bytes), or any text of at least 32 characters (its SHA-256). */
export function parseSecret(value: string, name: string): Buffer {
  const v = value.trim();
  if (/^[0-9a-fA-F]{64,}$/.test(v) && v.length % 2 === 0) return Buffer.from(v, 'hex');
  if (v.length >= 32) return crypto.createHash('sha256').update(v, 'utf8').digest();
  throw new Error(`${name} must be at least 32 characters (for example 64 hex characters: openssl rand -hex 32)`);
}
