/**
 * A draining API under keep-alive load: after SIGTERM it
 * closes its idle kept-alive connections at once and takes no new work — a submission gets 503
 * TEMPORARILY_UNAVAILABLE with `Retry-After` and `Connection: close` and creates
 * nothing, so the client sends it to another instance — while reads are still
 * answered and every request that arrived before the drain gets its 202. The
 * real server process, a real keep-alive client, and its exit code.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { openDb } from '../server/storage/db.ts';
import { seedUserOnDisk, startServerChild } from './helpers/child.ts';
import { dbOptionsFor, dropDatabaseFor } from './helpers/database.ts';
import { parseRaw, type RawResponse } from './helpers/raw-http.ts';
import { tempDataDir } from './helpers/server.ts';
import { until } from './helpers/poll.ts';

const IMAGE = '/api/generate/image';
const body = (prompt: string) => JSON.stringify({ model: 'gemforge-image-1', prompt, parameters: { resolution: '512' } });

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  json: any;
  /** Whether the request went over a connection opened for an earlier one. */
  reused: boolean;
}

/** One request through `agent` (keep-alive). */
function request(agent: http.Agent, url: string, options: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { agent, method: options.method ?? 'GET', headers: options.headers }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, json: text ? JSON.parse(text) : undefined, reused: req.reusedSocket }));
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

/**
 * A submission whose headers and first half arrive now, and the rest when
 * `finish` is called (then its whole answer). It resolves once the server
 * answered `100 Continue`, which Node sends as it hands the request to the app:
 * from then on the request is accepted.
 */
async function halfSent(url: string, key: string, idem: string, text: string): Promise<{ finish(): Promise<RawResponse> }> {
  const { hostname, port } = new URL(url);
  const socket = net.connect(Number(port), hostname);
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  let received = '';
  socket.on('data', (d: Buffer) => (received += d.toString('latin1')));
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  const bytes = Buffer.from(text);
  const half = Math.floor(bytes.length / 2);
  socket.write(
    `POST ${IMAGE} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nAuthorization: Bearer ${key}\r\nIdempotency-Key: ${idem}\r\nContent-Type: application/json\r\nContent-Length: ${bytes.length}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n`,
  );
  const CONTINUE = 'HTTP/1.1 100 Continue\r\n\r\n';
  const end = Date.now() + 10_000;
  while (!received.startsWith(CONTINUE)) {
    if (Date.now() > end) throw new Error(`no 100 Continue for ${idem}: ${received}`);
    await new Promise((r) => setTimeout(r, 5));
  }
  received = received.slice(CONTINUE.length);
  socket.write(bytes.subarray(0, half));
  return {
    async finish() {
      socket.write(bytes.subarray(half)); // not end(): a half-closed request may lose its answer; the server closes after it (Connection: close)
      await closed;
      const answer = parseRaw(received);
      assert.ok(answer, `no answer to ${idem}`);
      return answer;
    },
  };
}

describe('a draining API under keep-alive load', () => {
  it('when SIGTERM arrives, then idle kept-alive connections are closed, submissions get 503 and create nothing, reads are answered, accepted requests get their 202, and the process exits 0', async () => {
    const dataDir = tempDataDir();
    const user = await seedUserOnDisk(dataDir);
    const server = await startServerChild({ DATA_DIR: dataDir, SHUTDOWN_READINESS_DELAY_SECONDS: '3', SHUTDOWN_GRACE_SECONDS: '20' });
    const agent = new http.Agent({ keepAlive: true, maxSockets: 3 });
    const auth = { authorization: `Bearer ${user.secret}` };
    try {
      // A task to read later, and three kept-alive connections.
      const first = await request(agent, `${server.url}${IMAGE}`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json', 'idempotency-key': 'before-drain' },
        body: body('before the drain'),
      });
      assert.equal(first.status, 202);
      await Promise.all([1, 2, 3].map(() => request(agent, `${server.url}/healthz`)));
      // Three submissions in flight: headers and half a body sent.
      const inFlight = await Promise.all([1, 2, 3].map((i) => halfSent(server.url, user.secret, `in-flight-${i}`, body(`in flight ${i}`))));

      server.child.kill('SIGTERM');
      const end = Date.now() + 10_000;
      while ((await fetch(`${server.url}/readyz`)).status !== 503) {
        if (Date.now() > end) throw new Error('the server never started draining');
        await new Promise((r) => setTimeout(r, 20));
      }

      // The kept-alive connections idle at the drain are closed at once; the client reconnects for what it sends next.
      await until('the idle kept-alive connections to be closed', () => Object.values(agent.freeSockets).every((list) => !list || list.length === 0), 10_000);
      const poll = await request(agent, `${server.url}/api/generate/tasks/${first.json.task.id}`, { headers: auth });
      assert.equal(poll.status, 200, 'a task poll is still answered');
      assert.equal(poll.headers.connection, 'close');
      const refused = await Promise.all(
        [1, 2].map((i) =>
          request(agent, `${server.url}${IMAGE}`, {
            method: 'POST',
            headers: { ...auth, 'content-type': 'application/json', 'idempotency-key': `after-drain-${i}` },
            body: body(`after the drain ${i}`),
          }),
        ),
      );
      for (const answer of refused) {
        assert.equal(answer.status, 503);
        assert.equal(answer.json.error.code, 'TEMPORARILY_UNAVAILABLE');
        assert.equal(answer.headers.connection, 'close');
        assert.equal(answer.headers['retry-after'], '1');
      }

      const accepted = await Promise.all(inFlight.map((r) => r.finish()));
      for (const answer of accepted) assert.equal(answer.status, 202, `an accepted request gets its answer: ${answer.raw.slice(0, 300)}`);

      assert.equal(await server.exited, 0, 'the process exits 0');
      const db = await openDb(await dbOptionsFor(dataDir));
      try {
        const keys = ((await db('idempotency_records').select('*')) as Array<Record<string, unknown>>).map((row) => JSON.stringify(row));
        assert.equal(keys.filter((k) => k.includes('after-drain')).length, 0, 'a refused submission claims no identity');
        assert.equal(
          ((await db('tasks').count({ n: '*' })) as Array<{ n: number | string }>)[0]!.n.toString(),
          '4',
          'tasks: the one before and the three in flight, none refused',
        );
      } finally {
        await db.destroy();
      }
    } finally {
      agent.destroy();
      await server.kill('SIGKILL');
      fs.rmSync(dataDir, { recursive: true, force: true });
      await dropDatabaseFor(dataDir);
    }
  });
});
