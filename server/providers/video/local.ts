/**
 * The embedded video generator: a real, playable H.264 MP4 (yuv420p,
 * +faststart) made with ffmpeg, of exactly the requested duration and frame
 * size, deterministic from prompt and seed. No network, no account anywhere.
 *
 * The picture is a low-resolution motion layer (Game of Life, a cellular
 * automaton, a Mandelbrot zoom or a test pattern, or the first reference video),
 * mapped onto two palette colours with a slowly turning hue and crossed by
 * moving blocks, then scaled up to the frame. Pattern, colours, shapes, paths and
 * speeds all come from a hash of the prompt; reference images set the palette.
 * `image-to-video` starts on the source image (a slow zoom into it while the
 * motion fades in over it); an `endFrame` fades in so the last frame is that image.
 * With `audio`, an AAC track: the first reference audio, or a pulsing chord.
 */
import { sharp } from '../../media/sharp.ts';
import { runTool } from '../../media/run.ts';
import { SHARP_INPUT } from '../../media/limits.ts';
import { promptPalette } from '../image/local.ts';
import { rng, seedOf } from '../random.ts';
import type { GeneratedOutput, MediaProvider, VideoJobRequest } from '../media-types.ts';

/** The normalized request (server/domain/media-video.ts). */
/** What the local video generator reads of a video job (the shared payload type). */
export type LocalVideoRequest = Omit<VideoJobRequest, 'ratio' | 'resolution' | 'mimeType'>;

/** Files of the request's references, resolved by the worker's tools. */
export interface VideoInputs {
  sourceImage?: string;
  endFrame?: string;
  referenceVideo?: string;
  referenceAudio?: string;
  /** Colours of the reference images (they lead the palette). */
  referenceColours: Rgb[];
}

type Rgb = [number, number, number];

const PATTERNS = ['life', 'cellauto', 'mandelbrot', 'testsrc2'] as const;
const RULES = [18, 30, 45, 60, 73, 90, 105, 110, 126, 150];
/** Frames over which an end frame fades in (its last frame is fully the image). */
const END_FADE_FRAMES = 18;

const hexColour = ([r, g, b]: Rgb) => `0x${[r, g, b].map((v) => v.toString(16).padStart(2, '0')).join('')}`;
const shade = ([r, g, b]: Rgb, k: number): Rgb => [Math.round(r * k), Math.round(g * k), Math.round(b * k)];
const tint = ([r, g, b]: Rgb, k: number): Rgb => [Math.round(r + (255 - r) * k), Math.round(g + (255 - g) * k), Math.round(b + (255 - b) * k)];
const num = (n: number) => Number(n.toFixed(3)).toString();

/** The motion source at low resolution (`w`×`h`), as a lavfi input or the reference video. */
function motionSource(random: () => number, w: number, h: number, fps: number, frames: number): string {
  const pattern = PATTERNS[Math.floor(random() * PATTERNS.length)];
  const seed = Math.floor(random() * 2 ** 31);
  const size = `size=${w}x${h}:rate=${fps}`;
  switch (pattern) {
    case 'life':
      return `life=${size}:mold=${5 + Math.floor(random() * 20)}:ratio=${num(0.15 + random() * 0.3)}:seed=${seed}:life_color=white:death_color=black:mold_color=0x606060`;
    case 'cellauto':
      return `cellauto=${size}:rule=${RULES[Math.floor(random() * RULES.length)]}:ratio=${num(0.2 + random() * 0.6)}:seed=${seed}:scroll=1`;
    case 'mandelbrot': {
      // Points on the set's boundary keep a zoom interesting all the way in.
      const spots: Array<[number, number]> = [
        [-0.743643887037151, 0.13182590420533],
        [-0.7453, 0.1127],
        [-1.25066, 0.02012],
        [-0.16, 1.0405],
        [0.3245, 0.04855],
      ];
      const [x, y] = spots[Math.floor(random() * spots.length)];
      return `mandelbrot=${size}:maxiter=64:start_x=${x}:start_y=${y}:start_scale=${num(2 + random())}:end_scale=${num(0.05 + random() * 0.2)}:end_pts=${Math.max(1, frames)}`;
    }
    default:
      return `testsrc2=${size}`;
  }
}

