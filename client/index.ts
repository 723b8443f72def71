/** The browser-safe entry of @gemforge/client. The Node-only helpers (uploads from paths and streams, downloads) are in `@gemforge/client/node` (node.ts). */
export * from './client.ts';
export * from './errors.ts';
export * from './idempotency.ts';
export * from './retry.ts';
export * from './tasks.ts';
export * from './chat.ts';
export * from './ai-fetch.ts';
