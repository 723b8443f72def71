/**
 * Measurements on small RGB24 frames, for the local analyzer: luma, sharpness
 * (variance of the Laplacian), frame difference (motion), brightness and named
 * colours. Pure functions, no I/O.
 */

/** Luma (BT.601) of each pixel, 0–255. */
export function luma(rgb: Buffer | Uint8Array): Float32Array {
  const n = Math.floor(rgb.length / 3);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = 0.299 * rgb[i * 3]! + 0.587 * rgb[i * 3 + 1]! + 0.114 * rgb[i * 3 + 2]!;
  return out;
}

/** Variance of the 4-neighbour Laplacian over the interior: 0 for a flat picture, large for fine detail. */
export function laplacianVariance(gray: Float32Array, width: number, height: number): number {
  if (width < 3 || height < 3) return 0;
  let sum = 0;
  let sumSq = 0;
  let n = 0;
  for (let y = 1; y < height - 1; y++) {
    for (let x = 1; x < width - 1; x++) {
      const i = y * width + x;
      const v = gray[i - 1]! + gray[i + 1]! + gray[i - width]! + gray[i + width]! - 4 * gray[i]!;
      sum += v;
      sumSq += v * v;
      n++;
    }
  }
  const mean = sum / n;
  return Math.max(0, sumSq / n - mean * mean);
}

/** Sharpness as a 0–1 score: v / (v + 200) of the Laplacian variance (200 ≈ an ordinary sharp photo at this size). */
export function sharpnessScore(variance: number): number {
  return variance > 0 ? variance / (variance + 200) : 0;
}

/** Mean absolute luma difference of two frames, 0–1. */
export function frameDifference(a: Float32Array, b: Float32Array): number {
  const n = Math.min(a.length, b.length);
  if (n === 0) return 0;
  let sum = 0;
  for (let i = 0; i < n; i++) sum += Math.abs(a[i]! - b[i]!);
  return sum / n / 255;
}

/** Mean luma, 0–1. */
export function brightness(gray: Float32Array): number {
  if (gray.length === 0) return 0;
  let sum = 0;
  for (const v of gray) sum += v;
  return sum / gray.length / 255;
}

export type ColourName = 'black' | 'white' | 'grey' | 'red' | 'orange' | 'yellow' | 'green' | 'cyan' | 'blue' | 'purple' | 'magenta' | 'pink' | 'brown';

/** A plain colour word for one pixel, from its hue, saturation and value. */
export function colourName(r: number, g: number, b: number): ColourName {
  const max = Math.max(r, g, b);
  const min = Math.min(r, g, b);
  const v = max / 255;
  const s = max === 0 ? 0 : (max - min) / max;
  if (v < 0.15) return 'black';
  if (s < 0.2) return v > 0.85 ? 'white' : v < 0.3 ? 'black' : 'grey';
  let h: number;
  const d = max - min;
  if (max === r) h = ((g - b) / d + 6) % 6;
  else if (max === g) h = (b - r) / d + 2;
  else h = (r - g) / d + 4;
  h *= 60;
  if (h < 15 || h >= 345) return v < 0.55 && s > 0.4 ? 'brown' : s < 0.5 && v > 0.7 ? 'pink' : 'red';
  if (h < 40) return v < 0.6 ? 'brown' : 'orange';
  if (h < 70) return v < 0.45 ? 'brown' : 'yellow';
  if (h < 165) return 'green';
  if (h < 195) return 'cyan';
  if (h < 255) return 'blue';
  if (h < 285) return 'purple';
  if (h < 320) return 'magenta';
  return 'pink';
}

/** Counts of colour names over the pixels of some frames (every `step`th pixel). */
export function colourCounts(frames: Array<Buffer | Uint8Array>, step = 2, into = new Map<ColourName, number>()): Map<ColourName, number> {
  for (const f of frames) {
    for (let i = 0; i + 2 < f.length; i += 3 * step) {
      const name = colourName(f[i]!, f[i + 1]!, f[i + 2]!);
      into.set(name, (into.get(name) ?? 0) + 1);
    }
  }
  return into;
}

/** The most common colours and their shares (0–1), largest first, those of at least `minShare`. */
export function dominantColours(counts: Map<ColourName, number>, top = 3, minShare = 0.05): Array<{ name: ColourName; share: number }> {
  let total = 0;
  for (const c of counts.values()) total += c;
  if (total === 0) return [];
  return [...counts.entries()]
    .map(([name, c]) => ({ name, share: c / total }))
    .filter((c) => c.share >= minShare)
    .sort((a, b) => b.share - a.share || (a.name < b.name ? -1 : 1))
    .slice(0, top);
}

export type MotionLevel = 'static' | 'low' | 'moderate' | 'high';

/** A word for a mean frame difference (0–1) between samples a fraction of a second apart. */
export function motionLevel(meanDifference: number): MotionLevel {
  if (meanDifference < 0.005) return 'static';
  if (meanDifference < 0.03) return 'low';
  if (meanDifference < 0.08) return 'moderate';
  return 'high';
}

/** A word for a mean brightness (0–1). */
export function brightnessWord(b: number): 'dark' | 'dim' | 'medium' | 'bright' {
  if (b < 0.2) return 'dark';
  if (b < 0.4) return 'dim';
  if (b < 0.7) return 'medium';
  return 'bright';
}
