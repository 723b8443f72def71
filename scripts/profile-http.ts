/**
 * CPU per request, path by path, on a fixed number of requests:
 * gemforge started as bench-http starts it (NODE_ENV=production, worker off,
 * info log to a file), each path driven `--amount` times by autocannon after a
 * warm-up, the server's CPU time read from /proc around it. With `--prof DIR`
 * the server writes a `--cpu-prof` profile there on exit; `--summary FILE`
 * prints its self time by function and by file. On a busy machine the CPU
 * figure is the one to trust, not req/s.
 *
 *   npx node --import tsx scripts/profile-http.ts [--amount 20000] [--only 'task GET'] [--prof /tmp/prof]
 *   npx node --import tsx scripts/profile-http.ts --summary /tmp/prof/x.cpuprofile
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { startGemforge } from './bench/processes.ts';
import { generatedTasks, IMAGE, MANY_TASKS, seedBenchKey } from './bench/fixture.ts';
import { cpuSeconds } from './bench/cpu.ts';
import { varied } from './bench/clients.ts';

const { values } = parseArgs({
  options: {
    amount: { type: 'string', default: '20000' },
    connections: { type: 'string', default: '16' },
    only: { type: 'string' },
    prof: { type: 'string' },
    summary: { type: 'string' },
    top: { type: 'string', default: '40' },
  },
});

/** Self time by function and by file from a .cpuprofile. */
function summarize(file: string, top: number): void {
  const prof = JSON.parse(fs.readFileSync(file, 'utf8')) as {
    nodes: Array<{ id: number; callFrame: { functionName: string; url: string; lineNumber: number }; hitCount?: number }>;
    samples: number[];
    timeDeltas: number[];
  };
  const byId = new Map(prof.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  prof.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (prof.timeDeltas[i] ?? 0)));
  const fn = new Map<string, number>();
  const fileT = new Map<string, number>();
  let total = 0;
  for (const [id, t] of self) {
    const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
    const short = url
      .replace(/^file:\/\//, '')
      .replace(/.*node_modules\//, 'nm:')
      .replace(/.*\/perf2\//, '');
    fn.set(`${functionName || '(anon)'} ${short}:${lineNumber + 1}`, (fn.get(`${functionName || '(anon)'} ${short}:${lineNumber + 1}`) ?? 0) + t);
    const pkg = short.startsWith('nm:')
      ? short
          .split('/')
          .slice(0, short.startsWith('nm:@') ? 2 : 1)
          .join('/')
      : short || functionName;
    fileT.set(pkg, (fileT.get(pkg) ?? 0) + t);
    total += t;
  }
  const print = (title: string, m: Map<string, number>) => {
    console.log(`\n${title} (total ${(total / 1000).toFixed(0)} ms)`);
    for (const [k, t] of [...m].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${((100 * t) / total).toFixed(1).padStart(5)} %  ${k}`);
  };
  print('self time by function', fn);
  print('self time by package/file', fileT);
}

async function main(): Promise<void> {
  if (values.summary) return summarize(values.summary, Number(values.top));
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-profile-'));
  const logFile = path.join(dataDir, 'server.log');
  try {
    const secret = await seedBenchKey(dataDir);
    const auth = { authorization: `Bearer ${secret}`, 'content-type': 'application/json' };
    const { taskIds } = await generatedTasks(dataDir, logFile, auth, MANY_TASKS);
    const taskId = taskIds[0]!;
    const env: Record<string, string> = {
      DATA_DIR: dataDir,
      NODE_ENV: 'production',
      WORKER_ENABLED: 'false',
      LOG_LEVEL: process.env.PROFILE_LOG_LEVEL ?? 'info',
      TEXT_STREAM_DELAY_MS: '0',
    };
    if (values.prof) env.NODE_OPTIONS = `--cpu-prof --cpu-prof-interval=250 --cpu-prof-dir=${values.prof}`;
    const server = await startGemforge(env, logFile);
    const amount = Number(values.amount);
    const cases: Array<{
      name: string;
      method: string;
      path: string;
      paths?: string[];
      headers: Record<string, string>;
      body?: string;
      fresh?: boolean;
      scale?: number;
    }> = [
      { name: 'task GET', method: 'GET', path: `/api/generate/tasks/${taskId}`, headers: auth },
      {
        name: 'task GET 64 tasks',
        method: 'GET',
        path: `/api/generate/tasks/${taskId}`,
        paths: taskIds.map((id) => `/api/generate/tasks/${id}`),
        headers: auth,
      },
      { name: 'models GET', method: 'GET', path: '/api/generate/models', headers: auth },
      { name: '401 without key', method: 'GET', path: '/api/generate/models', headers: {} },
      { name: 'image new identity', method: 'POST', path: '/api/generate/image', headers: auth, body: JSON.stringify(IMAGE), fresh: true, scale: 0.1 },
    ];
    const only = values.only ? new Set(values.only.split(',').map((s) => s.trim())) : undefined;
    try {
      for (const c of cases.filter((c) => !only || only.has(c.name))) {
        const n = Math.max(100, Math.round(amount * (c.scale ?? 1)));
        const run = (amount: number) =>
          autocannon({
            url: server.base + c.path,
            method: c.method as 'GET',
            headers: c.headers,
            connections: Number(values.connections),
            amount,
            ...(c.body && { body: c.body }),
            ...((c.fresh || c.paths) && {
              requests: [
                {
                  setupRequest: (req: Record<string, unknown>) => ({ ...req, ...varied({ headers: c.headers, freshIdempotencyKey: c.fresh, paths: c.paths }) }),
                },
              ],
            }),
          } as never) as unknown as Promise<{ statusCodeStats: Record<string, { count: number }>; requests: { total: number } }>;
        await run(Math.round(n / 4));
        const before = cpuSeconds(server.child.pid) ?? NaN;
        const r = await run(n);
        const after = cpuSeconds(server.child.pid) ?? NaN;
        const statuses = Object.fromEntries(Object.entries(r.statusCodeStats).map(([k, v]) => [k, v.count]));
        console.log(`${c.name.padEnd(20)} ${(((after - before) * 1e6) / n).toFixed(0).padStart(6)} µs/req  (${n} requests, ${JSON.stringify(statuses)})`);
      }
    } finally {
      await server.stop();
    }
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
