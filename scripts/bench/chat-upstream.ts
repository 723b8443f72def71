/**
 * A fake OpenAI-compatible chat-completions upstream for the gateway bench: answers
 * `POST /v1/chat/completions` at once, as one JSON completion or (`"stream": true`)
 * as three SSE chunks, the last with `usage`, then `[DONE]`, in the shapes OpenAI
 * documents. Prints its port on stdout once listening.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const usage = { prompt_tokens: 12, completion_tokens: 6, total_tokens: 18 };
const completion = (model: string) =>
  JSON.stringify({
    id: 'chatcmpl-bench',
    object: 'chat.completion',
    created: 1,
    model,
    choices: [{ index: 0, message: { role: 'assistant', content: 'Hello there, friend.' }, finish_reason: 'stop' }],
    usage,
  });
const chunk = (model: string, delta: Record<string, unknown>, finish: string | null, withUsage = false) =>
  `data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: 1, model, choices: [{ index: 0, delta, finish_reason: finish }], ...(withUsage && { usage }) })}\n\n`;

const server = http.createServer((req, res) => {
  let raw = '';
  req.setEncoding('utf8');
  req.on('data', (d: string) => (raw += d));
  req.on('end', () => {
    if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions')) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"message":"not found"}}');
      return;
    }
    const body = JSON.parse(raw) as { model: string; stream?: boolean };
    if (!body.stream) {
      const text = completion(body.model);
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.write(chunk(body.model, { role: 'assistant', content: 'Hello there,' }, null));
    res.write(chunk(body.model, { content: ' friend.' }, null));
    res.end(chunk(body.model, {}, 'stop', true) + 'data: [DONE]\n\n');
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ port: (server.address() as AddressInfo).port })));
