/**
 * The embedded image generator: real images drawn with sharp (SVG → raster),
 * deterministic from prompt, seed and slot, visibly different for different
 * prompts. Colours come from the prompt (colour words bias the palette) or,
 * when reference images are given, from their dominant colours. An edit model
 * transforms its source image. `background: transparent` gives a real alpha
 * channel. No network, no account anywhere.
 */
import fs from 'node:fs/promises';
import type { Sharp } from 'sharp';
import { sharp } from '../../media/sharp.ts';
import { SHARP_INPUT } from '../../media/limits.ts';
import type { GeneratedOutput, ImageJobRequest, MediaJob, MediaProvider, MediaTools } from '../media-types.ts';
import { rng, seedOf } from '../random.ts';

type ImageRequest = ImageJobRequest;

type Rgb = [number, number, number];

// A Map, not a plain object: `constructor in {}` is true, and prompts are user text.
const COLOUR_WORDS = new Map<string, number>(
  Object.entries({
    red: 0,
    crimson: 350,
    pink: 330,
    magenta: 300,
    purple: 275,
    violet: 265,
    indigo: 240,
    blue: 215,
    navy: 225,
    cyan: 185,
    teal: 175,
    turquoise: 170,
    green: 120,
    forest: 130,
    lime: 90,
    olive: 70,
    yellow: 55,
    gold: 45,
    orange: 28,
    amber: 38,
    brown: 25,
    sunset: 20,
    fire: 10,
    ocean: 200,
    sky: 205,
    grass: 110,
    leaf: 115,
  }),
);

function hslToRgb(h: number, s: number, l: number): Rgb {
  const c = (1 - Math.abs(2 * l - 1)) * s;
  const x = c * (1 - Math.abs(((h / 60) % 2) - 1));
  const m = l - c / 2;
  const [r, g, b] = h < 60 ? [c, x, 0] : h < 120 ? [x, c, 0] : h < 180 ? [0, c, x] : h < 240 ? [0, x, c] : h < 300 ? [x, 0, c] : [c, 0, x];
  return [Math.round((r + m) * 255), Math.round((g + m) * 255), Math.round((b + m) * 255)];
}

/** Five colours from the prompt: its colour words set the hues, the hash the rest. */
export function promptPalette(prompt: string, random: () => number): Rgb[] {
  const words = prompt.toLowerCase().match(/[a-z]+/g) ?? [];
  const hues = words.flatMap((w) => COLOUR_WORDS.get(w) ?? []);
  const base = hues.length ? hues : [Math.floor(random() * 360)];
  return Array.from({ length: 5 }, (_, i) => {
    const h = (base[i % base.length] + (random() - 0.5) * 30 + 360) % 360;
    return hslToRgb(h, 0.55 + random() * 0.4, 0.3 + random() * 0.45);
  });
}

/** The dominant colours of reference images (a 4×4 thumbnail of each). */
async function referencePalette(files: string[]): Promise<Rgb[]> {
  const colours: Rgb[] = [];
  for (const file of files) {
    const { data } = await sharp(file, SHARP_INPUT).removeAlpha().resize(4, 4, { fit: 'fill' }).raw().toBuffer({ resolveWithObject: true });
    for (let i = 0; i + 2 < data.length; i += 3) colours.push([data[i], data[i + 1], data[i + 2]]);
  }
  return colours;
}

const hex = ([r, g, b]: Rgb) => `#${[r, g, b].map((v) => v.toString(16).padStart(2, '0')).join('')}`;

/** The picture as SVG: a gradient ground (unless transparent) and seeded shapes. */
function drawSvg(req: ImageRequest, palette: Rgb[], random: () => number, transparent: boolean): string {
  const { width: w, height: h } = req;
  const pick = () => hex(palette[Math.floor(random() * palette.length)]);
  const parts: string[] = [];
  if (!transparent) {
    parts.push(
      `<defs><linearGradient id="g" x1="0" y1="0" x2="${random().toFixed(2)}" y2="1"><stop offset="0" stop-color="${pick()}"/><stop offset="1" stop-color="${pick()}"/></linearGradient></defs>`,
      `<rect width="${w}" height="${h}" fill="url(#g)"/>`,
    );
  }
  const count = 6 + Math.floor(random() * 14);
  for (let i = 0; i < count; i++) {
    const x = random() * w;
    const y = random() * h;
    const size = (0.05 + random() * 0.3) * Math.min(w, h);
    const opacity = (0.45 + random() * 0.5).toFixed(2);
    const shape = Math.floor(random() * 3);
    if (shape === 0) parts.push(`<circle cx="${x.toFixed(1)}" cy="${y.toFixed(1)}" r="${size.toFixed(1)}" fill="${pick()}" fill-opacity="${opacity}"/>`);
    else if (shape === 1) {
      parts.push(
        `<rect x="${(x - size).toFixed(1)}" y="${(y - size / 2).toFixed(1)}" width="${(size * 2).toFixed(1)}" height="${size.toFixed(1)}" rx="${(size / 5).toFixed(1)}" fill="${pick()}" fill-opacity="${opacity}" transform="rotate(${Math.floor(random() * 180)} ${x.toFixed(1)} ${y.toFixed(1)})"/>`,
      );
    } else {
      const pts = [0, 1, 2].map((k) => {
        const a = random() * Math.PI * 2 + (k * Math.PI * 2) / 3;
        return `${(x + Math.cos(a) * size).toFixed(1)},${(y + Math.sin(a) * size).toFixed(1)}`;
      });
      parts.push(`<polygon points="${pts.join(' ')}" fill="${pick()}" fill-opacity="${opacity}"/>`);
    }
  }
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}">${parts.join('')}</svg>`;
}

