/**
 * Configuration, read once at start from the environment (STYLE habit 12).
 * Nothing else in the server reads `process.env`.
 */
import path from 'node:path';

export interface Config {
  /** Interface to bind (`HOST`, default 127.0.0.1). */
  host: string;
  /** Port to bind (`PORT`, default 8080; 0 picks a free port). */
  port: number;
  /** Directory for the SQLite database, blobs and the server secret (`DATA_DIR`, default ./data). */
  dataDir: string;
  /** knex connection string for a server database (`DATABASE_URL`); SQLite under dataDir when absent. */
  databaseUrl: string | undefined;
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
}

const root = path.resolve(import.meta.dirname, '..');

function parseBool(value: string | undefined, fallback: boolean): boolean {
  if (value === undefined || value === '') return fallback;
  return !['0', 'false', 'no', 'off'].includes(value.toLowerCase());
}

function parsePort(value: string | undefined): number {
  if (value === undefined || value === '') return 8080;
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`PORT must be an integer 0-65535, got "${value}"`);
  }
  return port;
}

/** Builds the configuration from an environment (defaults to `process.env`), with overrides for tests. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: Partial<Config> = {}): Config {
  const production = env.NODE_ENV === 'production';
  return {
    host: env.HOST || '127.0.0.1',
    port: parsePort(env.PORT),
    dataDir: path.resolve(env.DATA_DIR || path.join(process.cwd(), 'data')),
    databaseUrl: env.DATABASE_URL || undefined,
    validateResponses: parseBool(env.VALIDATE_RESPONSES, !production),
    logLevel: env.LOG_LEVEL || 'info',
    catalogPath: path.resolve(env.CATALOG_PATH || path.join(root, 'server/catalog/models.yaml')),
    openapiPath: path.resolve(env.OPENAPI_PATH || path.join(root, 'openapi/openapi.yaml')),
    keyPrefix: 'gf',
    ...overrides,
  };
}
