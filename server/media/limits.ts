/**
 * What the server agrees to decode (a 995 KB PNG declaring 16000×16000
 * RGBA cost 1 GB of memory and 15 s at upload, because the pixels were decoded
 * before anything looked at the size).
 *
 * The rule: media is measured from its header before any pixel or sample is
 * decoded, and refused above these limits with a message naming them; what is
 * decoded is bounded again by libvips itself (`limitInputPixels`) and by a gate
 * on how much decoding runs at once. The contract documents the same numbers
 * (POST /api/generate/assets).
 */

/** Most pixels an image may have (one frame), e.g. 8000×5000. */
export const MAX_IMAGE_PIXELS = 40_000_000;
/** Longest side of an image or video frame, in pixels. */
export const MAX_IMAGE_SIDE = 16_384;
/**
 * Images that cannot be decoded a few lines at a time (interlaced PNG,
 * progressive JPEG, WebP, GIF) are held whole while decoding: at most this many
 * decoded bytes (40 megapixels of 8-bit RGBA).
 */
export const MAX_WHOLE_FRAME_BYTES = 160 * 1024 * 1024;
/** Most pixels of a video frame (8K UHD is 33 megapixels). */
export const MAX_VIDEO_PIXELS = MAX_IMAGE_PIXELS;
/** Longest audio or video asset, in seconds. */
export const MAX_MEDIA_SECONDS = 3600;
/** Most streams (video, audio, subtitles, data) in one audio or video file. */
export const MAX_MEDIA_STREAMS = 16;

/** sharp input options for anything the server decodes: never more than the limit. */
export const SHARP_INPUT = { limitInputPixels: MAX_IMAGE_PIXELS, sequentialRead: true } as const;

/** Media over a limit; its message names the limit and is safe to show. */
export class MediaLimitError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MediaLimitError';
  }
}

const n = (value: number) => value.toLocaleString('en-US');

/** Throws MediaLimitError when a `width`×`height` image or frame is over the limits. */
export function checkDimensions(what: 'image' | 'video', width: number, height: number): void {
  const maxPixels = what === 'image' ? MAX_IMAGE_PIXELS : MAX_VIDEO_PIXELS;
  if (width > MAX_IMAGE_SIDE || height > MAX_IMAGE_SIDE || width * height > maxPixels) {
    throw new MediaLimitError(
      `The ${what} is ${width}×${height} pixels (${n(width * height)}); the limit is ${n(maxPixels)} pixels and ${n(MAX_IMAGE_SIDE)} per side.`,
    );
  }
}

/**
 * A FIFO gate on a shared budget (bytes of decoding memory, or slots): each
 * holder takes `cost` units, capped at the capacity so anything may run once it
 * is alone. Waiters are served in arrival order, so a large decode is not
 * starved by a stream of small ones.
 */
export class Gate {
  private used = 0;
  private readonly waiting: Array<{ cost: number; start: () => void }> = [];

  constructor(readonly capacity: number) {}

  /** Runs `fn` once `cost` units are free, and frees them when it settles. */
  async run<T>(cost: number, fn: () => Promise<T>): Promise<T> {
    const units = Math.min(Math.max(cost, 1), this.capacity);
    if (this.waiting.length > 0 || this.used + units > this.capacity) {
      await new Promise<void>((start) => this.waiting.push({ cost: units, start }));
    } else {
      this.used += units;
    }
    try {
      return await fn();
    } finally {
      this.used -= units;
      this.admit();
    }
  }

  private admit(): void {
    while (this.waiting.length > 0 && this.used + this.waiting[0]!.cost <= this.capacity) {
      const next = this.waiting.shift()!;
      this.used += next.cost;
      next.start();
    }
  }
}
