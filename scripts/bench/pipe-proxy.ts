/**
 * The gateway bench's reference point: a bare `node:http` proxy that pipes each
 * request to UPSTREAM_URL and the answer back, with a keep-alive agent and nothing
 * else (no authentication, metering or validation). Prints its port on stdout.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const upstream = new URL(process.env.UPSTREAM_URL ?? 'http://127.0.0.1:1');
const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
const server = http.createServer((req, res) => {
  const out = http.request({ host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: req.headers, agent }, (answer) => {
    res.writeHead(answer.statusCode ?? 502, answer.headers);
    answer.pipe(res);
  });
  out.on('error', () => res.writeHead(502).end());
  req.pipe(out);
});
// PROXY_PORT: bench:startup times the start to a first answer on a port it chose; otherwise any free port.
server.listen(Number(process.env.PROXY_PORT ?? 0), '127.0.0.1', () => console.log(JSON.stringify({ port: (server.address() as AddressInfo).port })));
