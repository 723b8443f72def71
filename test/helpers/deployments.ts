/** Catalogs with several upstreams per model (`deployments:`), and an upstream that refuses every connection. */
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import YAML from 'yaml';

/** A local port nothing listens on (connections to it are refused). */
export async function refusingUrl(): Promise<string> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return `http://127.0.0.1:${port}`;
}

/** The shipped catalog with `deployments` given to one model, written into `dir`; returns its path. */
export function catalogWith(dir: string, deployments: unknown[], model = 'gemforge-text-1'): string {
  const doc = YAML.parse(fs.readFileSync('server/catalog/models.yaml', 'utf8')) as { models: Array<Record<string, unknown>> };
  const entry = doc.models.find((m) => m.id === model)!;
  entry.deployments = deployments;
  const file = path.join(dir, 'models.yaml');
  fs.writeFileSync(file, YAML.stringify(doc));
  return file;
}
