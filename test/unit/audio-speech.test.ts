/** The speech generator's voice mapping and markup (no synthesis needed). */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { espeakLanguage, pitchSetting, prosodyMarkup, voiceSettings } from '../../server/providers/audio/speech.ts';

describe('speech voice mapping', () => {
  it('when a voice language is a BCP 47 tag, then eSpeak gets its closest language', () => {
    assert.equal(espeakLanguage('en-US'), 'en-us');
    assert.equal(espeakLanguage('en-AU'), 'en-gb');
    assert.equal(espeakLanguage('es-MX'), 'es-419');
    assert.equal(espeakLanguage('fr-CA'), 'fr-fr');
    assert.equal(espeakLanguage('zh-CN'), 'cmn');
    assert.equal(espeakLanguage('de-DE'), 'de');
    assert.equal(espeakLanguage('xx-YY'), 'en-us');
    assert.equal(espeakLanguage(null), 'en-us');
  });

  it('when the target pitch rises, then eSpeak’s pitch setting rises, within 0–99', () => {
    for (const register of ['male', 'female'] as const) {
      const settings = [60, 90, 120, 180, 250, 400].map((hz) => pitchSetting(register, hz));
      assert.deepEqual(
        [...settings].sort((a, b) => a - b),
        settings,
      );
      assert.ok(settings.every((p) => p >= 0 && p <= 99));
    }
    assert.equal(pitchSetting('male', 100.6), 50);
  });

  it('when a voice is uploaded, then its measured pitch decides register and pitch; a catalog voice uses its traits', () => {
    const upload = (medianPitchHz: number) =>
      voiceSettings({ id: 'v', source: 'upload', language: 'en', traits: { medianPitchHz, syllablesPerSecond: 4.3 }, blobSha256: 'x' });
    assert.deepEqual([upload(95).register, upload(95).pitchHz, upload(95).rate], ['male', 95, 1]);
    assert.equal(upload(210).register, 'female');
    const catalog = voiceSettings({
      id: 'v',
      source: 'catalog',
      language: 'en-GB',
      traits: { gender: 'female', pitchHz: 211, rate: 1.04, volumeDb: -1 },
      blobSha256: null,
    });
    assert.deepEqual(catalog, { language: 'en-gb', register: 'female', pitchHz: 211, rate: 1.04, volumeDb: -1 });
  });

  it('when text has markup characters, then the SSML escapes them; temperature 0 adds no prosody, 1 varies it deterministically', () => {
    const text = 'Tom & Jerry <b>run</b>. Then they stop, "finally".';
    assert.equal(prosodyMarkup(text, 0, 1), '<speak>Tom &#38; Jerry &#60;b&#62;run&#60;/b&#62;. Then they stop, &#34;finally&#34;.</speak>');
    const hot = prosodyMarkup(text, 1, 1);
    assert.match(hot, /<prosody pitch="[+-]\d+%" rate="\d+%">/);
    assert.equal(hot, prosodyMarkup(text, 1, 1));
    assert.notEqual(hot, prosodyMarkup(text, 1, 2));
  });
});
