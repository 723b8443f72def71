/**
 * A local OpenAI-compatible `POST /v1/moderations` for tests: "forbidden" is
 * violence, "spicy" is sexual; "[[fail]]" answers 500, "[[junk]]" a malformed
 * body. Every request is kept in `seen`.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SeenModeration {
  url: string;
  authorization: string | undefined;
  body: { model: string; input: string[] };
}

export function fakeModeration(seen: SeenModeration[]): http.Server {
  return http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      const body = JSON.parse(raw) as SeenModeration['body'];
      seen.push({ url: req.url ?? '', authorization: req.headers.authorization, body });
      if (body.input.some((t) => t.includes('[[fail]]'))) return void res.writeHead(500).end('boom');
      if (body.input.some((t) => t.includes('[[junk]]'))) return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"results": []}');
      const results = body.input.map((text) => {
        const categories = { violence: text.includes('forbidden'), sexual: text.includes('spicy'), 'self-harm': false };
        return { flagged: categories.violence || categories.sexual, categories, category_scores: { violence: categories.violence ? 0.9 : 0.01 } };
      });
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: 'modr-1', model: body.model, results }));
    });
  });
}

/** Starts `server` on a free local port; its base URL (`…/v1`). */
export async function listenModeration(server: http.Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
}
