/**
 * The routing layer of models with several upstreams, with stand-in
 * providers: the breaker's states, the order deployments are tried in, the
 * catalog syntax's checks, and when a media slot may move to the next
 * deployment (only when its attempt certainly did not start).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Breaker } from '../../server/providers/routing/breaker.ts';
import { anyAvailable, deploymentsOf, parseDeployments, tryOrder, type Deployment } from '../../server/providers/routing/deployments.ts';
import { RoutedMediaProvider } from '../../server/providers/routing/media.ts';
import { UpstreamNotDone, UpstreamRefusal, UpstreamUnknown } from '../../server/providers/remote/http.ts';
import { notStarted } from '../../server/providers/routing/text.ts';
import { ProviderError } from '../../server/providers/text/types.ts';
import { REMOTE_PROVIDERS } from '../../server/providers/remote/index.ts';
import { MediaHoldError, type MediaJob, type MediaProvider, type MediaTools, type RemoteCallRecord } from '../../server/providers/media-types.ts';

describe('circuit breaker', () => {
  it('when failures repeat, then it opens, lets one probe through after the cooldown, and closes on its success or opens again on its failure', () => {
    let now = 0;
    const b = new Breaker({ failures: 2, cooldownMs: 1000, now: () => now });
    b.failure(0.1);
    assert.equal(b.state(), 'closed');
    b.failure(0.1);
    assert.equal(b.state(), 'open');
    assert.equal(b.acquire(), false);
    assert.equal(b.retryInMs(), 1000);
    now = 1000;
    assert.equal(b.state(), 'half-open');
    assert.equal(b.acquire(), true);
    assert.equal(b.available(), false, 'the probe is out: nothing else passes');
    b.failure(0.1);
    assert.equal(b.state(), 'open', 'a failed probe opens it again at once');
    now = 2000;
    assert.equal(b.acquire(), true);
    b.success(0.2);
    assert.equal(b.state(), 'closed');
    assert.deepEqual(b.stats, { calls: 4, errors: 3, latencySeconds: 0.5 });
  });

  it('when it shares its state with other processes, then it tells them when it opens and closes (not on every success), and one they hold open lets nothing pass here', () => {
    let now = 5000;
    let heldElsewhere = 0;
    const told: Array<number | null> = [];
    const b = new Breaker({ failures: 1, cooldownMs: 1000, now: () => now });
    b.sharing = {
      openForMs: () => heldElsewhere,
      openUntil: () => (heldElsewhere > 0 ? now + heldElsewhere : undefined),
      changed: (until) => told.push(until),
    };
    b.success(0.1);
    assert.deepEqual(told, [], 'a closed breaker that stays closed writes nothing');
    heldElsewhere = 3000;
    assert.equal(b.state(), 'closed', 'its own count saw nothing');
    assert.equal(b.sharedState(), 'open');
    assert.equal(b.available(), false);
    assert.equal(b.acquire(), false);
    assert.equal(b.retryInMs(), 3000, "until the other process's moment");
    heldElsewhere = 0;
    b.failure(0.1);
    assert.deepEqual(told, [6000], 'opened until now + cooldown');
    now = 6000;
    assert.equal(b.acquire(), true, 'half-open: the probe');
    b.success(0.1);
    assert.deepEqual(told, [6000, null], 'closed again');
  });
});

const stub = (id: string, priority: number, weight: number, breaker = new Breaker({ failures: 1, cooldownMs: 60_000 })): Deployment<string> => ({
  id,
  provider: 'p',
  priority,
  weight,
  breaker,
  pool: [id],
  turn: 0,
});

describe('deployment order', () => {
  it('when deployments have priorities and weights, then the highest priority comes first, drawn by weight, and open ones are left out', () => {
    const list = [stub('low', 0, 1), stub('a', 2, 1), stub('b', 2, 3)];
    assert.deepEqual(
      tryOrder(list, () => 0).map((d) => d.id),
      ['a', 'b', 'low'],
    );
    assert.deepEqual(
      tryOrder(list, () => 0.5).map((d) => d.id),
      ['b', 'a', 'low'],
      'a draw in the second quarter lands on b (weight 3 of 4)',
    );
    let draws = 0;
    const counts = { a: 0, b: 0 };
    for (let i = 0; i < 400; i++) counts[tryOrder(list, () => (draws++ % 100) / 100)[0]!.id as 'a' | 'b']++;
    assert.deepEqual(counts, { a: 100, b: 300 });
    list[1]!.breaker.failure(0);
    list[2]!.breaker.failure(0);
    assert.deepEqual(
      tryOrder(list).map((d) => d.id),
      ['low'],
    );
    assert.equal(anyAvailable(list), true);
    list[0]!.breaker.failure(0);
    assert.equal(anyAvailable(list), false);
  });

  it('when a deployments list is wrong, then the start stops naming the model and the item', () => {
    const keys = { a: 'sk-a' };
    const check = (raw: unknown) => () => parseDeployments(raw, keys, ['openai-images'], 'catalog model m');
    assert.throws(check([]), /catalog model m: deployments must be a non-empty list/);
    assert.throws(check([{ provider: 'nope' }]), /deployments\[0\]\.provider must be one of openai-images/);
    assert.throws(check([{ provider: 'openai-images', key: 'b' }]), /key b is not named in UPSTREAM_KEYS/);
    assert.throws(check([{ provider: 'openai-images', weight: 0 }]), /weight must be a whole number of at least 1/);
    assert.throws(
      check([
        { id: 'x', provider: 'openai-images' },
        { id: 'x', provider: 'openai-images' },
      ]),
      /duplicate id x/,
    );
    assert.deepEqual(
      check([{ provider: 'openai-images', key: 'a', model: 'gpt-image-1' }])()!.map(({ raw: _raw, ...e }) => e),
      [{ id: 'openai-images-1', provider: 'openai-images', keys: ['sk-a'], weight: 1, priority: 0, model: 'gpt-image-1' }],
    );
  });
});

/** A stand-in provider recording the slot as a remote provider does, then failing with `error` (or making an output). */
function provider(name: string, error?: Error): MediaProvider & { asked: number } {
  const p = {
    name,
    resume: 'lookup' as const,
    asked: 0,
    async generate(job: MediaJob, tools: MediaTools) {
      if (await tools.remoteCalls.find(job.index)) throw new MediaHoldError('asked before');
      await tools.remoteCalls.calling(job.index, name);
      p.asked++;
      if (error) throw error;
      return { bytes: Buffer.from(name), mimeType: 'image/png' };
    },
  };
  return p;
}

