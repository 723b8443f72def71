/**
 * Loaded into each test file's process by `scripts/run-tests.mjs` when TEST_TIMES names a
 * file: at exit it appends one line there, the file's wall time from process start, its
 * exit code, its own CPU seconds and its children's (child servers, the CLI, ffmpeg, npm;
 * from /proc, so 0 where there is none), and the file's path. A reporter cannot give the
 * wall time: node --test reports the files it runs side by side in order, holding back
 * the later file's events until the earlier one ends.
 */
import fs from 'node:fs';

const file = process.argv[1];
const out = process.env.TEST_TIMES;
// Only a test file's own process: a server or CLI a test starts with its execArgv is not one.
if (out && file?.endsWith('.test.ts')) {
  process.on('exit', (code) => {
    let self = 0;
    let children = 0;
    try {
      // Fields after the command name: utime, stime, cutime, cstime are the 12th to 15th, in clock ticks (100 a second).
      const f = fs.readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' ');
      self = (Number(f[11]) + Number(f[12])) / 100;
      children = (Number(f[13]) + Number(f[14])) / 100;
    } catch {
      // not Linux: the CPU columns stay 0
    }
    const wall = performance.now() / 1000;
    fs.appendFileSync(out, `${wall.toFixed(1)}\t${code}\t${self.toFixed(1)}\t${children.toFixed(1)}\t${file}\n`);
  });
}
