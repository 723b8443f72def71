/**
 * Signed output URLs never come from an unchecked `Host`:
 * without PUBLIC_BASE_URL only a valid URI authority whose name is allowed
 * (ALLOWED_HOSTS, or this machine's own names) is used, else the address the
 * connection reached; PUBLIC_BASE_URL wins whatever `Host` says.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import fc from 'fast-check';
import type { Request } from 'express';
import { startTestServer, type TestServer } from './helpers/server.ts';
import { submit, waitForTask } from './helpers/tasks.ts';
import { until } from './helpers/poll.ts';
import { baseUrlFor } from '../server/http/base-url.ts';
import { checkAllowedHost, parseAuthority } from '../server/authority.ts';
import { loadConfig } from '../server/config.ts';
import { isUri } from '../server/http/formats.ts';

/** GET a task with a chosen Host header (fetch would not let us set it); returns its first output's URL. */
function outputUrlWithHost(s: TestServer, key: string, taskId: string, host: string): Promise<string> {
  const { port } = new URL(s.url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, path: `/api/generate/tasks/${taskId}`, headers: { host, authorization: `Bearer ${key}` }, setHost: false },
      (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString('utf8')));
        res.on('end', () => {
          if (res.statusCode !== 200) return reject(new Error(`status ${res.statusCode}: ${body}`));
          resolve((JSON.parse(body) as { task: { outputs: Array<{ asset: { url: string } }> } }).task.outputs[0]!.asset.url);
        });
      },
    );
    req.on('error', reject);
    req.end();
  });
}

async function serverWithTask(env: Record<string, string> = {}) {
  const s = await startTestServer({ env: { WORKER_POLL_MS: '20', ...env } });
  const { secret } = await s.user();
  const made = await submit(s, secret, '/api/generate/image', { model: 'gemforge-image-1', prompt: 'a lighthouse at dusk' });
  assert.equal(made.status, 202);
  const task = await waitForTask(s, secret, made.body.task.id);
  assert.equal(task.status, 'succeeded');
  return { s, secret, taskId: task.id, listen: new URL(s.url).host };
}

describe('signed URLs and the Host header, default allow list', () => {
  let t: Awaited<ReturnType<typeof serverWithTask>>;
  before(async () => (t = await serverWithTask()));
  after(() => t.s.close());

  it('when Host names this machine (127.0.0.1 or localhost), then the URL keeps it and downloads', async () => {
    const port = new URL(t.s.url).port;
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `LOCALHOST:${port}`]) {
      const url = await outputUrlWithHost(t.s, t.secret, t.taskId, host);
      assert.equal(new URL(url).host, host.toLowerCase());
    }
    const url = await outputUrlWithHost(t.s, t.secret, t.taskId, `127.0.0.1:${port}`);
    const download = await fetch(url);
    assert.equal(download.status, 200);
    assert.equal(download.headers.get('x-content-type-options'), 'nosniff', 'the checked type holds: no sniffing');
  });

  it('when Host is another name (evil.example), then the URL uses the address the connection reached', async () => {
    const url = await outputUrlWithHost(t.s, t.secret, t.taskId, 'evil.example');
    assert.equal(new URL(url).host, t.listen);
    assert.equal((await fetch(url)).status, 200, 'and it downloads');
  });

  it('when Host is not a valid URI authority, then it never reaches the URL', async () => {
    for (const host of ['a"b', 'user@127.0.0.1', '127.0.0.1:99999', '127.0.0.1:0', 'a b', '[::1', '999.1.1.1', 'x/y', 'a%41', '-bad.example']) {
      const url = await outputUrlWithHost(t.s, t.secret, t.taskId, host);
      assert.equal(new URL(url).host, t.listen, host);
      assert.ok(url.startsWith(`http://${t.listen}/files/`), url);
    }
  });
});

describe('signed URLs with ALLOWED_HOSTS and PUBLIC_BASE_URL', () => {
  it('when ALLOWED_HOSTS lists the name, then that Host is used with its port; other names are not', async () => {
    const t = await serverWithTask({ ALLOWED_HOSTS: 'api.example.com,.cdn.example' });
    try {
      assert.equal(await outputUrlWithHost(t.s, t.secret, t.taskId, 'api.example.com:8443').then((u) => new URL(u).origin), 'http://api.example.com:8443');
      assert.equal(new URL(await outputUrlWithHost(t.s, t.secret, t.taskId, 'eu.cdn.example')).host, 'eu.cdn.example');
      assert.equal(new URL(await outputUrlWithHost(t.s, t.secret, t.taskId, 'cdn.example')).host, 'cdn.example');
      // The allow list replaces the machine's own names.
      assert.equal(new URL(await outputUrlWithHost(t.s, t.secret, t.taskId, 'evilcdn.example')).host, t.listen);
      assert.equal(new URL(await outputUrlWithHost(t.s, t.secret, t.taskId, 'localhost')).host, t.listen);
    } finally {
      await t.s.close();
    }
  });

  it('when PUBLIC_BASE_URL is set, then it wins whatever Host says', async () => {
    const t = await serverWithTask({ PUBLIC_BASE_URL: 'https://media.example.com/gemforge/' });
    try {
      for (const host of ['evil.example', 'a"b', '127.0.0.1']) {
        assert.match(await outputUrlWithHost(t.s, t.secret, t.taskId, host), /^https:\/\/media\.example\.com\/gemforge\/files\/asset_/);
      }
    } finally {
      await t.s.close();
    }
  });

  it('when PUBLIC_BASE_URL or ALLOWED_HOSTS is malformed, then the configuration is refused naming the variable', () => {
    for (const bad of ['media.example.com', 'ftp://x.example', 'https://x.example/?a=1', 'https://u:p@x.example']) {
      assert.throws(() => loadConfig({ PUBLIC_BASE_URL: bad }), /PUBLIC_BASE_URL must be an absolute http\(s\) URL/);
    }
    for (const bad of ['api.example.com:8080', 'a"b', 'http://x']) {
      assert.throws(() => loadConfig({ ALLOWED_HOSTS: bad }), /ALLOWED_HOSTS must list host names/);
    }
    assert.deepEqual(loadConfig({ ALLOWED_HOSTS: ' API.example.com , .Example.org,*' }).allowedHosts, ['api.example.com', '.example.org', '*']);
  });
});