/** Two to four blocks moving on sine paths over the low-resolution layer. */
function shapes(random: () => number, palette: Rgb[], w: number, h: number): Array<{ colour: string; size: number; x: string; y: string }> {
  const count = 2 + Math.floor(random() * 3);
  return Array.from({ length: count }, () => {
    const size = Math.max(2, Math.round(Math.min(w, h) * (0.08 + random() * 0.2)));
    const [px, py] = [1.5 + random() * 4, 1.5 + random() * 4];
    const [phx, phy] = [random() * 6.28, random() * 6.28];
    return {
      colour: hexColour(palette[Math.floor(random() * palette.length)]),
      size,
      x: `(W-w)/2+(W-w)/2*sin(2*PI*t/${num(px)}+${num(phx)})`,
      y: `(H-h)/2+(H-h)/2*sin(2*PI*t/${num(py)}+${num(phy)})`,
    };
  });
}

/** A chord (three partials from a pentatonic root) pulsing at a tempo from the hash. */
function chord(random: () => number): string {
  const roots = [130.81, 146.83, 164.81, 196.0, 220.0];
  const root = roots[Math.floor(random() * roots.length)];
  const [third, fifth] = random() < 0.5 ? [4, 7] : [3, 7];
  const f = (semi: number) => num(root * 2 ** (semi / 12));
  const pulse = num(1 + Math.floor(random() * 3));
  return `0.12*(sin(2*PI*${f(0)}*t)+sin(2*PI*${f(third)}*t)+sin(2*PI*${f(fifth)}*t)+0.5*sin(2*PI*${f(12)}*t))*(0.6+0.4*sin(2*PI*${pulse}*t))`;
}

/**
 * The ffmpeg arguments that write `output` (pure: the same request and inputs
 * give the same arguments). Exported for unit tests.
 */
