/**
 * Access lines (logger.ts `accessWriter`): byte for byte what pino writes for the
 * same fields through a logger bound to the request id, at any level setting.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import express from 'express';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { accessWriter, ACCESS_FLUSH_MS, ACCESS_LINE, createLogger, type AccessFields } from '../../server/logger.ts';
import { accessLog } from '../../server/http/access-log.ts';
import { capturedLogger } from '../helpers/logs.ts';
import { until } from '../helpers/poll.ts';

const sameTime = (line: string) => line.replace(/"time":\d+/, '"time":0');

describe('access lines', () => {
  const cases: AccessFields[] = [
    { requestId: 'req_0123456789abcdef', method: 'GET', path: '/api/generate/tasks/task_1', status: 200, ms: 1.5, key: 'key_1' },
    { requestId: 'client-id:1', method: 'POST', path: '/api/generate/image', status: 401, ms: 0, key: undefined },
    { requestId: 'req_x', method: 'GET', path: '/a"b\\c/\u00e9/%00/' + 'x'.repeat(60), status: 499, ms: 12345.6, complete: false },
  ];

  it('when an access line is written, then it is byte for byte the line pino writes for the same fields through a child bound to the request id', async () => {
    for (const fields of cases) {
      const ours = capturedLogger('info');
      accessWriter(ours.logger)(fields);
      const theirs = capturedLogger('info');
      const { requestId, ...rest } = fields;
      theirs.logger.child({ requestId }).info(rest, ACCESS_LINE);
      await new Promise((r) => setImmediate(r));
      ours.logger.flush();
      theirs.logger.flush();
      await new Promise((r) => setTimeout(r, 10));
      assert.equal(ours.lines.length, 1);
      assert.equal(sameTime(ours.lines[0]!), sameTime(theirs.lines[0]!));
      assert.equal(JSON.parse(ours.lines[0]!).msg, ACCESS_LINE);
    }
  });

  it('when the level is above info, or is raised after the writer was made, then no access line is written', async () => {
    const quiet = capturedLogger('warn');
    accessWriter(quiet.logger)(cases[0]!);
    const raised = capturedLogger('info');
    const write = accessWriter(raised.logger);
    raised.logger.level = 'error';
    write(cases[0]!);
    raised.logger.level = 'info';
    write(cases[1]!);
    quiet.logger.flush();
    raised.logger.flush();
    await new Promise((r) => setTimeout(r, 10));
    assert.deepEqual(quiet.lines, []);
    assert.equal(raised.lines.length, 1);
    assert.equal(JSON.parse(raised.lines[0]!).status, 401);
  });

  it('when a handler logs through req.log, then its line and the access line carry the request id', async () => {
    const { logger, lines } = capturedLogger('info');
    const app = express();
    app.use((req, _res, next) => {
      req.id = `req_${req.path.slice(1)}`;
      next();
    });
    app.use(accessLog(logger, app.request));
    app.get('/logs', (req, res) => {
      req.log?.warn({ step: 1 }, 'handler line');
      res.send('ok');
    });
    app.get('/quiet', (_req, res) => void res.send('ok'));
    const server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    try {
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      for (const p of ['/logs', '/quiet', '/logs']) await (await fetch(base + p)).text();
    } finally {
      server.close();
    }
    await new Promise((r) => setTimeout(r, 20));
    logger.flush();
    await new Promise((r) => setTimeout(r, 20));
    const parsed = lines.map((l) => JSON.parse(l) as { requestId?: string; msg: string; path?: string });
    assert.deepEqual(
      parsed.filter((l) => l.msg === 'handler line').map((l) => l.requestId),
      ['req_logs', 'req_logs'],
    );
    assert.deepEqual(
      parsed.filter((l) => l.msg === ACCESS_LINE).map((l) => [l.path, l.requestId]),
      [
        ['/logs', 'req_logs'],
        ['/quiet', 'req_quiet'],
        ['/logs', 'req_logs'],
      ],
    );
  });
});

describe('other lines', () => {
  it('when many lines that leave at once are logged in a burst, then no listeners pile up on the destination and every line reaches it in order', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-log-'));
    const file = path.join(dir, 'out.log');
    const destination = pino.destination({ dest: file, sync: false, minLength: 4096, periodicFlush: ACCESS_FLUSH_MS });
    await new Promise((resolve) => destination.once('ready', resolve));
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    try {
      const logger = createLogger('info', destination);
      for (let i = 0; i < 40; i++) logger.warn({ i }, 'burst');
      assert.ok(destination.listenerCount('drain') <= 1, `${destination.listenerCount('drain')} drain listeners`);
      const text = () => fs.readFileSync(file, 'utf8');
      await until('the periodic flush to write the burst', () => text().split('\n').length > 40, 10 * ACCESS_FLUSH_MS, 20); // 40 whole lines
      const lines = text()
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { i: number; msg: string });
      assert.deepEqual(
        lines.map((l) => l.i),
        Array.from({ length: 40 }, (_, i) => i),
      );
      assert.deepEqual(
        warnings.map((w) => w.name),
        [],
      );
      destination.destroy();
    } finally {
      process.off('warning', onWarning);
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
