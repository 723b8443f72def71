/**
 * GET /openapi.yaml: the contract itself, as application/yaml.
 * GET /docs: an interactive API reference (Swagger UI from the npm package
 * swagger-ui-dist, served from node_modules: nothing is fetched from the
 * internet). Public pages outside the API paths, mounted before the validator
 * like routes/files.ts; no bearer key.
 */
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { Router } from 'express';
import type { AppDeps } from '../app.ts';

const SWAGGER_DIR = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));

// No inline script, so the page also works under a strict Content-Security-Policy.
const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>gemforge API reference</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
<style>body { margin: 0 } .swagger-ui .topbar { display: none }</style>
</head>
<body>
<noscript>This page needs JavaScript. The contract itself is at <a href="/openapi.yaml">/openapi.yaml</a>.</noscript>
<div id="gemforge-docs"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/assets/docs.js"></script>
</body>
</html>
`;

// validatorUrl: null, or Swagger UI would ask a public validator for a badge.
const INIT = `window.ui = SwaggerUIBundle({
  url: '/openapi.yaml',
  dom_id: '#gemforge-docs',
  deepLinking: true,
  validatorUrl: null,
  tryItOutEnabled: false,
  persistAuthorization: false,
  presets: [SwaggerUIBundle.presets.apis],
});
`;

const ASSETS: Record<string, { type: string; file?: string; text?: string }> = {
  'swagger-ui.css': { type: 'text/css; charset=utf-8', file: 'swagger-ui.css' },
  'swagger-ui-bundle.js': { type: 'text/javascript; charset=utf-8', file: 'swagger-ui-bundle.js' },
  'docs.js': { type: 'text/javascript; charset=utf-8', text: INIT },
};

export function docsRouter({ config }: Pick<AppDeps, 'config'>): Router {
  const router = Router();
  router.get('/openapi.yaml', (_req, res) => {
    res.status(200).type('application/yaml').send(fs.readFileSync(config.openapiPath));
  });
  router.get('/docs', (_req, res) => {
    res.status(200).type('text/html; charset=utf-8').send(PAGE);
  });
  router.get('/docs/assets/:name', (req, res, next) => {
    const asset = ASSETS[req.params.name];
    if (!asset) return next();
    res.setHeader('cache-control', 'public, max-age=3600');
    res.status(200).type(asset.type);
    if (asset.text !== undefined) res.send(asset.text);
    else res.sendFile(path.join(SWAGGER_DIR, asset.file!));
  });
  return router;
}
