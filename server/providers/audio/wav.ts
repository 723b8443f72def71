/** Mono PCM in memory: reading and writing 16-bit WAV, levels and gain. */

export interface MonoPcm {
  sampleRate: number;
  samples: Float32Array;
}

/** Reads a PCM WAV (16-bit, any channel count; channels are averaged to mono). */
export function parseWav(buf: Buffer): MonoPcm {
  if (buf.toString('latin1', 0, 4) !== 'RIFF' || buf.toString('latin1', 8, 12) !== 'WAVE') throw new Error('not a WAV file');
  let offset = 12;
  let channels = 1;
  let sampleRate = 0;
  let bits = 16;
  while (offset + 8 <= buf.length) {
    const id = buf.toString('latin1', offset, offset + 4);
    let size = buf.readUInt32LE(offset + 4);
    const body = offset + 8;
    if (id === 'fmt ') {
      channels = buf.readUInt16LE(body + 2);
      sampleRate = buf.readUInt32LE(body + 4);
      bits = buf.readUInt16LE(body + 14);
    } else if (id === 'data') {
      if (bits !== 16) throw new Error(`unsupported WAV sample size ${bits}`);
      // Streamed WAVs (espeak writing to a pipe) may leave the size unset.
      if (size === 0 || size === 0xffffffff || body + size > buf.length) size = buf.length - body;
      const frames = Math.floor(size / (2 * channels));
      const samples = new Float32Array(frames);
      for (let i = 0; i < frames; i++) {
        let sum = 0;
        for (let c = 0; c < channels; c++) sum += buf.readInt16LE(body + (i * channels + c) * 2);
        samples[i] = sum / channels / 32768;
      }
      return { sampleRate, samples };
    }
    offset = body + size + (size % 2);
  }
  throw new Error('WAV file has no data chunk');
}

/** Encodes mono float samples as a 16-bit PCM WAV (clipped to [-1, 1]). */
export function encodeWav(pcm: MonoPcm): Buffer {
  const { samples, sampleRate } = pcm;
  const data = samples.length * 2;
  const buf = Buffer.alloc(44 + data);
  buf.write('RIFF', 0, 'latin1');
  buf.writeUInt32LE(36 + data, 4);
  buf.write('WAVE', 8, 'latin1');
  buf.write('fmt ', 12, 'latin1');
  buf.writeUInt32LE(16, 16);
  buf.writeUInt16LE(1, 20);
  buf.writeUInt16LE(1, 22);
  buf.writeUInt32LE(sampleRate, 24);
  buf.writeUInt32LE(sampleRate * 2, 28);
  buf.writeUInt16LE(2, 32);
  buf.writeUInt16LE(16, 34);
  buf.write('data', 36, 'latin1');
  buf.writeUInt32LE(data, 40);
  for (let i = 0; i < samples.length; i++) {
    const v = Math.max(-1, Math.min(1, samples[i]));
    buf.writeInt16LE(Math.round(v * 32767), 44 + i * 2);
  }
  return buf;
}

export function peak(samples: Float32Array): number {
  let p = 0;
  for (let i = 0; i < samples.length; i++) p = Math.max(p, Math.abs(samples[i]));
  return p;
}

export function rmsDb(samples: Float32Array): number {
  let sum = 0;
  for (let i = 0; i < samples.length; i++) sum += samples[i] * samples[i];
  return 10 * Math.log10(sum / Math.max(1, samples.length) + 1e-20);
}

/** Scales in place so the peak sits at `dbfs` (silence stays silence). */
export function normalizePeak(samples: Float32Array, dbfs: number): void {
  const p = peak(samples);
  if (p === 0) return;
  const k = 10 ** (dbfs / 20) / p;
  for (let i = 0; i < samples.length; i++) samples[i] *= k;
}

/** Applies a gain in dB in place. */
export function applyGainDb(samples: Float32Array, db: number): void {
  const k = 10 ** (db / 20);
  for (let i = 0; i < samples.length; i++) samples[i] *= k;
}

/** Halves the sample rate (pairwise average: a crude low-pass, enough for analysis). */
export function decimate2(pcm: MonoPcm): MonoPcm {
  const out = new Float32Array(Math.floor(pcm.samples.length / 2));
  for (let i = 0; i < out.length; i++) out[i] = (pcm.samples[2 * i] + pcm.samples[2 * i + 1]) / 2;
  return { sampleRate: pcm.sampleRate / 2, samples: out };
}