/**
 * `magicPrompt`: the prompt rewritten richer before drawing, as a hosted model's
 * prompt enhancer would; here, descriptive words that change the seed and add
 * colour to the palette.
 */
export function magicPrompt(prompt: string): string {
  return `${prompt}, luminous golden and violet light, richly detailed, dramatic composition`;
}

async function render(req: ImageRequest, job: MediaJob<'image'>, tools: MediaTools): Promise<Sharp> {
  const prompt = req.magicPrompt ? magicPrompt(req.prompt) : req.prompt;
  // Each part as String() writes it (an absent seed or style hashes as "null", as it always has here): the same request keeps drawing the same picture.
  const random = rng(seedOf(...[prompt, req.seed, job.index, req.negativePrompt, req.variant, req.style].map(String)));
  const refs = await Promise.all(req.referenceImages.map((id) => tools.assetFile(id)));
  const palette = refs.length ? await referencePalette(refs) : promptPalette(prompt, random);
  const transparent = req.background === 'transparent';
  let image: Sharp;
  if (req.sourceImage) {
    // Edit: the source, cropped to the requested frame, hue-shifted by the prompt, with the prompt's shapes over it.
    const source = await sharp(await tools.assetFile(req.sourceImage), SHARP_INPUT)
      .resize(req.width, req.height, { fit: 'cover' })
      .modulate({ hue: Math.floor(random() * 300) + 30 })
      .png()
      .toBuffer();
    const overlay = Buffer.from(drawSvg(req, palette, random, true));
    image = sharp(source).composite([{ input: overlay, blend: 'over' }]);
  } else {
    image = sharp(Buffer.from(drawSvg(req, palette, random, transparent)));
  }
  let buffer = await image.png().toBuffer();
  if (req.variant === 'vivid') buffer = await sharp(buffer).modulate({ saturation: 1.5 }).png().toBuffer();
  if (req.variant === 'muted') buffer = await sharp(buffer).modulate({ saturation: 0.5 }).png().toBuffer();
  if (req.style === 'pixel') {
    const small = await sharp(buffer)
      .resize(Math.max(1, Math.round(req.width / 16)), Math.max(1, Math.round(req.height / 16)), { kernel: 'nearest' })
      .png()
      .toBuffer();
    buffer = await sharp(small).resize(req.width, req.height, { kernel: 'nearest' }).png().toBuffer();
  } else if (req.style === 'watercolor') {
    buffer = await sharp(buffer).blur(4).png().toBuffer();
  } else if (req.style === 'illustration') {
    buffer = await sharp(buffer).median(5).sharpen().png().toBuffer();
  }
  // Exactly the requested frame, with an alpha channel only when transparency was asked for.
  let out = sharp(buffer).resize(req.width, req.height, { fit: 'fill' });
  out = transparent ? out.ensureAlpha() : out.flatten({ background: '#000000' });
  return out;
}

export const localImageProvider: MediaProvider<'image'> = {
  name: 'local-image',
  resume: 'rerun',
  async generate(job, tools): Promise<GeneratedOutput> {
    const req = job.request;
    const image = await render(req, job, tools);
    const file = await tools.tempFile(`.${req.outputFormat === 'jpeg' ? 'jpg' : req.outputFormat}`);
    const formatted = req.outputFormat === 'jpeg' ? image.jpeg({ quality: 90 }) : req.outputFormat === 'webp' ? image.webp({ quality: 90 }) : image.png();
    try {
      await fs.writeFile(file, await formatted.toBuffer());
    } catch (error) {
      // A full disk leaves a partial file: it goes, not to the sweep hours later.
      await fs.rm(file, { force: true });
      throw error;
    }
    return { file, mimeType: req.mimeType };
  },
};
