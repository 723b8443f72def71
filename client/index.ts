/** The browser-safe client surface. Node-only helpers: `client/uploads.ts`, `client/downloads.ts`. */
export * from './client.ts';
export * from './errors.ts';
export * from './idempotency.ts';
export * from './retry.ts';
export * from './tasks.ts';
export * from './chat.ts';
