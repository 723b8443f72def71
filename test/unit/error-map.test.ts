/**
 * The one error mapping (server/http/error-map.ts): every domain code has its
 * status and envelope code, the spec's table holds for the spec's codes, the
 * domain's own codes are renamed on the way out, and a code nobody mapped is
 * answered as an unexpected failure without its message. The admin CLI's exit
 * codes come from the same module.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { DOMAIN_CODES, DomainError, type DomainCode } from '../../server/domain/errors.ts';
import { MAX_ACTIVE_KEYS } from '../../server/domain/accounts.ts';
import { ApiError } from '../../server/http/api-error.ts';
import { answerOf, apiErrorOf, cliFailureOf } from '../../server/http/error-map.ts';
import { savedResponse } from '../../server/domain/idempotency.ts';
import type { IdempotencyRow } from '../../server/storage/idempotency.ts';

/** The spec's error table (service-interface.md, Errors), plus the console's (openapi/console.yaml). */
const SPEC: Partial<Record<DomainCode, number>> = {
  INVALID_API_KEY: 401,
  INSUFFICIENT_SCOPE: 403,
  ACCOUNT_BLOCKED: 403,
  ACCOUNT_UNAVAILABLE: 403,
  API_KEY_LIMIT: 402,
  LLM_QUOTA_EXHAUSTED: 402,
  PRICE_CHANGED: 409,
  IDEMPOTENCY_CONFLICT: 409,
  REQUEST_UNCERTAIN: 409,
  REQUEST_FAILED: 409,
  REFERENCES_PROCESSING: 409,
  ANALYSIS_FAILED: 409,
  NOT_FOUND: 404,
  INVALID_REQUEST: 422,
  INVALID_REFERENCE: 422,
  MODEL_UNAVAILABLE: 422,
  PROVIDER_UNAVAILABLE: 503,
  TEMPORARILY_UNAVAILABLE: 503,
  SIGN_IN_FAILED: 401,
  SESSION_EXPIRED: 401,
  INVITE_INVALID: 401,
  TOO_MANY_ATTEMPTS: 429,
};

/** The statuses an error may carry (the spec's set; 429 for the console's sign-in limit). */
const ALLOWED = new Set([400, 401, 402, 403, 404, 409, 413, 422, 429, 502, 503]);

