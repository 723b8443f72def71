/**
 * Runs a check unless what it reads is byte for byte what it read at its last
 * pass: `node scripts/cached.mjs <name> <file or folder>... -- <command>...`.
 * The key is a hash of the command and of every file named (folders read
 * whole), kept in node_modules/.cache/checks/<name> after a pass, so a run
 * that changed none of them skips the check and says so; any change, a new
 * tool version (name the lock file) or a fresh clone (CI) runs it. The
 * contracts' lint is its one user: Redocly and Spectral read only the
 * contracts and their rule files, and took a few seconds of CPU at every
 * `npm run test:fast` in which neither had changed.
 */
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

const split = process.argv.indexOf('--');
const [name, ...inputs] = process.argv.slice(2, split === -1 ? undefined : split);
const command = split === -1 ? [] : process.argv.slice(split + 1);
if (!name || inputs.length === 0 || command.length === 0) {
  console.error('usage: node scripts/cached.mjs <name> <file or folder>... -- <command>...');
  process.exit(2);
}

/** Every file under `input`, sorted, so the key does not depend on the order the disk lists them in. */
function filesOf(input) {
  if (!fs.statSync(input).isDirectory()) return [input];
  return fs
    .readdirSync(input, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => path.join(entry.parentPath, entry.name))
    .sort();
}

const hash = crypto.createHash('sha256').update(JSON.stringify(command));
for (const file of inputs.flatMap(filesOf)) hash.update(`\0${file}\0`).update(fs.readFileSync(file));
const key = hash.digest('hex');
const record = path.join('node_modules', '.cache', 'checks', name);

let last;
try {
  last = fs.readFileSync(record, 'utf8');
} catch {
  last = undefined;
}
if (last === key) {
  console.log(`${name}: passed before on these same files (${inputs.join(', ')}); not run again`);
  process.exit(0);
}

const child = spawn(command[0], command.slice(1), { stdio: 'inherit' });
child.on('error', (error) => {
  console.error(`${command[0]}: ${error.message}`);
  process.exit(1);
});
child.on('close', (code, signal) => {
  const status = code ?? (signal ? 1 : 0);
  if (status === 0) {
    fs.mkdirSync(path.dirname(record), { recursive: true });
    fs.writeFileSync(record, key);
  }
  process.exit(status);
});
