/**
 * A preload for scripts/idle-rss.ts --heap: on SIGUSR2 the server writes V8's
 * view of its memory to $MEMORY_REPORT (JSON), which /proc cannot show.
 * Plain JS so that it loads before tsx, in any checkout.
 */
import fs from 'node:fs';
import v8 from 'node:v8';

process.on('SIGUSR2', () => {
  const spaces = Object.fromEntries(
    v8.getHeapSpaceStatistics().map((s) => [s.space_name, { size: s.space_size, used: s.space_used_size, physical: s.physical_space_size }]),
  );
  fs.writeFileSync(process.env.MEMORY_REPORT, JSON.stringify({ usage: process.memoryUsage(), spaces }));
});
