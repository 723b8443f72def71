/**
 * express-openapi-validator's own middleware list (5.6, `installMiddleware` in
 * its dist/openapi.validator.js), run as one middleware once the contract is
 * loaded.
 *
 * The library gives Express five middlewares for our options (path
 * parameters, metadata, security, multipart, request validation; response
 * validation a sixth where it is on), and each waits for the loaded contract
 * on every request: `contract.then(step).catch(next)`, a promise and a trip
 * through the microtask queue per step, and for the router a layer to match
 * and a returned promise to watch per step. Here the steps are the library's
 * own (made by the same methods of the same validator object, at the first
 * request, as it makes them) and run in its order; only the waiting goes:
 * before the contract is loaded a request waits for it as before, after it
 * each step calls the next directly. What each step answers is unchanged: a
 * step's thrown error or rejected promise goes to `next` as the library's
 * `.catch(next)` sends it, and the first error ends the list, so errors keep
 * their order (404/405, then security, multipart, request validation).
 * Measured on a task read: docs/performance.md, "A task read against bare
 * node:http".
 */
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import * as contextImport from 'express-openapi-validator/dist/framework/openapi.context.js';
import * as preprocessorImport from 'express-openapi-validator/dist/middlewares/parsers/schema.preprocessor.js';

type Handler = (req: Request, res: Response, next: NextFunction) => unknown;

interface ApiDoc {
  components?: { securitySchemes?: unknown };
}
interface Context {
  apiDoc: ApiDoc;
  serial: number;
}
interface Loaded {
  context: Context | null;
  responseApiDoc: unknown;
  error: unknown;
}

/** The parts of the library's `OpenApiValidator` object that its `installMiddleware` uses. */
export interface ValidatorObject {
  options: {
    ignorePaths?: unknown;
    ignoreUndocumented?: boolean;
    useRequestUrl?: boolean;
    validateSecurity?: unknown;
    fileUploader?: unknown;
    validateRequests?: unknown;
    validateResponses?: unknown;
    operationHandlers?: unknown;
  };
  ajvOpts: { preprocessor: unknown };
  installMiddleware(spec: Promise<unknown>): RequestHandler[];
  installPathParams(app: unknown, context: Context): void;
  metadataMiddleware(context: Context, responseApiDoc: unknown): Handler;
  securityMiddleware(apiDoc: ApiDoc): Handler;
  multipartMiddleware(apiDoc: ApiDoc): Handler;
  requestValidationMiddleware(apiDoc: ApiDoc): Handler;
  responseValidationMiddleware(apiDoc: unknown, serial: number): Handler;
}

interface PreprocessorClass {
  new (apiDoc: unknown, ajvOpts: unknown, validateResponses: unknown): { preProcess(): { apiDocRes: unknown } };
}
type ContextClass = new (spec: unknown, ignorePaths: unknown, ignoreUndocumented?: boolean, useRequestUrl?: boolean) => Context;

const exportsOf = <T>(imported: unknown): T => (imported as { default: T }).default;

/**
 * The library's middleware list for `oav` over the contract `spec` will load,
 * as one middleware. A validator with operation handlers (not used here)
 * gets the library's own list.
 */
export function validatorChain(oav: ValidatorObject, spec: Promise<{ apiDoc: unknown }>): RequestHandler[] {
  if (oav.options.operationHandlers) return oav.installMiddleware(spec);
  const { SchemaPreprocessor } = exportsOf<{ SchemaPreprocessor: PreprocessorClass }>(preprocessorImport);
  const { OpenApiContext } = exportsOf<{ OpenApiContext: ContextClass }>(contextImport);
  const { options } = oav;
  // As the library: the contract preprocessed as soon as it is loaded, a failure kept and answered to every request.
  const loaded: Promise<Loaded> = spec.then(
    (loadedSpec) => {
      const sp = new SchemaPreprocessor(loadedSpec.apiDoc, oav.ajvOpts.preprocessor, options.validateResponses).preProcess();
      return {
        context: new OpenApiContext(loadedSpec, options.ignorePaths, options.ignoreUndocumented, options.useRequestUrl),
        responseApiDoc: sp.apiDocRes,
        error: null,
      };
    },
    (error: unknown) => ({ context: null, responseApiDoc: null, error }),
  );
  let steps: Handler[] | undefined;
  const stepsFor = (req: Request, { context, responseApiDoc }: Loaded & { context: Context }): Handler[] => {
    oav.installPathParams(req.app, context);
    const { apiDoc, serial } = context;
    const list = [oav.metadataMiddleware(context, responseApiDoc)];
    if (options.validateSecurity && apiDoc.components?.securitySchemes) list.push(oav.securityMiddleware(apiDoc));
    if (options.fileUploader) list.push(oav.multipartMiddleware(apiDoc));
    if (options.validateRequests) list.push(oav.requestValidationMiddleware(apiDoc));
    if (options.validateResponses) list.push(oav.responseValidationMiddleware(responseApiDoc, serial));
    return list;
  };
  const openApiValidator = (req: Request, res: Response, next: NextFunction): unknown => {
    if (steps) return run(steps, req, res, next);
    return loaded
      .then((result) => {
        if (result.error) throw result.error;
        steps ??= stepsFor(req, result as Loaded & { context: Context });
        run(steps, req, res, next);
      })
      .catch(next);
  };
  return [openApiValidator];
}

/** Runs `steps` in order, each one's `next` the following step; the first error (thrown, rejected or passed) goes to `next`. */
function run(steps: Handler[], req: Request, res: Response, next: NextFunction): void {
  let i = 0;
  const step = (error?: unknown): void => {
    if (error) return next(error);
    const handler = steps[i++];
    if (!handler) return next();
    try {
      const result = handler(req, res, step);
      if (typeof (result as Promise<unknown> | undefined)?.then === 'function') (result as Promise<unknown>).then(undefined, next);
    } catch (thrown) {
      next(thrown);
    }
  };
  step();
}