describe('the error mapping', () => {
  it("when any domain code is mapped, then it has an allowed status and a code, the message is the domain's or its sentence, and the envelope is {code, message}", () => {
    for (const code of DOMAIN_CODES) {
      const answer = apiErrorOf(new DomainError(code, 'the message'));
      assert.ok(ALLOWED.has(answer.status), `${code} → ${answer.status}`);
      assert.match(answer.code ?? '', /^[A-Z][A-Z_]+$/, code);
      assert.deepEqual(Object.keys(answer.toEnvelope().error), ['code', 'message'], code);
      if (code !== 'TEMPORARILY_UNAVAILABLE') assert.notEqual(answer.code, 'TEMPORARILY_UNAVAILABLE', `${code} fell through to the unknown answer`);
    }
  });

  it("when a spec code is mapped, then its status is the spec's and its code and message pass through unchanged", () => {
    for (const [code, status] of Object.entries(SPEC) as [DomainCode, number][]) {
      const answer = apiErrorOf(new DomainError(code, `Message of ${code}.`));
      assert.equal(answer.status, status, code);
      assert.equal(answer.code, code);
      assert.equal(answer.message, `Message of ${code}.`);
    }
  });

  it("when the domain's own codes are mapped, then they leave as the API says them: 413 INVALID_REQUEST, an admin phrase as a 422 sentence, the key limit as 409 KEY_LIMIT_REACHED", () => {
    assert.deepEqual(apiErrorOf(new DomainError('UPLOAD_TOO_LARGE', 'The upload is larger than 5 bytes.')).toEnvelope(), {
      error: { code: 'INVALID_REQUEST', message: 'The upload is larger than 5 bytes.' },
    });
    assert.equal(apiErrorOf(new DomainError('UPLOAD_TOO_LARGE', 'x')).status, 413);
    const input = apiErrorOf(new DomainError('INVALID_INPUT', 'the expiry must be in the future'));
    assert.deepEqual([input.status, input.code, input.message], [422, 'INVALID_REQUEST', 'The expiry must be in the future.']);
    const limit = apiErrorOf(new DomainError('KEY_LIMIT', 'account acc_1 already has 50 non-revoked keys; revoke one first'));
    assert.deepEqual([limit.status, limit.code], [409, 'KEY_LIMIT_REACHED']);
    assert.equal(limit.message, `This account already has ${MAX_ACTIVE_KEYS} keys that are not revoked; revoke one first.`);
    const setting = apiErrorOf(new DomainError('INVALID_SETTING', '--blocked-regions: "!" is not a region code'));
    assert.deepEqual([setting.status, setting.code, setting.message], [422, 'INVALID_REQUEST', '--blocked-regions: "!" is not a region code']);
  });

  it('when an error is final or carries a wait, then the answer says so (x-should-retry: false, Retry-After)', () => {
    const final = apiErrorOf(new DomainError('PROVIDER_ERROR', 'failed part-way', { final: true }));
    assert.equal(final.status, 502);
    assert.equal(final.shouldNotRetry, true);
    assert.equal(apiErrorOf(new DomainError('PROVIDER_ERROR', 'x')).shouldNotRetry, false);
    assert.equal(apiErrorOf(new DomainError('IDEMPOTENCY_CONFLICT', 'x')).shouldNotRetry, true);
    assert.equal(apiErrorOf(new DomainError('PROVIDER_UNAVAILABLE', 'x', { retryAfterSeconds: 7 })).retryAfterSeconds, 7);
    assert.equal(apiErrorOf(new DomainError('PROVIDER_UNAVAILABLE', 'x')).retryAfterSeconds, undefined);
  });

  it('when a code nobody mapped reaches the mapping, then it is 503 TEMPORARILY_UNAVAILABLE with the safe message, never its own words', () => {
    const stray = new DomainError('NOT_A_CODE' as DomainCode, 'internal detail: /var/lib/secret');
    const answer = apiErrorOf(stray);
    assert.equal(answer.status, 503);
    assert.equal(answer.code, 'TEMPORARILY_UNAVAILABLE');
    assert.doesNotMatch(answer.message, /secret|internal/);
    const inherited = new DomainError('constructor' as DomainCode, 'x'); // a plain object's own name is no entry
    assert.equal(apiErrorOf(inherited).code, 'TEMPORARILY_UNAVAILABLE');
  });

  it('when any thrown value is asked for its answer, then an ApiError is itself, a domain error is mapped, anything else is not an answer', () => {
    const api = new ApiError(404, 'NOT_FOUND', 'No such route.');
    assert.equal(answerOf(api), api);
    assert.equal(answerOf(new DomainError('NOT_FOUND', 'No task.'))?.status, 404);
    assert.equal(answerOf(new Error('boom')), undefined);
    assert.equal(answerOf(undefined), undefined);
  });

  it('when a retained failure is replayed, then a row written before (its status kept) and one written now (none) answer alike, final; an unknown code is no answer', () => {
    const envelope = JSON.stringify({ error: { code: 'PROVIDER_ERROR', message: 'The text provider failed part-way.' } });
    const row = (status: number | null, body = envelope) => ({ response_status: status, response_body: body }) as IdempotencyRow;
    for (const status of [502, null]) {
      let thrown: unknown;
      try {
        savedResponse(row(status));
      } catch (error) {
        thrown = error;
      }
      const replay = answerOf(thrown);
      assert.deepEqual(
        [replay?.status, replay?.code, replay?.message, replay?.shouldNotRetry],
        [502, 'PROVIDER_ERROR', 'The text provider failed part-way.', true],
        String(status),
      );
    }
    assert.deepEqual(savedResponse(row(200, '{"ok":true}')), { ok: true });
    const stray = JSON.stringify({ error: { code: 'SOMETHING_NEW', message: 'x' } });
    assert.throws(
      () => savedResponse(row(null, stray)),
      (e: unknown) => !answerOf(e) && /unknown to this version/.test(String(e)),
    );
  });

  it('when the admin CLI maps a failure, then a refused input exits 2 with its phrase, any other failure exits 1 with "failed:"', () => {
    assert.deepEqual(cliFailureOf(new DomainError('INVALID_INPUT', 'no account with id acc_x')), { exitCode: 2, message: 'no account with id acc_x' });
    assert.deepEqual(cliFailureOf(new DomainError('KEY_LIMIT', 'account acc_1 already has 50 non-revoked keys; revoke one first')), {
      exitCode: 2,
      message: 'account acc_1 already has 50 non-revoked keys; revoke one first',
    });
    assert.deepEqual(cliFailureOf(new DomainError('INVALID_SETTING', '--mode must be one of a, b')), { exitCode: 2, message: '--mode must be one of a, b' });
    assert.deepEqual(cliFailureOf(new DomainError('INSUFFICIENT_GEMS', 'not enough Gems')), { exitCode: 1, message: 'failed: not enough Gems' });
    assert.deepEqual(cliFailureOf(new Error('disk full')), { exitCode: 1, message: 'failed: disk full' });
  });
});