export function ffmpegArgs(req: LocalVideoRequest, inputs: VideoInputs, output: string): string[] {
  const random = rng(seedOf(req.prompt, req.seed));
  const { width: W, height: H, fps } = req;
  const frames = Math.max(1, Math.round(req.duration * fps));
  // The motion layer is drawn at an eighth of the frame and scaled up: cheap, and smooth.
  const w = Math.max(16, Math.round(W / 8));
  const h = Math.max(16, Math.round(H / 8));
  const palette = [...inputs.referenceColours, ...promptPalette(req.prompt, random)];
  // A reference image tints the whole picture: its colour and a darker shade of it.
  // Otherwise a dark shade of one prompt colour and a light tint of another, so the pattern always shows.
  const [dark, light]: [Rgb, Rgb] = inputs.referenceColours.length ? [shade(palette[0], 0.35), palette[0]] : [shade(palette[0], 0.5), tint(palette[1], 0.3)];
  const lut = (c: 0 | 1 | 2) => `${dark[c]}+val*(${light[c]}-${dark[c]})/255`;

  const args: string[] = ['-v', 'error', '-nostdin', '-y'];
  const graph: string[] = [];
  let n = 0;
  const input = (...a: string[]) => {
    args.push(...a);
    return n++;
  };

  // Motion: the reference video (looped) or a generated pattern, duotone in the palette.
  const base = inputs.referenceVideo
    ? input('-stream_loop', '-1', '-i', inputs.referenceVideo)
    : input('-f', 'lavfi', '-i', motionSource(random, w, h, fps, frames));
  const fit = inputs.referenceVideo ? `fps=${fps},scale=${w}:${h}:force_original_aspect_ratio=increase,crop=${w}:${h},` : '';
  // The hue sways around the palette (a few tens of degrees), so colours stay recognisable.
  const sway = `${num(15 + random() * 30)}*sin(2*PI*t/${num(3 + random() * 5)})`;
  graph.push(`[${base}:v]${fit}format=rgb24,hue=s=0,lutrgb=r='${lut(0)}':g='${lut(1)}':b='${lut(2)}',hue=h='${sway}'[m0]`);
  let layer = 'm0';
  shapes(random, palette.slice(2), w, h).forEach((s, i) => {
    const src = input('-f', 'lavfi', '-i', `color=c=${s.colour}:s=${s.size}x${s.size}:r=${fps}`);
    graph.push(`[${layer}][${src}:v]overlay=x='${s.x}':y='${s.y}':shortest=1[m${i + 1}]`);
    layer = `m${i + 1}`;
  });
  const cover = `scale=${W}:${H}:force_original_aspect_ratio=increase,crop=${W}:${H},setsar=1`;

  if (inputs.sourceImage) {
    // The first frame is the source image; the camera zooms in while the motion fades in over it.
    const src = input('-loop', '1', '-framerate', String(fps), '-i', inputs.sourceImage);
    graph.push(`[${src}:v]${cover},format=yuv420p,zoompan=z='1+0.12*on/${frames}':x='iw/2-iw/zoom/2':y='ih/2-ih/zoom/2':d=1:s=${W}x${H}:fps=${fps}[src]`);
    graph.push(
      `[${layer}]format=rgba,colorchannelmixer=aa=0.55,fade=t=in:s=0:n=${Math.max(1, Math.round(frames / 2))}:alpha=1,scale=${W}:${H}:flags=bilinear,format=yuva420p[fx]`,
    );
    graph.push(`[src][fx]overlay=format=yuv420:shortest=1[v0]`);
  } else {
    graph.push(`[${layer}]scale=${W}:${H}:flags=bilinear,setsar=1,format=yuv420p[v0]`);
  }
  let video = 'v0';
  if (inputs.endFrame) {
    // The end frame fades in so that the last frame is exactly the image.
    const end = input('-loop', '1', '-framerate', String(fps), '-i', inputs.endFrame);
    const fade = Math.min(END_FADE_FRAMES, frames - 1);
    const start = frames - 1 - fade;
    graph.push(`[${end}:v]${cover},format=yuva420p,fade=t=in:s=${start}:n=${Math.max(1, fade)}:alpha=1[end]`);
    graph.push(`[${video}][end]overlay=format=yuv420:shortest=1:enable='gte(n,${start})'[v1]`);
    video = 'v1';
  }
  graph.push(`[${video}]format=yuv420p,trim=end_frame=${frames},setpts=PTS-STARTPTS[v]`);

  let audio: string | undefined;
  if (req.audio) {
    const seconds = num(req.duration);
    const a = inputs.referenceAudio
      ? input('-stream_loop', '-1', '-t', seconds, '-i', inputs.referenceAudio)
      : input('-f', 'lavfi', '-i', `aevalsrc='${chord(random)}':s=44100:d=${seconds}`);
    const fadeOut = num(Math.max(0, req.duration - 0.3));
    graph.push(`[${a}:a]aresample=44100,aformat=channel_layouts=stereo,atrim=end=${seconds},afade=t=out:st=${fadeOut}:d=0.3[a]`);
    audio = '[a]';
  }

  args.push('-filter_complex', graph.join(';'), '-map', '[v]');
  if (audio) args.push('-map', audio, '-c:a', 'aac', '-b:a', '128k');
  else args.push('-an');
  args.push(
    // A fixed encoder thread count keeps the bytes the same on machines with more cores.
    '-c:v',
    'libx264',
    '-preset',
    'ultrafast',
    '-crf',
    '26',
    '-threads',
    '2',
    '-pix_fmt',
    'yuv420p',
    '-r',
    String(fps),
    '-map_metadata',
    '-1',
    '-fflags',
    '+bitexact',
    '-movflags',
    '+faststart',
    '-f',
    'mp4',
    output,
  );
  return args;
}

/** Mean colours of reference images (a 2×2 thumbnail each): they lead the palette. */
async function referenceColours(files: string[]): Promise<Rgb[]> {
  const colours: Rgb[] = [];
  for (const file of files) {
    const { data } = await sharp(file, SHARP_INPUT).removeAlpha().resize(1, 1, { fit: 'fill' }).raw().toBuffer({ resolveWithObject: true });
    colours.push([data[0], data[1], data[2]]);
  }
  return colours;
}

export const localVideoProvider: MediaProvider<'video'> = {
  name: 'local-video',
  resume: 'rerun',
  async generate(job, tools): Promise<GeneratedOutput> {
    const req = job.request;
    const file = (id: string | null | undefined) => (id ? tools.assetFile(id) : Promise.resolve(undefined));
    const inputs: VideoInputs = {
      sourceImage: req.mode === 'image-to-video' ? await file(req.sourceImage) : undefined,
      endFrame: await file(req.endFrame),
      referenceVideo: await file(req.referenceVideos[0]),
      referenceAudio: await file(req.referenceAudios[0]),
      referenceColours: await referenceColours(await Promise.all(req.referenceImages.map((id) => tools.assetFile(id)))),
    };
    const output = await tools.tempFile('.mp4');
    await runTool(tools.ffmpegPath, ffmpegArgs(req, inputs, output), { timeoutMs: 300_000 });
    return { file: output, mimeType: 'video/mp4' };
  },
};
