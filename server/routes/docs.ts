/**
 * GET /openapi.yaml: the contract itself, as application/yaml.
 * GET /docs/openapi.json: the same contract as JSON, for the page.
 * GET /docs: an interactive API reference (Swagger UI from the npm package
 * swagger-ui-dist, served from node_modules: nothing is fetched from the
 * internet). Public pages outside the API paths, mounted before the validator
 * like routes/files.ts; no bearer key.
 */
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { Router } from 'express';
import { readYamlFile } from '../yaml-file.ts';
import type { AppDeps } from '../deps.ts';

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

/**
 * The page's script. It loads the contract as JSON and points "Try it out" at
 * the server that serves the page, whatever its host and port (the contract's
 * `servers` entry is only the default local address). The prefilled
 * Idempotency-Key is fresh per page load, and every try that still carries it
 * gets a fresh one, so a second try with another body is not a 409
 * IDEMPOTENCY_CONFLICT; a key the reader typed is sent as typed.
 * getRandomValues, not randomUUID: the latter needs a secure context, and the
 * page may be served over plain http on any host.
 * validatorUrl: null, or Swagger UI would ask a public validator for a badge.
 */
const INIT = `(function () {
  function freshKey() {
    var bytes = crypto.getRandomValues(new Uint8Array(12));
    return 'docs-' + Array.prototype.map.call(bytes, function (b) { return b.toString(16).padStart(2, '0'); }).join('');
  }
  var prefilled = freshKey();
  fetch('/docs/openapi.json')
    .then(function (res) { return res.json(); })
    .then(function (spec) {
      spec.servers = [{ url: window.location.origin, description: 'This server (the one serving this page)' }];
      var parameters = (spec.components && spec.components.parameters) || {};
      Object.keys(parameters).forEach(function (name) {
        var p = parameters[name];
        if (p.name !== 'Idempotency-Key') return;
        delete p.examples; // the contract's per-example keys would be reused on every try
        p.example = prefilled;
      });
      window.ui = SwaggerUIBundle({
        spec: spec,
        dom_id: '#gemforge-docs',
        deepLinking: true,
        validatorUrl: null,
        tryItOutEnabled: false,
        persistAuthorization: false,
        presets: [SwaggerUIBundle.presets.apis],
        requestInterceptor: function (req) {
          Object.keys(req.headers || {}).forEach(function (name) {
            if (name.toLowerCase() === 'idempotency-key' && req.headers[name] === prefilled) req.headers[name] = freshKey();
          });
          return req;
        },
      });
    });
})();
`;

// A Map, not a plain object: the name is user text, and `ASSETS.constructor` exists.
const ASSETS = new Map<string, { type: string; file?: string; text?: string }>([
  ['swagger-ui.css', { type: 'text/css; charset=utf-8', file: 'swagger-ui.css' }],
  ['swagger-ui-bundle.js', { type: 'text/javascript; charset=utf-8', file: 'swagger-ui-bundle.js' }],
  ['docs.js', { type: 'text/javascript; charset=utf-8', text: INIT }],
]);

/**
 * The page shares its origin with the console: it loads only its own assets, talks only
 * to this origin, and no other site may frame it (clickjacking "Try it out" with a key).
 * Swagger UI sets style attributes and shows data: images, hence those two allowances.
 */
const DOCS_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

export function docsRouter({ config }: Pick<AppDeps, 'config'>): Router {
  const router = Router();

  router.get('/openapi.yaml', (_req, res) => {
    res.set(DOCS_HEADERS).status(200).type('application/yaml').send(fs.readFileSync(config.openapiPath));
  });
  // The same contract as JSON for the page (a browser has no YAML parser).
  let contractJson: string | undefined;
  router.get('/docs/openapi.json', (_req, res) => {
    contractJson ??= JSON.stringify(readYamlFile(config.openapiPath));
    res.set(DOCS_HEADERS).status(200).type('application/json').send(contractJson);
  });
  router.get('/docs', (_req, res) => {
    res.set(DOCS_HEADERS).status(200).type('text/html; charset=utf-8').send(PAGE);
  });
  router.get('/docs/assets/:name', (req, res, next) => {
    const asset = ASSETS.get(req.params.name);
    if (!asset) return next();
    res.set(DOCS_HEADERS).setHeader('cache-control', 'public, max-age=3600');
    res.status(200).type(asset.type);
    if (asset.text !== undefined) res.send(asset.text);
    else res.sendFile(path.join(SWAGGER_DIR, asset.file!));
  });
  return router;
}
