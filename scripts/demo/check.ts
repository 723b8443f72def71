/**
 * The demo's smoke check (scripts/demo-multi.sh --check), through the balancer
 * at BASE with a key that has `read` and `generate`: an image task created, polled
 * to `succeeded` and its output downloaded; that output uploaded as an asset and
 * referenced by a second task; and both APIs seen answering (nginx's
 * X-Gemforge-Upstream header). Exits 0 when all passed, 1 otherwise.
 *
 *   node --import tsx scripts/demo/check.ts BASE KEY
 */
import crypto from 'node:crypto';

const [base, key] = process.argv.slice(2);
if (!base || !key) {
  console.error('usage: check.ts BASE KEY');
  process.exit(2);
}
const upstreams = new Set<string>();
const auth = { authorization: `Bearer ${key}` };

async function call(path: string, init: RequestInit = {}): Promise<{ status: number; body: any }> {
  const res = await fetch(new URL(path, base), { ...init, headers: { ...auth, ...(init.headers as Record<string, string>) } });
  const upstream = res.headers.get('x-gemforge-upstream');
  if (upstream) upstreams.add(upstream);
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

function expect(ok: boolean, what: string, detail?: unknown): void {
  if (!ok) throw new Error(`${what}${detail === undefined ? '' : `: ${JSON.stringify(detail).slice(0, 500)}`}`);
  console.log(`ok   ${what}`);
}

/** Submits an image task and polls it (through either API) until it is terminal. */
async function imageTask(prompt: string, extra: Record<string, unknown> = {}): Promise<any> {
  const created = await call('/api/generate/image', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': `demo-${crypto.randomUUID()}` },
    body: JSON.stringify({ model: 'gemforge-image-1', prompt, parameters: { resolution: '512' }, ...extra }),
  });
  expect(created.status === 202, `image task created (${prompt})`, created.body);
  const end = Date.now() + 60_000;
  for (;;) {
    const { status, body } = await call(`/api/generate/tasks/${created.body.task.id}`);
    if (status === 200 && !['queued', 'processing'].includes(body.task.status)) return body.task;
    if (Date.now() > end) throw new Error(`task ${created.body.task.id} still ${body?.task?.status} after 60 s`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function main(): Promise<void> {
  const task = await imageTask('a lighthouse at dusk');
  expect(task.status === 'succeeded', 'the task succeeded', task);
  const url = task.outputs[0].asset.url as string;
  expect(url.startsWith(base), 'its signed link goes through the balancer', url);
  const output = await fetch(url);
  const upstream = output.headers.get('x-gemforge-upstream');
  if (upstream) upstreams.add(upstream);
  const bytes = Buffer.from(await output.arrayBuffer());
  expect(output.status === 200 && bytes.length > 0 && output.headers.get('content-type') === 'image/png', `its output downloaded (${bytes.length} bytes)`);

  const uploaded = await call('/api/generate/assets', { method: 'POST', headers: { 'content-type': 'image/png' }, body: bytes });
  expect(uploaded.status === 201 && uploaded.body.asset.state === 'ready', 'the output uploaded as an asset', uploaded.body);
  const second = await imageTask('the same lighthouse at dawn', { referenceAssetIds: [uploaded.body.asset.id] });
  expect(second.status === 'succeeded', 'a task referencing the asset succeeded', second);

  for (let i = 0; i < 4 && upstreams.size < 2; i++) await call('/api/generate/models');
  expect(upstreams.size >= 2, `both APIs answered (${[...upstreams].join(', ')})`);
}

main().then(
  () => console.log('demo check: passed'),
  (error: unknown) => {
    console.error(`demo check: FAILED: ${error instanceof Error ? error.message : String(error)}`);
    process.exitCode = 1;
  },
);
