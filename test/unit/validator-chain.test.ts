/**
 * express-openapi-validator's steps run as one middleware (server/http/validator-chain.ts):
 * in the library's order, the first error ending the list, a failed contract answered to every
 * request, and no waiting for the contract once it is loaded.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { NextFunction, Request, Response } from 'express';
import * as validatorClassImport from 'express-openapi-validator/dist/openapi.validator.js';
import * as specLoaderImport from 'express-openapi-validator/dist/framework/openapi.spec.loader.js';
import { validatorChain, type ValidatorObject } from '../../server/http/validator-chain.ts';

type Step = (req: Request, res: Response, next: NextFunction) => unknown;

const { OpenApiValidator } = (validatorClassImport as unknown as { default: { OpenApiValidator: new (options: object) => ValidatorObject } }).default;
const { OpenApiSpecLoader } = (
  specLoaderImport as unknown as { default: { OpenApiSpecLoader: new (args: object) => { load(): Promise<{ apiDoc: unknown }> } } }
).default;

const CONTRACT = {
  openapi: '3.1.0',
  info: { title: 't', version: '1' },
  paths: {},
  components: { securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer' } } },
};

/**
 * The library's validator object for a small contract, its steps replaced by ones that record
 * their names in `ran` (each step's behaviour given by `steps`), with the contract it loads.
 */
function fakeValidator(ran: string[], steps: Partial<Record<string, Step>> = {}, options: object = {}) {
  const contract = structuredClone(CONTRACT);
  const oav = new OpenApiValidator({ apiSpec: contract, validateApiSpec: false, validateSecurity: { handlers: {} }, fileUploader: {}, ...options });
  const step = (name: string): Step => steps[name] ?? ((_req, _res, next) => (ran.push(name), next()));
  Object.assign(oav, {
    installMiddleware: () => assert.fail('the library list is only for operation handlers'),
    installPathParams: () => void ran.push('pathParams'),
    metadataMiddleware: () => step('metadata'),
    securityMiddleware: () => step('security'),
    multipartMiddleware: () => step('multipart'),
    requestValidationMiddleware: () => step('request'),
    responseValidationMiddleware: () => step('response'),
  });
  return [oav, new OpenApiSpecLoader({ apiDoc: contract, validateApiSpec: false }).load()] as const;
}

const REQ = { app: {} } as Request;
const RES = {} as Response;

/** Calls the chain's middleware and resolves with what it passed to `next` (undefined: go on). */
function pass(mw: Step): Promise<unknown> {
  return new Promise((resolve) => void mw(REQ, RES, resolve as NextFunction));
}

describe('validator steps as one middleware', () => {
  it('when a request passes, then every step runs once in the library order, path parameters installed at the first request only', async () => {
    const ran: string[] = [];
    const [mw] = validatorChain(...fakeValidator(ran, {}, { validateResponses: true }));
    assert.equal(await pass(mw as Step), undefined);
    assert.deepEqual(ran, ['pathParams', 'metadata', 'security', 'multipart', 'request', 'response']);
    ran.length = 0;
    assert.equal(await pass(mw as Step), undefined);
    assert.deepEqual(ran, ['metadata', 'security', 'multipart', 'request', 'response']);
  });

  it('when a step throws, rejects or passes an error, then next gets that error and no later step runs', async () => {
    const failures: Record<string, Step> = {
      throws: () => {
        throw new Error('thrown');
      },
      rejects: () => Promise.reject(new Error('rejected')),
      passes: (_req, _res, next) => next(new Error('passed')),
    };
    for (const [how, security] of Object.entries(failures)) {
      const ran: string[] = [];
      const [mw] = validatorChain(...fakeValidator(ran, { security }));
      const error = (await pass(mw as Step)) as Error;
      assert.equal(error.message, how === 'throws' ? 'thrown' : how === 'rejects' ? 'rejected' : 'passed', how);
      assert.deepEqual(ran, ['pathParams', 'metadata'], how);
    }
  });

  it('when the contract failed to load, then every request gets its error', async () => {
    const ran: string[] = [];
    const [mw] = validatorChain(fakeValidator(ran)[0], Promise.reject(new Error('args.apiDoc was invalid')));
    for (let i = 0; i < 2; i++) assert.equal(((await pass(mw as Step)) as Error).message, 'args.apiDoc was invalid');
    assert.deepEqual(ran, []);
  });

  it('when the contract is loaded, then a request goes through every step within the call (no wait for the contract)', async () => {
    const ran: string[] = [];
    const [mw] = validatorChain(...fakeValidator(ran));
    await pass(mw as Step);
    let passed = false;
    (mw as Step)(REQ, RES, () => (passed = true));
    assert.equal(passed, true);
  });

  it('when security is off or the contract has no security schemes, then the security step is left out, as the library leaves it', async () => {
    const ran: string[] = [];
    const [mw] = validatorChain(...fakeValidator(ran, {}, { validateSecurity: false }));
    await pass(mw as Step);
    assert.deepEqual(ran, ['pathParams', 'metadata', 'multipart', 'request']);
  });
});
