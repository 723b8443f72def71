/**
 * `npm run contract:check`: the working contract
 * (openapi/openapi.yaml) against the released one (the highest version in
 * openapi/released/), so a designer hears what an edit breaks for deployed
 * clients before it ships. The rules are contract-diff.ts's, in this repository:
 * nothing to install, nothing to download. The breaking changes come first, one
 * line each; then the other changes, one line each.
 * A breaking change fails (exit 1) unless `info.version`'s major is above the
 * released one's.
 *
 *   npm run contract:check [-- --released FILE --working FILE --all]
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import YAML from 'yaml';
import { diffContracts, grouped } from './contract-diff.ts';

const root = path.resolve(import.meta.dirname, '..');
const OTHER_CHANGES_SHOWN = 20;

/** The highest `X.Y.Z.yaml` in openapi/released/. */
function latestReleased(): string {
  const dir = path.join(root, 'openapi/released');
  const versions = fs.readdirSync(dir).filter((f) => /^\d+\.\d+\.\d+\.yaml$/.test(f));
  const key = (f: string) =>
    f
      .replace(/\.yaml$/, '')
      .split('.')
      .map(Number);
  versions.sort((a, b) => {
    const [x, y] = [key(a), key(b)];
    return x[0]! - y[0]! || x[1]! - y[1]! || x[2]! - y[2]!;
  });
  if (versions.length === 0) throw new Error(`no released contract (X.Y.Z.yaml) in ${dir}`);
  return path.join(dir, versions[versions.length - 1]!);
}

const major = (version: unknown) => Number(String(version).split('.')[0]);

function main(): number {
  const { values } = parseArgs({ options: { released: { type: 'string' }, working: { type: 'string' }, all: { type: 'boolean' } } });
  const released = path.resolve(values.released ?? latestReleased());
  const working = path.resolve(values.working ?? path.join(root, 'openapi/openapi.yaml'));
  const docs = [released, working].map((f) => YAML.parse(fs.readFileSync(f, 'utf8')) as { info?: { version?: string } } & Record<string, unknown>);
  const [before, after] = [docs[0]!.info?.version, docs[1]!.info?.version];
  console.log(`contract check: ${path.relative(root, working)} (${after}) against ${path.relative(root, released)} (${before})\n`);

  const diff = diffContracts(docs[0]!, docs[1]!);
  const [found, changes] = [grouped(diff.breaking), grouped(diff.changes)];
  if (found.length > 0) {
    console.log(`Breaking changes (${found.length}): a client built on ${before} may now fail`);
    for (const line of found) console.log(`  x ${line}`);
    if (changes.length > 0) console.log('');
  }
  if (changes.length > 0) {
    // The breaking lines are all printed; the other changes only as many as stay readable.
    const shown = values.all ? changes : changes.slice(0, OTHER_CHANGES_SHOWN);
    console.log(`Other changes (${changes.length}):`);
    for (const line of shown) console.log(`  + ${line}`);
    if (shown.length < changes.length) console.log(`  … ${changes.length - shown.length} more (npm run contract:check -- --all lists them)`);
  }

  if (found.length === 0) {
    console.log('\nno breaking change');
    return 0;
  }
  if (major(after) > major(before)) {
    console.log(`\nbreaking changes, released as a new major version (${before} → ${after})`);
    return 0;
  }
  console.log(
    `\nBREAKING: the changes above break clients of ${before}. Undo them, or raise info.version's major (now ${after}) and release the contract as openapi/released/<version>.yaml.`,
  );
  return 1;
}

process.exitCode = main();