function tools(records: Map<number, RemoteCallRecord>): MediaTools {
  return {
    dataDir: '',
    ffmpegPath: '',
    ffprobePath: '',
    assetFile: async () => '',
    blobFile: async () => undefined,
    tempFile: async () => '',
    warn: () => {},
    stopping: () => false,
    remoteCalls: {
      find: async (idx) => records.get(idx),
      calling: async (idx, name) => void records.set(idx, { state: 'calling', upstreamId: null, provider: name }),
      created: async () => {},
    },
  };
}

const JOB = { taskId: 't', accountId: 'a', model: 'm', kind: 'image', request: {}, index: 0, slots: 1, scenarios: [] } as unknown as MediaJob;

function routed(first: MediaProvider, second: MediaProvider) {
  const entries = [
    { id: 'one', provider: 'p', keys: [], weight: 1, priority: 1, raw: {} },
    { id: 'two', provider: 'p', keys: [], weight: 1, priority: 0, raw: {} },
  ];
  const deployments = deploymentsOf(
    entries,
    (e) => (e.id === 'one' ? first : second),
    () => new Breaker({ failures: 1, cooldownMs: 60_000 }),
  );
  return { provider: new RoutedMediaProvider(deployments), deployments };
}

describe('a media slot over several upstreams', () => {
  it('when the first deployment certainly did not start (not processed until the deadline, or credentials refused), then the slot goes to the next, recorded under it', async () => {
    for (const error of [new UpstreamNotDone('GENERATION_FAILED', 'busy'), new UpstreamRefusal('GENERATION_FAILED', 'bad key', 401)]) {
      const a = provider('images', error);
      const b = provider('images');
      const { provider: r, deployments } = routed(a, b);
      const records = new Map<number, RemoteCallRecord>();
      const out = await r.generate(JOB, tools(records));
      assert.deepEqual(out, { bytes: Buffer.from('images'), mimeType: 'image/png' });
      assert.equal(b.asked, 1);
      assert.equal(records.get(0)!.provider, 'images@two#0');
      assert.equal(deployments[0]!.breaker.state(), 'open');
      assert.equal(r.admit(), true);
    }
  });

  it('when the outcome of the first attempt is unknown, or the request itself was refused, then no other deployment is ever asked', async () => {
    for (const error of [new UpstreamUnknown('lost'), new UpstreamRefusal('GENERATION_FAILED', 'content policy', 400)]) {
      const a = provider('images', error);
      const b = provider('images');
      const { provider: r } = routed(a, b);
      await assert.rejects(r.generate(JOB, tools(new Map())), error);
      assert.equal(b.asked, 0);
    }
  });

  it('when a slot was asked of a deployment before an interruption, then the resumed slot goes back to that deployment only', async () => {
    const a = provider('images');
    const b = provider('images');
    const { provider: r } = routed(a, b);
    const records = new Map<number, RemoteCallRecord>([[0, { state: 'calling', upstreamId: null, provider: 'images@two#0' }]]);
    await assert.rejects(r.generate(JOB, tools(records)), MediaHoldError);
    assert.equal(a.asked + b.asked, 0);
  });

  it('when every deployment is open, then admit refuses, saying when a probe will be let through', async () => {
    const { provider: r, deployments } = routed(provider('images'), provider('images'));
    for (const d of deployments) d.breaker.failure(0);
    assert.equal(r.admit(), false);
    assert.equal(r.unavailableFor(), 60, 'the Retry-After: until the first breaker lets a probe through');
  });
});

describe('what may move to another upstream', () => {
  it('when a text attempt failed, then only a refusal that certainly did nothing (unreachable, not processed, credentials refused) moves on', () => {
    assert.equal(notStarted(new ProviderError('refused', 'unreachable', { unavailable: true })), true);
    assert.equal(notStarted(new ProviderError('refused', 'bad key', { status: 401 })), true);
    assert.equal(notStarted(new ProviderError('refused', 'forbidden', { status: 403 })), true);
    assert.equal(notStarted(new ProviderError('refused', 'bad request', { status: 400 })), false);
    assert.equal(notStarted(new ProviderError('uncertain', 'a 502 after the model ran', { status: 502 })), false);
    assert.equal(notStarted(new Error('anything else')), false);
  });

  it('when a remote provider is registered, then it can be one deployment of several (it says how a deployment overrides its settings)', () => {
    assert.deepEqual(
      REMOTE_PROVIDERS.filter((d) => !d.deployment).map((d) => d.name),
      [],
    );
  });
});
