/**
 * The framework floor: a bare Express 5 app answering one small JSON body, the
 * same as bare-node.ts but through Express's router and `res.json`.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';

const app = express();
app.disable('x-powered-by');
app.set('etag', false);
app.get('/', (_req, res) => {
  res.json({ hello: 'world' });
});
const server = http.createServer(app);
server.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ port: (server.address() as AddressInfo).port })));
