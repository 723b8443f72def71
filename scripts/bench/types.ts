/** What bench-http.ts hands the load process, and what it gets back. */
export interface LoadJob {
  kind: 'autocannon' | 'node';
  url: string;
  method: string;
  headers: Record<string, string>;
  body?: string;
  connections: number;
  warmupSeconds: number;
  durationSeconds: number;
  /** `autocannon` jobs: these paths (of `url`'s server) one after another, round and round, instead of `url`'s own. */
  paths?: string[];
  /** `autocannon` jobs: these bodies one after another, round and round, instead of `body`. */
  bodies?: string[];
  /** A new Idempotency-Key on every request (a new identity each). */
  freshIdempotencyKey?: boolean;
  /** `node` jobs: latency to the first body chunk instead of the end of the response. */
  firstChunk?: boolean;
  /** The server's pid, to read the CPU time it spent (Linux /proc) over the measurement. */
  serverPid?: number;
}

export interface LoadResult {
  /** Completed requests per second . */
  rps: number;
  /** Latency quantiles in ms (or to the first body chunk). */
  p50: number;
  p99: number;
  requests: number;
  errors: number;
  /** Responses per HTTP status. */
  statuses: Record<string, number>;
  /**
   * The server's CPU time per request in µs over the measurement (Linux only).
   * Unlike req/s it hardly moves when other processes compete for the machine.
   */
  cpuUs?: number;
}
