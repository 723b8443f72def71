/**
 * Writes a file whole, then renames it into place: whoever reads it (a starting
 * server, a concurrent build, the admin CLI) sees the old file or the new one,
 * never half of one. The temporary file is hidden beside the target (the same
 * file system, so the rename is atomic) and named by this process, so two
 * writers never share one.
 */
import fs from 'node:fs';
import path from 'node:path';

export function writeWhole(file: string, data: string | NodeJS.ArrayBufferView, options: { mode?: number } = {}): void {
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.tmp`);
  fs.writeFileSync(tmp, data, options);
  fs.renameSync(tmp, file);
}
