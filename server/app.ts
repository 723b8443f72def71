/**
 * Wiring (STYLE: parsers → express-openapi-validator → routers → one error
 * middleware, last). Everything the app needs is passed in, so tests can build
 * it on a temporary data dir.
 */
import nodePath from 'node:path';
import express from 'express';
import * as OpenApiValidator from 'express-openapi-validator';
import { readYamlFile } from './yaml-file.ts';
import type { AppDeps } from './deps.ts';
import { jsonBody } from './http/body.ts';
import { requestId } from './http/request-id.ts';
import { apiCors } from './http/cors.ts';
import { accessLog } from './http/access-log.ts';
import { bearerHandler } from './http/auth.ts';
import { errorMiddleware, notFoundHandler } from './http/errors.ts';
import { rejectUnrepresentable } from './http/unrepresentable.ts';
import { missingKey } from './http/missing-key.ts';
import {
  asBundled,
  cacheValidatorRoutePatterns,
  contractBundledByBuild,
  contractCheckedByBuild,
  preprocessWithoutCompiling,
  skipIdleBundling,
  skipIdleParameterMutation,
  skipUnusedSchemaValidator,
  VALIDATOR_FORMATS,
  validatorMiddleware,
} from './http/validator-routes.ts';
import { byPrefix, byPrefixes } from './http/route-prefix.ts';
import { inOneLayer, underPath } from './http/one-layer.ts';
import { modelsRouter } from './routes/models.ts';
import { textRouter } from './routes/text.ts';
import { extractRouter } from './routes/extract.ts';
import { assetsRouter, rawUploadPlaceholder } from './routes/assets.ts';
import { ASSETS_PATH, VOICES_PATH } from './http/upload-paths.ts';
import { mediaRouter } from './routes/media.ts';
import { tasksRouter } from './routes/tasks.ts';
import { filesRouter } from './routes/files.ts';
import { docsRouter } from './routes/docs.ts';
import { consoleStack } from './http/console.ts';
import { consoleRouter } from './routes/console.ts';
import { consolePageRouter } from './routes/console-page.ts';
import { healthRouter, whileDraining } from './routes/health.ts';
import { moderationDeps, policyStep } from './http/policy.ts';
import { voicesRouter, voiceUploadCleanup, voiceUploadErrors, VOICE_UPLOAD_LIMITS } from './routes/voices.ts';

/** JSON body limits per operation (spec Limits table); everything else gets the default. */
const JSON_LIMITS: Array<[string, number]> = [
  ['/api/generate/text/v1/chat/completions', 160_000],
  ['/api/generate/extract/video', 16_000],
];
const DEFAULT_JSON_LIMIT = 1_000_000;

export function createApp(deps: AppDeps): express.Express {
  const { config, db, logger, clock } = deps;
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  // Client addresses (req.ip) from X-Forwarded-For only through the proxies TRUST_PROXY names.
  app.set('trust proxy', config.trustProxy.length > 0 ? config.trustProxy : false);
  const lifecycle = deps.lifecycle ?? { draining: false };
  const defaultJson = jsonBody(DEFAULT_JSON_LIMIT);
  // Everything before the validator as one router layer (http/one-layer.ts): most of it passes a request on at once.
  app.use(
    inOneLayer(
      requestId,
      accessLog(logger, app.request, deps.metrics),
      ...(deps.metrics && config.metricsToken ? [deps.metrics.endpoint(config.metricsToken)] : []),
      // Draining: every answer closes its connection, and new work is sent to another instance (reads are still answered).
      whileDraining(lifecycle),
      // Cross-origin browser calls to the API paths, for the operator's CORS_ORIGINS only (http/cors.ts).
      ...(config.corsOrigins.length > 0 ? [underPath('/api', apiCors(config.corsOrigins))] : []),
      // Liveness and readiness for balancers and orchestrators: outside the public contract.
      byPrefix(healthRouter({ db, blobs: deps.blobs, lifecycle, logger })),
      // Signed output downloads: not an API operation, no bearer key (see routes/files.ts).
      byPrefix(filesRouter(deps)),
      // The contract (/openapi.yaml) and the API reference page (/docs): public, outside the API paths.
      byPrefix(docsRouter(deps)),
      // The account console (/console, its own contract openapi/console.yaml and session cookie): never the bearer API's stack.
      consoleStack(deps, { page: consolePageRouter(deps.consolePage, config.publicBaseUrl), api: () => consoleRouter(deps) }),
      ...JSON_LIMITS.map(([path, limit]) => underPath(path, jsonBody(limit))),
      // Raw and multipart uploads are never JSON, whatever Content-Type a client claims.
      (req, res, next) => (req.path === ASSETS_PATH || req.path === VOICES_PATH ? next() : defaultJson(req, res, next)),
      // Raw uploads are streamed by their handler, never parsed (see routes/assets.ts).
      underPath(ASSETS_PATH, rawUploadPlaceholder),
      underPath(VOICES_PATH, voiceUploadCleanup),
      // No Authorization header on a documented operation: the validator's own 401, without its detour.
      missingKey(config.openapiPath),
    ),
  );
  cacheValidatorRoutePatterns(); // the validator's route lookup compiles each documented path once, not per request
  skipIdleParameterMutation(); // and its parameter reshaping runs only where there is something to reshape
  skipUnusedSchemaValidator(); // and it compiles the OpenAPI schema only to check a contract the build did not
  const checkedByBuild = contractCheckedByBuild(config.openapiPath);
  // Its preprocessing compiled every component schema just to look it up: a contract the build preprocessed is looked up without.
  if (checkedByBuild) preprocessWithoutCompiling();
  // And it bundles the contract it is given: not one the build bundled and found unchanged.
  skipIdleBundling();
  const contract = readYamlFile(config.openapiPath) as Parameters<typeof OpenApiValidator.middleware>[0]['apiSpec'] & object;
  // The validator and the API behind it as one router layer too (http/one-layer.ts).
  app.use(
    inOneLayer(
      // The library's middleware, without its deep copy of the contract: this read is the validator's alone.
      ...validatorMiddleware(OpenApiValidator.middleware, {
        // Parsed by us (server/yaml-file.ts: kept parsed by the build), not by the validator's own YAML reader.
        apiSpec: contractBundledByBuild(config.openapiPath) ? asBundled(contract) : contract,
        // Checked against the OpenAPI schema by the build, when this very text was built (the start's self-check still proves it loads).
        validateApiSpec: !checkedByBuild,
        validateRequests: { allowUnknownQueryParameters: false },
        validateResponses: config.validateResponses,
        validateSecurity: { handlers: { bearerAuth: bearerHandler(db, clock, config.keyPrefix, deps.policies.regions) } },
        ...VALIDATOR_FORMATS,
        // Voice uploads: multer inside the validator, files on disk (never 50 MiB in memory).
        fileUploader: { dest: nodePath.join(config.dataDir, 'tmp', 'multipart'), limits: VOICE_UPLOAD_LIMITS },
      }),
      rejectUnrepresentable,
      // Account policies on the request's text, before any router claims an identity or reserves Gems.
      policyStep(moderationDeps(deps), config.openapiPath),
      // Each router is entered only for paths its routes can match, in this order (http/route-prefix.ts).
      byPrefixes(modelsRouter(deps), textRouter(deps), extractRouter(deps), mediaRouter(deps), tasksRouter(deps), assetsRouter(deps), voicesRouter(deps)),
      notFoundHandler,
    ),
  );
  app.use(voiceUploadErrors);
  app.use(errorMiddleware(config.openapiPath));
  return app;
}
