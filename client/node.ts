/**
 * The Node-only helpers of `@gemforge/client/node`: uploads from a file path,
 * bytes or a stream, and downloads of a task's outputs to a folder. Everything
 * of the browser-safe entry is re-exported, so a Node program can import all
 * of it from here.
 */
export * from './index.ts';
export * from './uploads.ts';
export * from './downloads.ts';