describe('response validation of signed URLs', () => {
  it('when a handler produced a URL that is not a URI (a base the configuration check would refuse), then response validation stops it: 503, never the URL', async () => {
    const s = await startTestServer({ env: { WORKER_POLL_MS: '20' }, config: { publicBaseUrl: 'http://a"b' } });
    try {
      const { secret } = await s.user();
      const made = await submit(s, secret, '/api/generate/image', { model: 'gemforge-image-1', prompt: 'a lighthouse at dusk' });
      assert.equal(made.status, 202, 'no output yet, so no URL');
      await until(
        'the task to succeed',
        async () => ((await s.db('tasks').where({ id: made.body.task.id }).first()) as { status: string }).status === 'succeeded',
      );
      const res = await s.call('GET', `/api/generate/tasks/${made.body.task.id}`, { key: secret });
      const text = await res.text();
      assert.equal(res.status, 503, text);
      assert.doesNotMatch(text, /a"b/);
    } finally {
      await s.close();
    }
  });

  it('when strings are checked as format uri, then RFC 3986 characters that parse pass and the rest fail', () => {
    for (const ok of ['http://127.0.0.1:8080/files/asset_1?expires=1&sig=ab', 'https://[::1]:9/x', 'https://a.example/%41']) assert.ok(isUri(ok), ok);
    for (const bad of ['http://a"b/files/x', 'http://a b/', 'http://a<b>/', 'no-scheme', 'http://[::1/', 'http://x/\\y']) assert.ok(!isUri(bad), bad);
  });
});

describe('URI authorities', () => {
  const fakeRequest = (host: string | undefined) =>
    ({ protocol: 'http', headers: { host }, socket: { localAddress: '::ffff:10.1.2.3', localPort: 8080 } }) as unknown as Request;

  it('when any string is the Host, then the base URL parses as a URL whose host is that allowed name or the listen address', () => {
    const base = baseUrlFor({ host: '0.0.0.0', publicBaseUrl: undefined, allowedHosts: ['*'] });
    fc.assert(
      fc.property(
        fc.oneof(fc.string(), fc.stringMatching(/^[a-z0-9.:[\]@"%-]{0,30}$/), fc.stringMatching(/^[a-z0-9]{1,3}(\.[a-z0-9x]{1,4}){0,4}(:[0-9]{1,5})?$/)),
        (host) => {
          const url = new URL(`${base(fakeRequest(host))}/files/x`);
          const parsed = parseAuthority(host);
          if (parsed) assert.equal(url.hostname, parsed.name);
          else assert.equal(url.host, '10.1.2.3:8080');
        },
      ),
      { numRuns: 20_000 },
    );
  });

  it('when Host is a valid authority, then it is read as name and port', () => {
    assert.deepEqual(parseAuthority('Api.Example.COM.:443'), { name: 'api.example.com', port: 443 });
    assert.deepEqual(parseAuthority('[::1]:8080'), { name: '[::1]', port: 8080 });
    assert.deepEqual(parseAuthority('10.0.0.1'), { name: '10.0.0.1', port: undefined });
    assert.equal(parseAuthority('[fe80::1%25eth0]'), undefined);
    assert.equal(parseAuthority(''), undefined);
    for (const numericTail of ['a.0', 'example.123', 'x.0x1f', '1.2.3', '010.0.0.1']) assert.equal(parseAuthority(numericTail), undefined, numericTail);
    assert.deepEqual(parseAuthority('0x.example'), { name: '0x.example', port: undefined });
    assert.equal(checkAllowedHost('.Example.com'), '.example.com');
  });

  it('when the request has no Host (HTTP/1.0), then the listen address is used; an IPv6 one in brackets', () => {
    const base = baseUrlFor({ host: '::', publicBaseUrl: undefined, allowedHosts: [] });
    assert.equal(base(fakeRequest(undefined)), 'http://10.1.2.3:8080');
    const v6 = { protocol: 'http', headers: {}, socket: { localAddress: '::1', localPort: 9 } } as unknown as Request;
    assert.equal(base(v6), 'http://[::1]:9');
  });
});
