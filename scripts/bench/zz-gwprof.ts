import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { seedBenchKey } from './fixture.ts';
import { pinning, runLoad, startGemforge, startScript } from './processes.ts';
const profDir = process.env.PROF_DIR ?? '/tmp/gwprof';
fs.mkdirSync(profDir, { recursive: true });
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gwprof-'));
const upstream = await startScript('chat-upstream.ts', {}, pinning?.load);
const secret = await seedBenchKey(dataDir);
const g = await startGemforge({ DATA_DIR: dataDir, NODE_ENV: 'production', WORKER_ENABLED: 'false', LOG_LEVEL: 'warn',
  TEXT_UPSTREAM_URL: `${upstream.base}/v1`, TEXT_UPSTREAM_MODELS: 'gemforge-text-1=bench-upstream-model',
  ...(process.env.PROF === '1' && { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${profDir}` }) }, path.join(dataDir, 'server.log'));
const stream = process.env.STREAM === '1';
const conns = Number(process.env.CONNS ?? 32);
for (let i = 0; i < Number(process.env.REPS ?? 1); i++) {
const r = await runLoad<{ rps: number; p50: number; cpuUs: number; requests: number; statuses: object }>({
  kind: 'autocannon', url: `${g.base}/api/generate/text/v1/chat/completions`, method: 'POST',
  headers: { 'content-type': 'application/json', authorization: `Bearer ${secret}` },
  body: JSON.stringify({ model: 'gemforge-text-1', messages: [{ role: 'user', content: 'Say hello in one short sentence.' }], max_tokens: 16, ...(stream && { stream: true }) }),
  freshIdempotencyKey: true, connections: conns, warmupSeconds: 2, durationSeconds: Number(process.env.DUR ?? 8), serverPid: g.child.pid });
console.log(JSON.stringify(r));
}
await g.stop();
await upstream.stop();
