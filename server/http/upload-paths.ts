/**
 * The two upload paths whose bodies are never parsed as JSON: the wiring skips
 * the JSON parser for them and the error middleware answers a raw upload's
 * refused media type in the assets' own words. Here, not in the routers, so
 * the middleware below the routers can name them without importing one.
 */
export const ASSETS_PATH = '/api/generate/assets';
export const VOICES_PATH = '/api/generate/voices';
