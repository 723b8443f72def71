/**
 * The gateway bench's optional peer (scripts/bench/portkey.ts), without the network:
 * the cache folder's package.json and its pins, a finished install found again
 * without npm, and the judgement of whether Portkey forwarded a JSON and a streamed
 * completion (an answer that is not one keeps Portkey out of the rows).
 */
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { cachePackageJson, installPortkey, judgeJson, judgeStream, offPins, PORTKEY_PINS, PORTKEY_VERSION } from '../../scripts/bench/portkey.ts';

const chunk = (delta: Record<string, unknown>) =>
  `data: ${JSON.stringify({ object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`;
const STREAM = chunk({ role: 'assistant', content: 'Hello there,' }) + chunk({ content: ' friend.' }) + 'data: [DONE]\n\n';

/** A cache folder as a finished install leaves it: the packages at `versions`, the start script, the stamp. */
function fakeInstall(versions: Record<string, string>): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-portkey-test-'));
  for (const [name, version] of Object.entries(versions)) {
    fs.mkdirSync(path.join(dir, 'node_modules', name), { recursive: true });
    fs.writeFileSync(path.join(dir, 'node_modules', name, 'package.json'), JSON.stringify({ name, version }));
  }
  fs.mkdirSync(path.join(dir, 'node_modules/@portkey-ai/gateway/build'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'node_modules/@portkey-ai/gateway/build/start-server.js'), '');
  fs.writeFileSync(path.join(dir, 'package.json'), cachePackageJson());
  fs.writeFileSync(path.join(dir, '.installed'), cachePackageJson());
  return dir;
}

describe('the gateway bench peer: Portkey', () => {
  const dirs: string[] = [];
  after(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));

  it("when the cache folder's package.json is written, then it asks for the gateway at 1.15.2 and holds hono at the versions of Portkey's lock file", () => {
    const manifest = JSON.parse(cachePackageJson()) as { private: boolean; dependencies: Record<string, string>; overrides: Record<string, string> };
    assert.equal(manifest.private, true);
    assert.deepEqual(manifest.dependencies, { '@portkey-ai/gateway': '1.15.2' });
    assert.deepEqual(manifest.overrides, { hono: '4.9.7', '@hono/node-server': '1.13.5', '@hono/node-ws': '1.2.0' });
  });

  it('when a finished install at the pins is in the cache folder, then it is used again without npm', async () => {
    const dir = fakeInstall({ '@portkey-ai/gateway': PORTKEY_VERSION, ...PORTKEY_PINS });
    dirs.push(dir);
    assert.deepEqual(offPins(dir), []);
    // PATH without npm: were npm run, the install would fail and say so instead of naming the script.
    const saved = process.env.PATH;
    process.env.PATH = '';
    try {
      assert.deepEqual(await installPortkey(dir), { entry: path.join(dir, 'node_modules/@portkey-ai/gateway/build/start-server.js') });
    } finally {
      process.env.PATH = saved;
    }
  });

  it('when hono in the cache folder is off its pin, then the install names it and is not taken as finished', async () => {
    const dir = fakeInstall({ '@portkey-ai/gateway': PORTKEY_VERSION, ...PORTKEY_PINS, hono: '4.12.0' });
    dirs.push(dir);
    assert.deepEqual(offPins(dir), ['hono 4.12.0 (wanted 4.9.7)']);
    const saved = process.env.PATH;
    process.env.PATH = '';
    try {
      const result = await installPortkey(dir);
      assert.ok('reason' in result, 'an install off its pins is installed again (here npm cannot be found)');
    } finally {
      process.env.PATH = saved;
    }
    assert.equal(fs.existsSync(path.join(dir, '.installed')), false);
  });

  it('when a JSON completion came back, then it is judged forwarded; an error or a body without a message is not', () => {
    const completion = JSON.stringify({ object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: 'Hello there, friend.' } }] });
    assert.equal(judgeJson(200, completion), undefined);
    assert.match(judgeJson(400, '{"status":"failure","message":"Invalid custom host"}')!, /answered 400.*Invalid custom host/);
    assert.match(judgeJson(200, '{"choices":[]}')!, /without a message/);
    assert.match(judgeJson(200, 'data: [DONE]')!, /not JSON/);
  });

  it('when an event stream of chunks ending with [DONE] came back, then it is judged forwarded', () => {
    assert.equal(judgeStream(200, 'text/event-stream; charset=utf-8', STREAM), undefined);
    assert.equal(judgeStream(200, 'text/event-stream', STREAM.replaceAll('\n', '\r\n')), undefined);
  });

  it('when a stream is cut before [DONE], carries no content, is not an event stream or failed, then the reason says which', () => {
    assert.match(judgeStream(200, 'text/event-stream', chunk({ content: 'Hello' }))!, /did not end with \[DONE\]/);
    assert.match(judgeStream(200, 'text/event-stream', '')!, /did not end with \[DONE\]/);
    assert.match(judgeStream(200, 'text/event-stream', chunk({ role: 'assistant' }) + 'data: [DONE]\n\n')!, /no content/);
    assert.match(judgeStream(200, 'application/json', '{"choices":[]}')!, /application\/json/);
    assert.match(judgeStream(200, 'text/event-stream', 'data: {oops\n\ndata: [DONE]\n\n')!, /not JSON/);
    assert.match(judgeStream(500, 'application/json', '{"message":"boom"}')!, /answered 500/);
  });
});
