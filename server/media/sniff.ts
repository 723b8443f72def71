/**
 * Content sniffing from magic bytes: what a file really is, whatever its
 * declared Content-Type says. Small and dependency-free; it only has to know
 * the formats the service accepts. Ambiguities the first bytes cannot settle
 * (audio vs video inside MP4/WebM, MP3 vs AAC behind an ID3 tag) are settled by
 * probing the stored file (see probe.ts).
 */

/** Container/codec families the service accepts. */
export type MediaFamily = 'png' | 'jpeg' | 'webp' | 'gif' | 'isobmff' | 'webm' | 'mp3' | 'wav' | 'ogg' | 'aac' | 'flac';

export type MediaKind = 'image' | 'video' | 'audio';

/** A supported declared type: its kind and the family its bytes must have. */
export interface SupportedType {
  mime: string;
  kind: MediaKind;
  family: MediaFamily;
}

const TYPES: SupportedType[] = [
  { mime: 'image/png', kind: 'image', family: 'png' },
  { mime: 'image/jpeg', kind: 'image', family: 'jpeg' },
  { mime: 'image/webp', kind: 'image', family: 'webp' },
  { mime: 'image/gif', kind: 'image', family: 'gif' },
  { mime: 'video/mp4', kind: 'video', family: 'isobmff' },
  { mime: 'video/webm', kind: 'video', family: 'webm' },
  { mime: 'video/quicktime', kind: 'video', family: 'isobmff' },
  { mime: 'audio/mpeg', kind: 'audio', family: 'mp3' },
  { mime: 'audio/wav', kind: 'audio', family: 'wav' },
  { mime: 'audio/ogg', kind: 'audio', family: 'ogg' },
  { mime: 'audio/mp4', kind: 'audio', family: 'isobmff' },
  { mime: 'audio/aac', kind: 'audio', family: 'aac' },
  { mime: 'audio/flac', kind: 'audio', family: 'flac' },
  { mime: 'audio/webm', kind: 'audio', family: 'webm' },
];

/** The canonical types, for messages. */
export const SUPPORTED_MIMES = TYPES.map((t) => t.mime);

/** Accepted aliases, mapped to the canonical type stored with the asset. */
const ALIASES = new Map<string, string>(
  Object.entries({
    'audio/x-wav': 'audio/wav',
    'audio/wave': 'audio/wav',
    'audio/vnd.wave': 'audio/wav',
    'audio/mp3': 'audio/mpeg',
    'audio/x-m4a': 'audio/mp4',
    'audio/m4a': 'audio/mp4',
    'audio/x-flac': 'audio/flac',
    'audio/aacp': 'audio/aac',
    'image/jpg': 'image/jpeg',
  }),
);

/** The supported type for a Content-Type header value (parameters ignored), or undefined. */
export function supportedType(contentType: string | undefined): SupportedType | undefined {
  if (!contentType) return undefined;
  const bare = contentType.split(';')[0]!.trim().toLowerCase();
  const mime = ALIASES.get(bare) ?? bare;
  return TYPES.find((t) => t.mime === mime);
}

/** Human names of the families, for error messages. */
export const FAMILY_NAMES: Record<MediaFamily, string> = {
  png: 'PNG image',
  jpeg: 'JPEG image',
  webp: 'WebP image',
  gif: 'GIF image',
  isobmff: 'MP4/QuickTime/M4A (ISO base media)',
  webm: 'WebM',
  mp3: 'MP3 audio',
  wav: 'WAV audio',
  ogg: 'Ogg',
  aac: 'AAC (ADTS) audio',
  flac: 'FLAC audio',
};

const ascii = (b: Buffer, start: number, end: number) => b.toString('latin1', start, end);

/** True for an MPEG audio frame header at `i` (layer I–III, not the ADTS "layer 00"). */
function mpegAudioFrame(b: Buffer, i: number): boolean {
  if (b.length < i + 4 || b[i] !== 0xff || (b[i + 1]! & 0xe0) !== 0xe0) return false;
  const version = (b[i + 1]! >> 3) & 3;
  const layer = (b[i + 1]! >> 1) & 3;
  const bitrate = b[i + 2]! >> 4;
  const rate = (b[i + 2]! >> 2) & 3;
  return version !== 1 && layer !== 0 && bitrate !== 15 && rate !== 3;
}

/** True for an AAC ADTS frame header at `i`. */
function adtsFrame(b: Buffer, i: number): boolean {
  return b.length >= i + 7 && b[i] === 0xff && (b[i + 1]! & 0xf6) === 0xf0 && ((b[i + 2]! >> 2) & 0xf) < 13;
}

/** The family the first bytes show, or undefined for anything unrecognised. */
export function sniff(head: Buffer): MediaFamily | undefined {
  const b = head;
  if (b.length < 4) return undefined;
  if (b.length >= 8 && b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))) return 'png';
  if (b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'jpeg';
  if (ascii(b, 0, 6) === 'GIF87a' || ascii(b, 0, 6) === 'GIF89a') return 'gif';
  if (ascii(b, 0, 4) === 'RIFF' && b.length >= 12) {
    if (ascii(b, 8, 12) === 'WEBP') return 'webp';
    if (ascii(b, 8, 12) === 'WAVE') return 'wav';
    return undefined;
  }
  if (ascii(b, 0, 4) === 'OggS') return 'ogg';
  if (ascii(b, 0, 4) === 'fLaC') return 'flac';
  if (b.length >= 12 && ascii(b, 4, 8) === 'ftyp') return 'isobmff';
  // QuickTime files from older tools start with other top-level atoms.
  if (b.length >= 8 && ['moov', 'mdat', 'wide', 'free', 'skip'].includes(ascii(b, 4, 8))) return 'isobmff';
  if (b[0] === 0x1a && b[1] === 0x45 && b[2] === 0xdf && b[3] === 0xa3) {
    // EBML: WebM is the Matroska profile whose DocType is "webm".
    return ascii(b, 0, Math.min(b.length, 64)).includes('webm') ? 'webm' : undefined;
  }
  if (ascii(b, 0, 3) === 'ID3' && b.length >= 10) {
    // Skip the ID3v2 tag (syncsafe size) and look at the first frame when it is in view.
    const size = ((b[6]! & 0x7f) << 21) | ((b[7]! & 0x7f) << 14) | ((b[8]! & 0x7f) << 7) | (b[9]! & 0x7f);
    const at = 10 + size + ((b[5]! & 0x10) !== 0 ? 10 : 0);
    if (adtsFrame(b, at)) return 'aac';
    return 'mp3'; // an ID3 tag whose frame is out of view: the probe confirms the codec
  }
  if (ascii(b, 0, 4) === 'ADIF') return 'aac';
  if (adtsFrame(b, 0)) return 'aac';
  if (mpegAudioFrame(b, 0)) return 'mp3';
  return undefined;
}
