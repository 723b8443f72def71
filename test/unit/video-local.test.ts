/** Video units: frame sizes, the per-second quote, and the local generator's ffmpeg plan. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { videoDimensions, videoQuote } from '../../server/domain/media-video.ts';
import { ffmpegArgs, type LocalVideoRequest } from '../../server/providers/video/local.ts';

const request = (over: Partial<LocalVideoRequest> = {}): LocalVideoRequest => ({
  prompt: 'a red fox',
  mode: 'text-to-video',
  duration: 4,
  width: 1280,
  height: 720,
  fps: 24,
  audio: false,
  seed: null,
  sourceImage: null,
  endFrame: null,
  referenceVideos: [],
  referenceAudios: [],
  referenceImages: [],
  ...over,
});

describe('video frame sizes and quotes', () => {
  it('when a ratio and resolution are asked for, then the short edge is the resolution and both edges are even', () => {
    const cases: Array<[string, string, number, number]> = [
      ['16:9', '480p', 854, 480],
      ['16:9', '720p', 1280, 720],
      ['16:9', '1080p', 1920, 1080],
      ['9:16', '720p', 720, 1280],
      ['9:16', '480p', 480, 854],
      ['1:1', '720p', 720, 720],
      ['1:1', '1080p', 1080, 1080],
    ];
    for (const [ratio, resolution, width, height] of cases) {
      assert.deepEqual(videoDimensions(ratio, resolution), { width, height }, `${ratio} ${resolution}`);
    }
  });

  it('when audio is asked for, then the quote adds audio per second; fractions round up', () => {
    const pricing = { perSecond: { '480p': 2, '720p': 4, '1080p': 8 }, audioPerSecond: 1 };
    assert.equal(videoQuote(pricing, '720p', 4, false), 16);
    assert.equal(videoQuote(pricing, '720p', 4, true), 20);
    assert.equal(videoQuote(pricing, '1080p', 8, true), 72);
    assert.equal(videoQuote({ perSecond: { '480p': 1.5 } }, '480p', 3, true), 5);
  });
});

describe('local video generator plan', () => {
  const input = (args: string[]) => args[args.indexOf('-filter_complex') + 1];

  it('when the prompt and seed repeat, then the plan repeats; when the prompt or seed changes, then it differs', () => {
    const inputs = { referenceColours: [] };
    assert.deepEqual(ffmpegArgs(request(), inputs, 'out.mp4'), ffmpegArgs(request(), inputs, 'out.mp4'));
    assert.notEqual(input(ffmpegArgs(request(), inputs, 'o')), input(ffmpegArgs(request({ prompt: 'a blue whale' }), inputs, 'o')));
    assert.notEqual(input(ffmpegArgs(request(), inputs, 'o')), input(ffmpegArgs(request({ seed: 1 }), inputs, 'o')));
  });

  it('when audio is off, then no audio track is written; when on, then AAC', () => {
    const off = ffmpegArgs(request(), { referenceColours: [] }, 'o');
    assert.ok(off.includes('-an'));
    const on = ffmpegArgs(request({ audio: true }), { referenceColours: [] }, 'o');
    assert.ok(on.includes('aac') && !on.includes('-an'));
  });

  it('when a source image and an end frame are given, then both are inputs and the video is cut at exactly duration × fps frames', () => {
    const args = ffmpegArgs(request({ mode: 'image-to-video' }), { sourceImage: '/s.png', endFrame: '/e.png', referenceColours: [] }, 'o');
    assert.ok(args.includes('/s.png') && args.includes('/e.png'));
    assert.match(input(args), /trim=end_frame=96/);
    assert.match(input(args), /fade=t=in:s=0:/, 'the motion fades in over the source from frame 0');
    assert.match(input(args), /fade=t=in:s=77:n=18:alpha=1/, 'the end frame is fully in on the last frame (95)');
  });
});
