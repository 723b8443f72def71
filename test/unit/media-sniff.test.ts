/** Content sniffing by magic bytes (server/media/sniff.ts). */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { sniff, supportedType } from '../../server/media/sniff.ts';
import * as media from '../helpers/media.ts';

const head = (file: string) => fs.readFileSync(file).subarray(0, 4100);

describe('media sniffing', () => {
  it('when real files of each supported format are sniffed, then their family is found', async () => {
    for (const f of ['png', 'jpeg', 'webp', 'gif'] as const) assert.equal(sniff(head(await media.image(f))), f);
    assert.equal(sniff(head(await media.video('mp4'))), 'isobmff');
    assert.equal(sniff(head(await media.video('mov'))), 'isobmff');
    assert.equal(sniff(head(await media.video('webm'))), 'webm');
    const audio = { mp3: 'mp3', wav: 'wav', ogg: 'ogg', m4a: 'isobmff', aac: 'aac', flac: 'flac', webm: 'webm' } as const;
    for (const [format, family] of Object.entries(audio)) {
      assert.equal(sniff(head(await media.audio(format as keyof typeof audio))), family, format);
    }
  });

  it('when bytes are empty, short or unknown, then nothing is found', () => {
    assert.equal(sniff(Buffer.alloc(0)), undefined);
    assert.equal(sniff(Buffer.from([0x89, 0x50])), undefined);
    assert.equal(sniff(Buffer.from('hello world, plain text')), undefined);
    assert.equal(sniff(Buffer.from('RIFF\0\0\0\0AVI LIST')), undefined);
    // Matroska that is not WebM.
    assert.equal(sniff(Buffer.concat([Buffer.from([0x1a, 0x45, 0xdf, 0xa3]), Buffer.from('\x42\x82\x88matroska')])), undefined);
  });

  it('when MPEG frame headers are sniffed, then MP3 (layer III) and AAC ADTS (layer 0) are told apart', () => {
    assert.equal(sniff(Buffer.from([0xff, 0xfb, 0x90, 0x64, 0, 0, 0, 0])), 'mp3');
    assert.equal(sniff(Buffer.from([0xff, 0xf1, 0x50, 0x80, 0x02, 0x1f, 0xfc, 0])), 'aac');
  });

  it('when Content-Type values are resolved, then aliases and parameters map to canonical types', () => {
    assert.equal(supportedType('audio/x-wav')?.mime, 'audio/wav');
    assert.equal(supportedType('IMAGE/PNG; foo=bar')?.mime, 'image/png');
    assert.equal(supportedType('audio/x-m4a')?.family, 'isobmff');
    assert.equal(supportedType('image/bmp'), undefined);
    assert.equal(supportedType(undefined), undefined);
  });
});
