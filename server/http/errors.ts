/**
 * The one error middleware, so errors map to statuses in one place: every failure, whoever raised it,
 * leaves as the spec's Error envelope with one of the spec's statuses.
 * - a domain error: its status, code and message from error-map.ts (an ApiError
 *   a router or middleware built: as it is).
 * - express-openapi-validator: 404/405 → 404 NOT_FOUND; request validation → 422
 *   INVALID_REQUEST (a path parameter that cannot be an ID → 404; another model
 *   where the contract fixes one → 422 MODEL_UNAVAILABLE); 415 → 422; security →
 *   the precise auth error; response validation (a handler broke the contract) →
 *   503, logged.
 * - body parsers (reported after authentication, see http/body.ts): malformed
 *   JSON → 400 INVALID_JSON; JSON that is not an object → 422; a body that does
 *   not decode with its Content-Encoding → 400; too large → 413.
 * - anything else → 503 TEMPORARILY_UNAVAILABLE with a safe message, logged.
 * Every 503 carries `Retry-After` (the spec: keep the identity and back off):
 * the error's own seconds (a rate limit's wait), else DEFAULT_RETRY_AFTER_SECONDS.
 * HEAD errors carry no body.
 */
import type { NextFunction, Request, Response } from 'express';
import { readYamlFile } from '../yaml-file.ts';
import { ApiError } from './api-error.ts';
import { invalidApiKey } from '../domain/errors.ts';
import { answerOf, apiErrorOf, unavailable } from './error-map.ts';
import { describeKnownIssue, rebaseTagged, refResolver, type RefResolver, type ValidatorIssue } from './issue-text.ts';
import { unsupportedUploadType } from '../domain/assets.ts';
import { ASSETS_PATH } from './upload-paths.ts';

interface HttpLikeError {
  status?: number;
  statusCode?: number;
  type?: string;
  errors?: ValidatorIssue[];
  message?: string;
  path?: string;
}

/** Turns a validator issue into a readable sentence: its own words for the known kinds, else the field and the validator's. */
function describeIssue(issue: ValidatorIssue, req: Request, resolve: RefResolver): string {
  const known = describeKnownIssue(issue, { bodySchema: bodySchemaOf(req), body: req.body, parameters: operationOf(req)?.parameters, resolve });
  if (known) return known;
  const where = (issue.path ?? '')
    .replace(/^\.?\/?/, '')
    .replaceAll('/', '.')
    .replace(/^headers\./, 'header ');
  // A `false` schema in the contract: a field the operation (or mode) does not take.
  const message = issue.message === 'boolean schema is false' ? 'is not accepted by this operation or mode' : (issue.message ?? 'is invalid');
  return where ? `${where} ${message}` : message;
}

