// Runs after `npm ci` / `npm install` (the root's `prepare` script): links
// node_modules/.bin/gemforge to scripts/gemforge.mjs, as npm links a dependency's bin.
//
// Why not a `bin` entry in package.json: when the project's own package.json declares
// the bin, `npx gemforge` takes npm's "self-execution of a local package" path: it loads
// the whole installed tree (600+ packages, seconds) and links the project into the npx
// cache, checking the root's `engines` (Node >=24.11) against the Node that runs npm
// (EBADENGINE warnings on Node 20). A command found in node_modules/.bin is run at once,
// on the PATH npm builds, so under the pinned Node 24 (node_modules/.bin/node).
import fs from 'node:fs';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const binDir = path.join(root, 'node_modules', '.bin');
const link = path.join(binDir, 'gemforge');
fs.mkdirSync(binDir, { recursive: true });
fs.rmSync(link, { force: true });
fs.symlinkSync(path.relative(binDir, path.join(root, 'scripts', 'gemforge.mjs')), link);
