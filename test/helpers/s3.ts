/**
 * A local S3-compatible server for tests (s3rver, from npm) on 127.0.0.1 with
 * one bucket, its data in a temp directory, and the environment the AWS SDK
 * reads its credentials from.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import S3rver from 's3rver';

export interface LocalS3 {
  endpoint: string;
  bucket: string;
  directory: string;
  /** BLOB_STORE=s3 and the S3_* variables for a server using it. */
  env: Record<string, string>;
  /** Every object key stored, for assertions. */
  keys(): string[];
  /** Stops answering (an outage): connections to the endpoint are refused until `resume`. */
  pause(): Promise<void>;
  /** Answers again on the same port, with the objects it held. */
  resume(): Promise<void>;
  close(): Promise<void>;
}

export async function startLocalS3(bucket = 'gemforge-test'): Promise<LocalS3> {
  // The SDK's default credential chain reads these; s3rver accepts this pair.
  process.env.AWS_ACCESS_KEY_ID = 'S3RVER';
  process.env.AWS_SECRET_ACCESS_KEY = 'S3RVER';
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-s3-'));
  const serve = (at: number) => new S3rver({ port: at, address: '127.0.0.1', silent: true, directory, configureBuckets: [{ name: bucket, configs: [] }] });
  let server: S3rver | undefined = serve(0);
  const { port } = (await server.run()) as { port: number };
  const endpoint = `http://127.0.0.1:${port}`;
  const walk = (dir: string): string[] =>
    fs.existsSync(dir)
      ? fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(path.join(dir, e.name)) : [path.join(dir, e.name)]))
      : [];
  return {
    endpoint,
    bucket,
    directory,
    env: {
      BLOB_STORE: 's3',
      S3_ENDPOINT: endpoint,
      S3_BUCKET: bucket,
      S3_FORCE_PATH_STYLE: 'true',
      S3_REGION: 'us-east-1',
      AWS_ACCESS_KEY_ID: 'S3RVER',
      AWS_SECRET_ACCESS_KEY: 'S3RVER',
    },
    keys: () => walk(path.join(directory, bucket)).filter((f) => !f.endsWith('._S3rver_metadata.json') && !f.endsWith('._S3rver_object.md5')),
    async pause() {
      await server?.close();
      server = undefined;
    },
    async resume() {
      server = serve(port);
      await server.run();
    },
    async close() {
      await server?.close();
      fs.rmSync(directory, { recursive: true, force: true });
    },
  };
}
