/**
 * `npm run bench` (bench-music): how long the embedded music synthesizer takes
 * to make the longest song the catalog offers (240 s, advanced mode, vocals).
 * The promise is "a few seconds"; a test cannot hold it on a shared runner, so
 * it lives here: the script fails when the render takes over 30 s.
 */
import { planMusic, renderMusic, type MusicRequest } from '../server/providers/audio/music.ts';
import { seedOf } from '../server/providers/random.ts';

const LIMIT_MS = 30_000;
const RUNS = 3;

const song: MusicRequest = {
  prompt: '[Verse]\nLanterns on the water, drifting out of town',
  musicMode: 'advanced',
  instrumental: 'off',
  style: 'lo-fi folk, fingerpicked guitar',
  title: 'Lanterns',
  negativeTags: 'heavy drums',
  vocalGender: 'f',
  durationSeconds: 240,
  coverAudio: null,
  seed: null,
};

const times: number[] = [];
for (let run = 0; run < RUNS; run++) {
  const started = performance.now();
  const pcm = renderMusic(planMusic(song, null), song.durationSeconds, seedOf('render', song.prompt, song.style, song.title, song.seed, run));
  times.push(performance.now() - started);
  if (pcm.samples.length === 0) throw new Error('no samples rendered');
}
const best = Math.min(...times);
console.log(
  `240 s song, advanced with vocals: ${times.map((t) => `${(t / 1000).toFixed(2)} s`).join(', ')} (best ${(best / 1000).toFixed(2)} s; limit ${LIMIT_MS / 1000} s)`,
);
if (best > LIMIT_MS) {
  console.error(`slower than ${LIMIT_MS / 1000} s`);
  process.exit(1);
}
