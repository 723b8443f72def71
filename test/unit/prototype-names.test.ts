/**
 * User text that names an inherited property (`constructor`, `__proto__`, …) is
 * only ever text: every table looked up with it answers "not found".
 * Property tests over words mixed from those names, colour words and
 * arbitrary strings.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { promptPalette } from '../../server/providers/image/local.ts';
import { rng } from '../../server/providers/random.ts';
import { espeakLanguage } from '../../server/providers/audio/speech.ts';
import { supportedType } from '../../server/media/sniff.ts';
import { planMusic } from '../../server/providers/audio/music.ts';
import { hintFor } from '../../client/errors.ts';
import { guessContentType } from '../../client/uploads.ts';
import { outputFileName } from '../../client/downloads.ts';
import { PROTOTYPE_NAMES } from '../helpers/prototype-names.ts';
import { voiceName } from '../../server/domain/voices.ts';

/** Words: inherited property names in any case, colour words and anything else. */
const word = fc.oneof(
  fc.constantFrom(...PROTOTYPE_NAMES).chain((w) => fc.constantFrom(w, w.toUpperCase(), w[0]!.toUpperCase() + w.slice(1))),
  fc.constantFrom('red', 'blue', 'ocean', 'gold'),
  fc.string({ maxLength: 12 }),
);
const prompt = fc.array(word, { minLength: 1, maxLength: 8 }).map((ws) => ws.join(' '));
const SEED = 16_016;

describe('user text naming inherited properties', () => {
  it('when a prompt holds such words, then the image palette is five real colours (never NaN, never all black)', () => {
    fc.assert(
      fc.property(prompt, fc.integer({ min: 0, max: 2 ** 31 }), (p, seed) => {
        const palette = promptPalette(p, rng(seed));
        assert.equal(palette.length, 5);
        for (const c of palette) for (const v of c) assert.ok(Number.isInteger(v) && v >= 0 && v <= 255, `${p}: ${c}`);
        assert.ok(
          palette.some((c) => c.some((v) => v > 16)),
          `${p}: not all black`,
        );
      }),
      { seed: SEED, numRuns: 500 },
    );
  });

  it('when a language tag is such a word, then eSpeak gets a language it speaks', () => {
    fc.assert(
      fc.property(word, (w) => {
        const lang = espeakLanguage(w);
        assert.equal(typeof lang, 'string');
        assert.match(lang, /^[a-z]{2,3}(-[a-z0-9-]+)?$/);
      }),
      { seed: SEED, numRuns: 300 },
    );
  });

  it('when a Content-Type or file name is such a word, then it is an unsupported type, not a function', () => {
    fc.assert(
      fc.property(word, (w) => {
        assert.equal(supportedType(w), undefined);
        assert.equal(guessContentType(undefined, `clip.${w}`), undefined);
        assert.match(outputFileName('task_x', 0, w), /\.bin$/);
        assert.equal(typeof hintFor(w), 'string');
      }),
      { seed: SEED, numRuns: 300 },
    );
  });

  it('when a music prompt, style or title holds such words, then the plan is a finite, playable one', () => {
    fc.assert(
      fc.property(prompt, prompt, (p, style) => {
        const plan = planMusic(
          {
            prompt: p,
            musicMode: 'advanced',
            instrumental: 'off',
            style,
            title: style.slice(0, 80),
            negativeTags: null,
            vocalGender: 'auto',
            durationSeconds: 30,
            coverAudio: null,
            seed: 1,
          },
          null,
        );
        assert.ok(Number.isFinite(plan.bpm) && plan.bpm > 0, `bpm ${plan.bpm}`);
        assert.ok(Number.isInteger(plan.root));
        assert.ok(['piano', 'pluck', 'organ', 'saw', 'bell'].includes(plan.lead));
      }),
      { seed: SEED, numRuns: 200 },
    );
  });
});

describe('user text that storage cannot hold', () => {
  it('when an uploaded voice file name carries control characters (NUL, BEL), then the voice name drops them', () => {
    assert.equal(voiceName('a\u0000b\u0007c.wav', new Date(0)), 'abc');
    assert.equal(voiceName('\u0000.wav', new Date(0)), 'Voice 1970-01-01 00:00:00 UTC');
  });
});
