/**
 * Blobs in S3-compatible object storage, for instances that share no disk: AWS S3, Cloudflare
 * R2, MinIO, Ceph. Keys stay content-addressed (`blobs/<2 hex>/<sha256>`, under
 * S3_PREFIX); files go up as streamed multipart uploads (never whole in memory)
 * and come down as streams. Credentials come from the standard AWS variables
 * (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE, …).
 */
import fs from 'node:fs';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { DeleteObjectCommand, GetObjectCommand, HeadBucketCommand, HeadObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { countStoreError } from './outages.ts';

export interface S3Options {
  endpoint: string | undefined;
  bucket: string;
  region: string;
  forcePathStyle: boolean;
  prefix: string;
}

/** What the blob functions need of a store that is not the local directory. */
export interface RemoteBlobStore {
  readonly description: string;
  has(sha256: string): Promise<boolean>;
  putFile(sha256: string, file: string, size: number): Promise<void>;
  putBuffer(sha256: string, bytes: Buffer): Promise<void>;
  /** The blob's bytes as a stream, or undefined when there is no such blob. */
  get(sha256: string): Promise<Readable | undefined>;
  /** Writes the blob to `file`; false when there is no such blob. */
  download(sha256: string, file: string): Promise<boolean>;
  delete(sha256: string): Promise<void>;
  /** Throws when the store cannot be reached (start-up, /readyz). */
  check(): Promise<void>;
}

const missing = (error: unknown) => {
  const e = error as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e?.name === 'NoSuchKey' || e?.name === 'NotFound' || e?.$metadata?.httpStatusCode === 404;
};

export function s3BlobStore(options: S3Options): RemoteBlobStore {
  const client = new S3Client({
    region: options.region,
    forcePathStyle: options.forcePathStyle,
    ...(options.endpoint && { endpoint: options.endpoint }),
  });
  const Bucket = options.bucket;
  const key = (sha256: string) => `${options.prefix}blobs/${sha256.slice(0, 2)}/${sha256}`;
  return countedErrors({
    description: `s3://${options.bucket}/${options.prefix}${options.endpoint ? ` at ${options.endpoint}` : ''}`,
    async has(sha256) {
      try {
        await client.send(new HeadObjectCommand({ Bucket, Key: key(sha256) }));
        return true;
      } catch (error) {
        if (missing(error)) return false;
        throw error;
      }
    },
    async putFile(sha256, file, size) {
      // A streamed multipart upload (5 MiB parts, 4 at a time): the file is never whole in memory.
      const upload = new Upload({
        client,
        params: { Bucket, Key: key(sha256), Body: fs.createReadStream(file), ContentLength: size },
        queueSize: 4,
        partSize: 5 * 1024 * 1024,
      });
      await upload.done();
    },
    async putBuffer(sha256, bytes) {
      await client.send(new PutObjectCommand({ Bucket, Key: key(sha256), Body: bytes, ContentLength: bytes.length }));
    },
    async get(sha256) {
      try {
        const out = await client.send(new GetObjectCommand({ Bucket, Key: key(sha256) }));
        return out.Body as Readable;
      } catch (error) {
        if (missing(error)) return undefined;
        throw error;
      }
    },
    async download(sha256, file) {
      const body = await this.get(sha256);
      if (!body) return false;
      await pipeline(body, fs.createWriteStream(file));
      return true;
    },
    async delete(sha256) {
      await client.send(new DeleteObjectCommand({ Bucket, Key: key(sha256) }));
    },
    async check() {
      await client.send(new HeadBucketCommand({ Bucket }));
    },
  });
}

/** The store with each operation's failures counted for /metrics (`gemforge_store_errors_total`). */
function countedErrors(store: RemoteBlobStore): RemoteBlobStore {
  const wrap =
    <A extends unknown[], R>(operation: string, fn: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      try {
        return await fn.apply(store, args);
      } catch (error) {
        countStoreError('object store', operation, error);
        throw error;
      }
    };
  return {
    description: store.description,
    has: wrap('has', store.has),
    putFile: wrap('put', store.putFile),
    putBuffer: wrap('put', store.putBuffer),
    get: wrap('get', store.get),
    download: wrap('get', store.download),
    delete: wrap('delete', store.delete),
    check: wrap('check', store.check),
  };
}
