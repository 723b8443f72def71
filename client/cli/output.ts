/** What the CLI prints: results on stdout, progress and errors on stderr; --json for machines. */
import { ConnectionError, GemforgeError } from '../errors.ts';
import { retryReason } from '../retry.ts';

export interface CliIo {
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
  env: Record<string, string | undefined>;
}

export const printJson = (io: CliIo, value: unknown) => io.stdout.write(`${JSON.stringify(value, null, 2)}\n`);

/**
 * Prints an error with the spec's code and a one-line hint; when the identity
 * must be kept (uncertain, 5xx, network, incomplete stream) it says how to
 * replay it. A refused connection says there is no server at `baseUrl`.
 * Returns the exit code (1).
 */
export function printError(io: CliIo, error: unknown, json: boolean, baseUrl: string): number {
  if (error instanceof ConnectionError && error.refused) return printRefused(io, error, json, baseUrl);
  if (!(error instanceof GemforgeError)) {
    io.stderr.write(`gemforge: ${(error as Error)?.message ?? String(error)}\n`);
    if (json) printJson(io, { error: { message: (error as Error)?.message ?? String(error) } });
    return 1;
  }
  const code = error.code ?? (error.status ? `HTTP ${error.status}` : 'NO_RESPONSE');
  const where = error.status ? ` (HTTP ${error.status})` : '';
  io.stderr.write(`error: ${code}${where}: ${error.message}\nhint: ${error.hint}\n`);
  const keep = error.idempotencyKey && (retryReason(error) || error.code === 'STREAM_INCOMPLETE' || error.name === 'StreamError');
  if (keep)
    io.stderr.write(
      `idempotency key: ${error.idempotencyKey} (tried ${error.attempts}×). To check again later, rerun the same command with --idempotency-key ${error.idempotencyKey}\n`,
    );
  if (error.requestId) io.stderr.write(`request id: ${error.requestId}\n`);
  if (json) {
    printJson(io, {
      error: {
        status: error.status,
        code: error.code,
        message: error.message,
        hint: error.hint,
        requestId: error.requestId,
        idempotencyKey: error.idempotencyKey,
        attempts: error.attempts,
      },
    });
  }
  return 1;
}

/** Nothing listens at the base URL: say so plainly; a spending command still names its identity. */
function printRefused(io: CliIo, error: ConnectionError, json: boolean, baseUrl: string): number {
  const message = `no server at ${baseUrl} (is it running? set GEMFORGE_BASE_URL)`;
  io.stderr.write(`error: ${message}\n`);
  const key = error.idempotencyKey;
  if (key) io.stderr.write(`idempotency key: ${key}. Nothing reached the server; once it runs, rerun the same command with --idempotency-key ${key}\n`);
  if (json) printJson(io, { error: { message, idempotencyKey: key } });
  return 1;
}