/** The request body schema the validator used for this request's media type. */
function bodySchemaOf(req: Request): unknown {
  const content = operationOf(req)?.requestBody?.content ?? {};
  const type = (req.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
  return (Object.hasOwn(content, type) ? content[type] : Object.values(content)[0])?.schema;
}

/** The issues worth reporting: an if/then's summary line adds nothing to the field it names. */
function reportable(issues: ValidatorIssue[]): ValidatorIssue[] {
  const specific = issues.filter((i) => !/^must match "(then|else)" schema$/.test(i.message ?? ''));
  return specific.length > 0 ? specific : issues;
}

interface MatchedOperation {
  parameters?: unknown;
  requestBody?: { content?: Record<string, { schema?: { properties?: { model?: { const?: unknown } } } }> };
}

/** The contract operation the validator matched (its request body schema's refs resolved), if any. */
function operationOf(req: Request): MatchedOperation | undefined {
  return (req as Request & { openapi?: { schema?: MatchedOperation } }).openapi?.schema;
}

/** The `const` of the operation's `model` field, from the contract the validator matched. */
function constModelOf(req: Request): string | undefined {
  const model = operationOf(req)?.requestBody?.content?.['application/json']?.schema?.properties?.model?.const;
  return typeof model === 'string' ? model : undefined;
}

function isJson(text: unknown): boolean {
  if (typeof text !== 'string') return false;
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** A body parser's failure (malformed JSON, too large, undecodable) as the spec's error; undefined for anything else. */
export function bodyErrorOf(error: unknown, req: Request): ApiError | undefined {
  if (!error || typeof error !== 'object') return undefined;
  const err = error as HttpLikeError;
  const status = err.status ?? err.statusCode;
  if (err.type === 'entity.parse.failed') {
    // Strict JSON parsing refuses valid JSON that is not an object or array (`null`, `"x"`, `1`).
    if (isJson((err as { body?: unknown }).body)) return new ApiError(422, 'INVALID_REQUEST', 'The request body must be a JSON object.');
    return new ApiError(400, 'INVALID_JSON', 'The request body is not valid JSON.');
  }
  if (typeof (err as { code?: unknown }).code === 'string' && /^Z_/.test((err as { code: string }).code)) {
    // zlib: a body that does not decode with its Content-Encoding (gzip, deflate, br).
    return new ApiError(400, 'INVALID_REQUEST', `The request body could not be decoded with Content-Encoding "${req.get('content-encoding') ?? ''}".`);
  }
  if (err.type === 'entity.too.large' || status === 413) {
    return new ApiError(413, 'INVALID_REQUEST', 'The request body is too large for this operation.');
  }
  if (err.type?.startsWith('entity.') || err.type === 'charset.unsupported' || err.type === 'encoding.unsupported') {
    return new ApiError(400, 'INVALID_REQUEST', err.message ?? 'The request body could not be read.');
  }
  return undefined;
}

function fromValidator(err: HttpLikeError, req: Request, resolve: RefResolver): ApiError | undefined {
  const status = err.status ?? err.statusCode;
  // Security failures, and body failures reported after authentication (http/body.ts).
  if (req.authError && [400, 401, 403, 413, 422, 500].includes(status ?? 0)) return req.authError;
  const body = bodyErrorOf(err, req);
  if (body) return body;
  if (status === 404 || status === 405) return noSuchRoute(req);
  // A path that is not valid percent-encoding (`/files/%E0%A4%A`) names nothing: the router's URIError, or the validator's "malformed uri".
  if (status === 400 && (/^Failed to decode param/.test(err.message ?? '') || err.errors?.some((i) => /malformed uri/i.test(i.message ?? '')))) {
    return new ApiError(404, 'NOT_FOUND', 'No such route: the path is not valid percent-encoding.');
  }
  if (status === 401) return apiErrorOf(invalidApiKey());
  if (status === 403) return new ApiError(403, 'INSUFFICIENT_SCOPE', 'This API key lacks the scope needed for this operation.');
  if (status === 415) {
    if (req.path === ASSETS_PATH) return apiErrorOf(unsupportedUploadType(req.get('content-type')));
    return new ApiError(422, 'INVALID_REQUEST', `Unsupported Content-Type "${req.get('content-type') ?? ''}" for this operation.`);
  }
  if (status === 400 && Array.isArray(err.errors)) {
    const issues = rebaseTagged(err.errors, bodySchemaOf(req), req.body, resolve);
    // A path parameter that cannot be an ID (too long, wrong characters) names no task: 404.
    if (issues.length > 0 && issues.every((i) => /^\/?params\//.test(i.path?.replace(/^\./, '') ?? ''))) {
      return new ApiError(404, 'NOT_FOUND', 'No such task.');
    }
    // The extraction's model is a schema constant: any other model is not available there.
    const modelIssue = issues.find((i) => /^\/?body\/model$/.test(i.path?.replace(/^\./, '') ?? '') && /constant/.test(i.message ?? ''));
    if (modelIssue) {
      const allowed = constModelOf(req);
      return new ApiError(
        422,
        'MODEL_UNAVAILABLE',
        allowed ? `This operation is served only by model ${allowed}.` : 'This model does not serve this operation.',
      );
    }
    const detail = reportable(issues)
      .slice(0, 5)
      .map((issue) => describeIssue(issue, req, resolve))
      .join('; ');
    return new ApiError(422, 'INVALID_REQUEST', `Invalid request: ${detail}.`);
  }
  return undefined;
}

/** A 503 that knows no better wait (a database or storage outage, a drain): the client backs off this long at least. */
export const DEFAULT_RETRY_AFTER_SECONDS = 1;

function send(res: Response, req: Request, error: ApiError): void {
  res.status(error.status);
  if (error.shouldNotRetry) res.setHeader('x-should-retry', 'false');
  const retryAfter = error.retryAfterSeconds ?? (error.status === 503 ? DEFAULT_RETRY_AFTER_SECONDS : undefined);
  if (retryAfter !== undefined) res.setHeader('retry-after', String(retryAfter));
  if (req.method === 'HEAD') {
    res.end();
    return;
  }
  // Not res.json(): that is response-validated, and an error must never be rewritten.
  res.type('json').send(JSON.stringify(error.toEnvelope()));
}

/**
 * The error middleware for a contract: `openapiPath` is read (once, when a
 * validation message first needs the accepted field names) to resolve the
 * schemas the validator matched.
 */
export function errorMiddleware(openapiPath: string) {
  let doc: unknown;
  const resolve: RefResolver = (ref) => {
    doc ??= readYamlFile(openapiPath);
    return refResolver(doc)(ref);
  };
  return (err: unknown, req: Request, res: Response, next: NextFunction): void => handleError(err, req, res, next, resolve);
}

function handleError(err: unknown, req: Request, res: Response, _next: NextFunction, resolve: RefResolver): void {
  let error: ApiError;
  const answer = answerOf(err);
  if (answer) {
    error = answer;
  } else {
    const mapped = err && typeof err === 'object' ? fromValidator(err, req, resolve) : undefined;
    if (mapped) {
      error = mapped;
    } else {
      req.log?.error({ err, requestId: req.id }, 'unexpected failure');
      error = unavailable();
    }
  }
  if (error.status >= 500) req.log?.warn({ code: error.code, requestId: req.id }, error.message);
  if (res.headersSent) {
    // Mid-stream failure: the stream's own writer reports it; just make sure the response ends.
    if (!res.writableEnded) res.end();
    return;
  }
  send(res, req, error);
}

/**
 * Fallback for requests no route answered: a contract operation this server does
 * not serve (yet) is 503 WORKFLOW_UNAVAILABLE; anything else is 404 NOT_FOUND.
 */
export function notFoundHandler(req: Request, _res: Response, next: NextFunction): void {
  const operationId = (req as Request & { openapi?: { schema?: { operationId?: string } } }).openapi?.schema?.operationId;
  if (operationId) {
    next(new ApiError(503, 'WORKFLOW_UNAVAILABLE', `The ${operationId} workflow is not available on this server.`));
    return;
  }
  next(noSuchRoute(req));
}

const TEXT_BASE = '/api/generate/text/v1';
const CHAT = `${TEXT_BASE}/chat/completions`;

/**
 * 404 NOT_FOUND for a path nothing serves. Under the text API's base the message
 * says what is served instead: OpenAI-compatible SDKs point at the base and then
 * pick an endpoint themselves, and some (the AI SDK's `provider(id)`, since its
 * version 5) pick the Responses API, which a bare "No such route" leaves a mystery.
 */
function noSuchRoute(req: Request): ApiError {
  const path = req.path.toLowerCase().replace(/\/+$/, '');
  if (!path.startsWith(`${TEXT_BASE}/`)) return new ApiError(404, 'NOT_FOUND', 'No such route.');
  const served = `This server speaks OpenAI chat completions only, at POST ${CHAT} (base URL ${TEXT_BASE}).`;
  if (path === `${TEXT_BASE}/responses` || path.startsWith(`${TEXT_BASE}/responses/`)) {
    return new ApiError(
      404,
      'NOT_FOUND',
      `${served} The Responses API (/responses) is not served: configure your SDK for chat completions, e.g. the AI SDK's provider.chat(modelId) instead of provider(modelId), or the openai package's client.chat.completions.create().`,
    );
  }
  return new ApiError(404, 'NOT_FOUND', `No such route. ${served}`);
}
