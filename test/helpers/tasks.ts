/** Helpers for media-task tests: submit, poll to a terminal status, download outputs. */
import assert from 'node:assert/strict';
import type { TestServer } from './server.ts';
import { patiently } from './poll.ts';

export interface TaskBody {
  id: string;
  status: string;
  quotedGems: number;
  chargedGems: number;
  releasedGems: number;
  error: { code: string; message: string } | null;
  outputs: Array<{ index: number; status: string; asset: { id: string; kind: string; mimeType: string; url: string } | null }>;
}

let counter = 0;
export const newKey = (prefix = 'k') => `${prefix}-${process.pid}-${Date.now()}-${counter++}`;

export async function submit(
  s: TestServer,
  key: string,
  path: string,
  body: unknown,
  idemKey = newKey(),
): Promise<{ status: number; body: any; idemKey: string; headers: Headers }> {
  const res = await s.call('POST', path, { key, body, headers: { 'idempotency-key': idemKey } });
  return { status: res.status, body: await res.json(), idemKey, headers: res.headers };
}

export const TERMINAL = ['succeeded', 'partial', 'failed', 'cancelled'];

/** Polls GET /tasks/{id} until terminal (fast: the local generators take well under a second). */
export async function waitForTask(s: TestServer, key: string, id: string, nominalMs = 60_000): Promise<TaskBody> {
  const timeoutMs = patiently(nominalMs);
  const until = Date.now() + timeoutMs;
  for (;;) {
    const res = await s.call('GET', `/api/generate/tasks/${id}`, { key });
    assert.equal(res.status, 200);
    const { task } = (await res.json()) as { task: TaskBody };
    if (TERMINAL.includes(task.status)) return task;
    if (Date.now() > until) throw new Error(`task ${id} still ${task.status} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Downloads an output through its signed URL (no bearer key). */
export async function download(url: string): Promise<{ status: number; type: string | null; bytes: Buffer }> {
  const res = await fetch(url);
  return { status: res.status, type: res.headers.get('content-type'), bytes: Buffer.from(await res.arrayBuffer()) };
}

/** At a terminal status the money adds up exactly. */
export function assertSettled(task: TaskBody): void {
  assert.ok(TERMINAL.includes(task.status), `task is ${task.status}`);
  assert.equal(task.chargedGems + task.releasedGems, task.quotedGems, 'charged + released = quoted');
  assert.ok(task.chargedGems <= task.quotedGems);
}
