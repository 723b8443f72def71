/**
 * The pure pieces behind bounded upstream reads: which addresses an output URL
 * may resolve to, the scrubbing of upstream text before it is logged, and the
 * SSE reader's line handling and event bound (the real-server cases are in
 * test/remote-providers.test.ts and test/text-upstream.test.ts).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { readBase64Field } from '../../server/providers/remote/body.ts';
import { addressAllowed, fetchAllowOf } from '../../server/providers/remote/public-fetch.ts';
import { parseAddress } from '../../server/addresses.ts';
import { scrubSecrets } from '../../server/providers/redact.ts';
import { SseEventTooLarge, sseData } from '../../server/providers/text/sse-reader.ts';
import { loadConfig } from '../../server/config.ts';

const allowed = (text: string, entries: string[] = []) => addressAllowed(parseAddress(text)!, fetchAllowOf(entries));

async function events(chunks: string[], max?: number): Promise<string[]> {
  const body = (async function* () {
    for (const c of chunks) yield new TextEncoder().encode(c);
  })();
  const out: string[] = [];
  for await (const data of sseData(body, max)) out.push(data);
  return out;
}

describe('remote output addresses', () => {
  it('when an address is loopback, private, link-local, CGNAT, unique-local, mapped or reserved, then it is refused; a public one is fetched', () => {
    for (const refused of [
      '127.0.0.1',
      '10.1.2.3',
      '172.16.0.1',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '100.100.100.200',
      '0.0.0.0',
      '::1',
      'fc00::1',
      'fd00:ec2::254',
      'fe80::1',
      '::ffff:127.0.0.1',
      '64:ff9b::7f00:1',
      '224.0.0.1',
    ]) {
      assert.equal(allowed(refused), false, refused);
    }
    for (const ok of ['93.184.216.34', '8.8.8.8', '2606:4700:4700::1111']) assert.equal(allowed(ok), true, ok);
  });

  it('when REMOTE_FETCH_ALLOW lists a range, then its private addresses are fetched and no others', () => {
    assert.equal(allowed('10.0.5.7', ['10.0.5.0/24']), true);
    assert.equal(allowed('10.0.6.7', ['10.0.5.0/24']), false);
    assert.equal(allowed('127.0.0.1', ['127.0.0.0/8', 'media.internal']), true);
    assert.deepEqual([...fetchAllowOf(['media.internal']).hosts], ['media.internal']);
    assert.deepEqual(loadConfig({ REMOTE_FETCH_ALLOW: ' 10.0.5.0/24, Media.Internal ' }).remoteFetchAllow, ['10.0.5.0/24', 'media.internal']);
    assert.throws(
      () => loadConfig({ REMOTE_FETCH_ALLOW: 'http://x/' }),
      /REMOTE_FETCH_ALLOW must list IP addresses, CIDR ranges or host names; got "http:\/\/x\/"/,
    );
  });
});

describe('upstream text in logs', () => {
  it('when upstream text echoes a configured key, a bearer token or an sk- key, then each is redacted', () => {
    const text = 'bad key my-own-key-value; Authorization: Bearer abc.def; other sk-proj-0123456789ABCDEF and r8_0123456789abcdef';
    const scrubbed = scrubSecrets(text, ['my-own-key-value']);
    assert.equal(scrubbed, 'bad key [redacted]; Authorization: Bearer [redacted]; other [redacted] and [redacted]');
  });
});

describe('the SSE reader', () => {
  it('when lines end with LF, CRLF or CR, split anywhere across chunks, then the events are the same', async () => {
    const whole = ': comment\r\ndata: a\r\ndata: b\r\n\r\ndata: c\n\ndata: d\r\rdata: e';
    const expected = ['a\nb', 'c', 'd', 'e'];
    assert.deepEqual(await events([whole]), expected);
    for (let cut = 1; cut < whole.length; cut++) assert.deepEqual(await events([whole.slice(0, cut), whole.slice(cut)]), expected, `cut at ${cut}`);
    assert.deepEqual(await events([...whole]), expected, 'one character per chunk');
  });

  it('when one event passes the bound, even as a line that never ends, then the stream fails with SseEventTooLarge', async () => {
    await assert.rejects(events(['data: ', 'x'.repeat(600), 'x'.repeat(600)], 1000), SseEventTooLarge);
    await assert.rejects(events(['data: ' + 'x'.repeat(600) + '\n', 'data: ' + 'x'.repeat(600) + '\n\n'], 1000), SseEventTooLarge);
    assert.deepEqual(await events(['data: ' + 'x'.repeat(600) + '\n\n', 'data: ' + 'y'.repeat(600) + '\n\n'], 1000), ['x'.repeat(600), 'y'.repeat(600)]);
  });
});

describe('a base64 image answer', () => {
  /** A Response whose body arrives in pieces of `size` bytes. */
  const answerOf = (text: string, size: number) =>
    new Response(
      new ReadableStream({
        start(controller) {
          const bytes = Buffer.from(text);
          for (let i = 0; i < bytes.length; i += size) controller.enqueue(bytes.subarray(i, i + size));
          controller.close();
        },
      }),
    );

  it('when b64_json arrives in pieces of any size, JSON-escaped or not, then exactly its bytes are written and the rest of the answer is parsed', async () => {
    const image = crypto.randomBytes(3000);
    const b64 = image.toString('base64');
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-b64-'));
    try {
      for (const value of [b64, b64.replaceAll('/', '\\/'), b64.replace(/(.{76})/g, '$1\\n')]) {
        const text = `{"created":1,"data":[{"revised_prompt":"say \\"b64_json\\": \\"no\\"","b64_json":"${value}"}],"usage":{"total_tokens":3}}`;
        for (const size of [1, 3, 7, 64, 100_000]) {
          const file = path.join(dir, `out-${size}`);
          const { answer, bytes } = await readBase64Field(answerOf(text, size), 'b64_json', file, 10_000, 'The image provider');
          assert.equal(bytes, image.length, `pieces of ${size}`);
          assert.ok(fs.readFileSync(file).equals(image), `pieces of ${size}`);
          assert.deepEqual(answer, { created: 1, data: [{ revised_prompt: 'say "b64_json": "no"', b64_json: '' }], usage: { total_tokens: 3 } });
        }
      }
      const url = await readBase64Field(answerOf('{"data":[{"url":"https://example.com/a.png"}]}', 5), 'b64_json', path.join(dir, 'url'), 10_000, 'x');
      assert.deepEqual(url, { answer: { data: [{ url: 'https://example.com/a.png' }] }, bytes: 0 });
      await assert.rejects(
        readBase64Field(answerOf(`{"data":[{"b64_json":"${b64}"}]}`, 64), 'b64_json', path.join(dir, 'big'), 2999, 'The image provider'),
        /larger than 2999 bytes/,
      );
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
