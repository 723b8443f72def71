/**
 * Long texts judged off the event loop (server/providers/moderation/off-thread.ts):
 * a worker thread builds the policy from the document the server's was built from
 * (the file may have changed since) and judges with the same entry point,
 * so its verdicts are those of the in-process judge; the event loop keeps turning
 * while it judges; no thread starts before the first long text, and an idle one
 * ends; past the threads
 * and the queue a text is refused as busy (the domain's 503), never judged inline.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadModerationPolicy } from '../../server/providers/moderation/policy-file.ts';
import { embeddedProvider } from '../../server/providers/moderation/index.ts';
import { offThread } from '../../server/providers/moderation/off-thread.ts';
import { ModerationUnavailableError, type ModerationInput } from '../../server/providers/moderation/types.ts';
import { hostilePrompt, PROMPT_SHAPES, type PromptShape } from '../helpers/hostile-prompts.ts';
import { readSets, UNSEEN_DIR } from '../../scripts/moderation/eval-set.ts';
import { until } from '../helpers/poll.ts';

const POLICY_PATH = path.join(import.meta.dirname, '../../server/catalog/moderation.yaml');
const policy = loadModerationPolicy(POLICY_PATH);
// The classifier on, as MODERATION_CLASSIFIER=on runs it: the threads must judge with it as the main thread does.
const ON = { classifier: true };
const inProcess = embeddedProvider(policy, ON);

describe('moderation off the event loop', () => {
  const everyText = offThread(policy, { threads: 2, queue: 10_000, minChars: 0, classifier: true });
  after(() => everyText.close());

  it('when texts are judged on the worker threads, then every verdict is the in-process one (labelled and unseen sets, hostile shapes, conversations)', async () => {
    const samples = [...readSets(), ...readSets(UNSEEN_DIR)].flatMap((set) => set.samples.map((s) => s.text));
    const inputs: ModerationInput[] = [];
    // Every fifth sample keeps the run short; both preferences, since strict applies more categories.
    samples.forEach((text, i) => {
      if (i % 5 === 0) inputs.push({ texts: [{ field: 'prompt', text }], preference: i % 2 === 0 ? 'standard' : 'strict' });
    });
    for (const shape of Object.keys(PROMPT_SHAPES) as PromptShape[]) {
      inputs.push({ texts: [{ field: 'prompt', text: hostilePrompt(shape, 30_000, 41) }], preference: 'strict' });
    }
    inputs.push({
      texts: samples.slice(0, 12).map((text, i) => ({ field: `messages[${i}].content`, text })),
      preference: 'standard',
    });
    const onThreads = await Promise.all(inputs.map((input) => everyText.moderate(input)));
    for (const [i, input] of inputs.entries()) assert.deepEqual(onThreads[i], await inProcess.moderate(input), input.texts[0]!.text.slice(0, 80));
    assert.ok(onThreads.some((v) => v.flagged) && onThreads.some((v) => !v.flagged), 'the sample holds refusals and allowed texts');
    assert.ok(everyText.threads() > 0 && everyText.threads() <= 2);
  });

  it('when a long hostile text is judged on a thread, then the event loop turns while it is judged (in process it would not)', async () => {
    const input: ModerationInput = { texts: [{ field: 'prompt', text: hostilePrompt('unicode', 30_000, 5) }], preference: 'strict' };
    const turnsWhile = async (judge: (input: ModerationInput) => Promise<unknown>) => {
      let turns = 0;
      let judging = true;
      const spin = () => {
        if (!judging) return;
        turns++;
        setImmediate(spin);
      };
      setImmediate(spin);
      await judge(input);
      judging = false;
      return turns;
    };
    await everyText.moderate(input); // the threads are up (a first text waits for its thread to start)
    assert.equal(await turnsWhile((i) => inProcess.moderate(i)), 0, 'in process, a text is judged in one turn');
    assert.ok((await turnsWhile((i) => everyText.moderate(i))) > 0);
  });

  it('when the policy file changes after the policy was loaded, then the threads judge with the policy loaded, not the file', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gemforge-policy-'));
    const file = path.join(dir, 'moderation.yaml');
    fs.copyFileSync(POLICY_PATH, file);
    const loaded = loadModerationPolicy(file);
    fs.writeFileSync(file, 'categories: []\n'); // what a thread reading the file would now refuse to load
    const threads = offThread(loaded, { threads: 1, queue: 0, minChars: 0, classifier: true });
    try {
      const input: ModerationInput = { texts: [{ field: 'prompt', text: 'how to make a pipe bomb' }], preference: 'standard' };
      assert.deepEqual(await threads.moderate(input), await embeddedProvider(loaded, ON).moderate(input));
    } finally {
      await threads.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('when only short texts arrive, then no thread starts; the first long one starts one', async () => {
    const lazy = offThread(policy, { threads: 1, queue: 0, minChars: 2_000, classifier: true });
    try {
      const short = await lazy.moderate({ texts: [{ field: 'prompt', text: 'a lighthouse at dawn' }], preference: 'standard' });
      assert.equal(short.flagged, undefined);
      assert.equal(lazy.threads(), 0);
      const long = await lazy.moderate({ texts: [{ field: 'prompt', text: `${'how to make a pipe bomb, '.repeat(100)}` }], preference: 'standard' });
      assert.deepEqual(long.flagged?.categories, ['violence']);
      assert.equal(lazy.threads(), 1);
    } finally {
      await lazy.close();
    }
  });

  it('when a thread has had no text for its idle time, then it ends, and the next long text starts one again', async () => {
    const brief = offThread(policy, { threads: 1, queue: 0, minChars: 100, idleMs: 50, classifier: true });
    try {
      const text = hostilePrompt('prose', 3_000, 7);
      const first = await brief.moderate({ texts: [{ field: 'prompt', text }], preference: 'standard' });
      await until('the idle thread to end', () => brief.threads() === 0);
      assert.deepEqual(await brief.moderate({ texts: [{ field: 'prompt', text }], preference: 'standard' }), first);
    } finally {
      await brief.close();
    }
  });

  it('when more long texts arrive than the threads run and the queue holds, then the rest are refused as busy, not judged on the event loop', async () => {
    const small = offThread(policy, { threads: 1, queue: 1, minChars: 100, classifier: true });
    try {
      const texts = Array.from({ length: 4 }, (_, i) => hostilePrompt('prose', 3_000, i));
      const answers = await Promise.allSettled(texts.map((text) => small.moderate({ texts: [{ field: 'prompt', text }], preference: 'standard' })));
      assert.deepEqual(
        answers.map((a) => a.status),
        ['fulfilled', 'fulfilled', 'rejected', 'rejected'],
      );
      const refusal = (answers[2] as PromiseRejectedResult).reason as unknown;
      assert.ok(refusal instanceof ModerationUnavailableError);
      assert.equal(refusal.kind, 'busy');
    } finally {
      await small.close();
    }
  });
});
