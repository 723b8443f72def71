/**
 * server/memory.ts: one memory-reducing collection once requests pause (and
 * once after the start), none while requests keep coming or a response is in
 * flight, and nothing at all without a collector (no --expose-gc).
 */
import { EventEmitter } from 'node:events';
import { after, before, describe, it, mock } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { reduceMemoryWhenQuiet } from '../../server/memory.ts';
import { until } from '../helpers/poll.ts';

const QUIET = 40;

describe('memory reduced while quiet', () => {
  let server: http.Server;
  let url: string;
  before(async () => {
    server = http.createServer((_req, res) => res.end('ok'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  });
  after(() => {
    server.closeAllConnections();
    server.close();
  });

  it('when the server starts and then requests pause, then one collection runs each time, of the last-resort flavour', async () => {
    const calls: unknown[] = [];
    const stop = reduceMemoryWhenQuiet(server, () => false, { quietMs: QUIET, collect: (o) => calls.push(o) });
    try {
      await until('the collection after the start', () => calls.length === 1);
      assert.deepEqual(calls[0], { type: 'major', execution: 'sync', flavor: 'last-resort' });
      await (await fetch(url)).text();
      await until('the collection after the pause', () => calls.length === 2);
      // Quiet with nothing new since: no third collection over several periods.
      await new Promise((r) => setTimeout(r, QUIET * 5));
      assert.equal(calls.length, 2);
    } finally {
      stop();
    }
  });

  it('when requests keep coming or a response is in flight, then no collection runs', async () => {
    let calls = 0;
    let busy = true;
    const stop = reduceMemoryWhenQuiet(server, () => busy, { quietMs: QUIET, collect: () => calls++ });
    try {
      const end = Date.now() + QUIET * 6;
      while (Date.now() < end) await (await fetch(url)).text();
      await new Promise((r) => setTimeout(r, QUIET * 4));
      assert.equal(calls, 0, 'busy: a response in flight');
      busy = false;
      await until('the collection once idle', () => calls === 1);
    } finally {
      stop();
    }
  });

  it('when requests pause, then the collection runs within a quarter period after the quiet period, not up to a whole one', () => {
    mock.timers.enable({ apis: ['setInterval', 'Date'], now: 0 });
    const watched = new EventEmitter() as unknown as http.Server;
    let calls = 0;
    const stop = reduceMemoryWhenQuiet(watched, () => false, { quietMs: 1000, collect: () => calls++ });
    // In steps, so each timer runs at its own moment (one long tick runs them all at its end).
    const pass = (ms: number) => {
      for (let i = 0; i < ms; i += 10) mock.timers.tick(10);
    };
    try {
      pass(1000);
      assert.equal(calls, 1, 'the start, one period on');
      pass(10);
      watched.emit('request');
      // Seen at 1250 at the latest; quiet from then for a period: collected by 2250.
      pass(1000);
      assert.equal(calls, 1, 'not before a whole quiet period');
      pass(240);
      assert.equal(calls, 2, 'within 1.25 periods of the request');
    } finally {
      stop();
      mock.timers.reset();
    }
  });

  it('when Node runs without a collector (no --expose-gc), then nothing is watched', () => {
    const listeners = server.listenerCount('request');
    const stop = reduceMemoryWhenQuiet(server, () => false, { quietMs: QUIET });
    assert.equal(server.listenerCount('request'), listeners);
    stop();
  });
});
