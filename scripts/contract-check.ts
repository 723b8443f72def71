/**
 * `npm run contract:check`: the working contract
 * (openapi/openapi.yaml) against the released one (the highest version in
 * openapi/released/), so a designer hears what an edit breaks for deployed
 * clients before it ships.
 *
 * Two readers, one verdict:
 * - Optic (`@useoptic/optic`, its breaking-change rules: removed operations,
 *   responses and response fields, new required request fields, narrowed enums,
 *   changed types …), installed apart in scripts/contract-check/ (its Spectral
 *   ruleset needs an older ajv than the server's), and run offline with its
 *   telemetry off; its changelog is printed as it is;
 * - contract-diff.ts for what Optic passes: request limits tightened.
 * A breaking change fails (exit 1) unless `info.version`'s major is above the
 * released one's.
 *
 *   npm run contract:check [-- --released FILE --working FILE]
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import YAML from 'yaml';
import { tightenedRequests } from './contract-diff.ts';

const root = path.resolve(import.meta.dirname, '..');
const toolDir = path.join(root, 'scripts/contract-check');
const optic = path.join(toolDir, 'node_modules/@useoptic/optic/build/index.js');

/** The highest `X.Y.Z.yaml` in openapi/released/. */
function latestReleased(): string {
  const dir = path.join(root, 'openapi/released');
  const versions = fs.readdirSync(dir).filter((f) => /^\d+\.\d+\.\d+\.yaml$/.test(f));
  const key = (f: string) => f.replace(/\.yaml$/, '').split('.').map(Number);
  versions.sort((a, b) => {
    const [x, y] = [key(a), key(b)];
    return x[0]! - y[0]! || x[1]! - y[1]! || x[2]! - y[2]!;
  });
  if (versions.length === 0) throw new Error(`no released contract (X.Y.Z.yaml) in ${dir}`);
  return path.join(dir, versions[versions.length - 1]!);
}

/** Installs the diff tool from its own lock the first time (npm ci --prefix). */
function ensureOptic(): void {
  if (fs.existsSync(optic)) return;
  console.log('installing the contract diff tool (scripts/contract-check, once) …');
  const run = spawnSync('npm', ['ci', '--prefix', toolDir, '--no-audit', '--no-fund', '--loglevel=error'], { stdio: 'inherit' });
  if (run.status !== 0 || !fs.existsSync(optic)) throw new Error('could not install @useoptic/optic into scripts/contract-check');
}

const major = (version: unknown) => Number(String(version).split('.')[0]);

function main(): number {
  const { values } = parseArgs({ options: { released: { type: 'string' }, working: { type: 'string' } } });
  const released = path.resolve(values.released ?? latestReleased());
  const working = path.resolve(values.working ?? path.join(root, 'openapi/openapi.yaml'));
  const docs = [released, working].map((f) => YAML.parse(fs.readFileSync(f, 'utf8')) as { info?: { version?: string } } & Record<string, unknown>);
  const [before, after] = [docs[0]!.info?.version, docs[1]!.info?.version];
  console.log(`contract check: ${path.relative(root, working)} (${after}) against ${path.relative(root, released)} (${before})\n`);

  ensureOptic();
  const run = spawnSync(process.execPath, [optic, 'diff', released, working, '--check'], {
    cwd: root,
    encoding: 'utf8',
    env: { ...process.env, OPTIC_TELEMETRY_LEVEL: 'off', NO_COLOR: '1', FORCE_COLOR: '0' },
    timeout: 120_000,
  });
  // Optic says "invalid allOf variant" of every if/then inside allOf (it cannot read them): noise, not findings.
  const said = `${run.stdout ?? ''}${run.stderr ?? ''}`.split('\n').filter((l) => !/invalid allOf variant/.test(l) && !/--web flag/.test(l));
  console.log(said.join('\n').trim());
  if (run.error || (run.status !== 0 && run.status !== 1)) {
    console.error(`\nthe diff tool failed (${run.error?.message ?? `exit ${run.status}`})`);
    return 2;
  }
  const opticBreaking = run.status === 1;

  const tightened = tightenedRequests(docs[0]!, docs[1]!);
  if (tightened.length > 0) {
    console.log('\nRequest limits tightened (a request valid under the released contract may now be refused):');
    for (const t of tightened) console.log(`  x ${t}`);
  }

  const breaking = opticBreaking || tightened.length > 0;
  if (!breaking) {
    console.log('\nno breaking change');
    return 0;
  }
  if (major(after) > major(before)) {
    console.log(`\nbreaking changes, released as a new major version (${before} → ${after})`);
    return 0;
  }
  console.log(`\nBREAKING: the changes above break clients of ${before}. Undo them, or raise info.version's major (now ${after}) and release the contract as openapi/released/<version>.yaml.`);
  return 1;
}

process.exitCode = main();
