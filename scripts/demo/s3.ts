/**
 * The demo's S3-compatible server (scripts/demo-multi.sh): s3rver from npm, as
 * the tests use it (test/helpers/s3.ts), on 127.0.0.1:PORT with one bucket,
 * its objects under DIR. Runs until SIGTERM or SIGINT.
 *
 *   node --import tsx scripts/demo/s3.ts PORT BUCKET DIR
 */
import S3rver from 's3rver';

const [port, bucket, directory] = process.argv.slice(2);
if (!port || !bucket || !directory) {
  console.error('usage: s3.ts PORT BUCKET DIR');
  process.exit(2);
}
const server = new S3rver({ port: Number(port), address: '127.0.0.1', silent: true, directory, configureBuckets: [{ name: bucket, configs: [] }] });
await server.run();
console.log(`s3rver on http://127.0.0.1:${port}, bucket ${bucket}`);
const stop = () => void server.close().then(() => process.exit(0));
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
