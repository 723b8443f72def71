/**
 * server/providers/moderation/dictionary.ts: the build's copy of the English
 * dictionary is the dictionary the word list gives, and a copy made from
 * another word list (its size or time differ) or a broken one is not used.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fromBuild, fromWordList, inDictionary, writeBuiltDictionary } from '../../server/providers/moderation/dictionary.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-dictionary-'));

describe('the moderation dictionary', () => {
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('when the build writes the dictionary, then reading it gives what building it from the word list gives', () => {
    writeBuiltDictionary(dir);
    const built = fromBuild(dir);
    assert.ok(built, 'the copy is read');
    const fresh = fromWordList();
    assert.equal(built.text, fresh.text);
    assert.deepEqual(built.starts, fresh.starts);
    assert.deepEqual(built.filter, fresh.filter);
    assert.equal(inDictionary('aardvark'), true);
    assert.equal(inDictionary('murdr'), false);
  });

  it('when the copy was made from another word list or by other code, or its index is cut short, then it is not used', () => {
    writeBuiltDictionary(dir);
    const source = path.join(dir, 'source.json');
    const note = JSON.parse(fs.readFileSync(source, 'utf8')) as { mtimeMs: number };
    fs.writeFileSync(source, JSON.stringify({ ...note, mtimeMs: note.mtimeMs + 1 }));
    assert.equal(fromBuild(dir), undefined, 'another word list');
    fs.writeFileSync(source, JSON.stringify({ ...note, code: 'made by another version of dictionary.ts' }));
    assert.equal(fromBuild(dir), undefined, 'another version of the code');
    writeBuiltDictionary(dir);
    fs.truncateSync(path.join(dir, 'index.bin'), 1024);
    assert.equal(fromBuild(dir), undefined, 'a cut index');
    fs.rmSync(dir, { recursive: true, force: true });
    assert.equal(fromBuild(dir), undefined, 'no copy');
  });
});
