/** Text generation pieces on their own: pricing, scenario markers, tokens, the local stand-in, the upstream SSE reader. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { conservativeMaximum, measuredCharge } from '../../server/domain/text.ts';
import { findScenario, scenarioOf, stripScenarios } from '../../server/domain/scenarios.ts';
import { chatPromptTokens, chatPromptTokenUpperBound, countTokens, decodeTokens, encodeText, tokenDeltas } from '../../server/tokens.ts';
import { composeAnswer, LocalTextProvider } from '../../server/providers/text/local.ts';
import { sseData } from '../../server/providers/text/sse-reader.ts';
import { chatCompletionsUrl } from '../../server/providers/text/upstream.ts';
import type { TextEvent } from '../../server/providers/text/types.ts';

const rates = { inputPerThousandTokens: 1, outputPerThousandTokens: 2 };

async function collect(events: AsyncIterable<TextEvent>): Promise<TextEvent[]> {
  const out: TextEvent[] = [];
  for await (const e of events) out.push(e);
  return out;
}

describe('text pricing', () => {
  it('when quoting, then the reservation is the whole-Gem ceiling of the maximum, at least 1', () => {
    assert.equal(conservativeMaximum(rates, 20, 4096), 9);
    assert.equal(conservativeMaximum(rates, 0, 1), 1);
    assert.equal(conservativeMaximum(rates, 1000, 0), 1);
    assert.equal(conservativeMaximum(rates, 1001, 0), 2);
    assert.equal(conservativeMaximum({ inputPerThousandTokens: 0.1, outputPerThousandTokens: 0.2 }, 10_000, 5000), 2);
  });

  it('when any usage within the bounds is measured, then its charge never exceeds the reservation', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 200_000 }),
        fc.integer({ min: 1, max: 8192 }),
        fc.double({ min: 0, max: 50, noNaN: true }),
        fc.double({ min: 0, max: 50, noNaN: true }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (bound, max, inRate, outRate, fp, fc2) => {
          const r = { inputPerThousandTokens: inRate, outputPerThousandTokens: outRate };
          const prompt = Math.floor(bound * fp);
          const completion = Math.floor(max * fc2);
          const usage = { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
          return measuredCharge(r, usage, Infinity) <= conservativeMaximum(r, bound, max); // unclamped: usage within the bounds costs no more than the quote
        },
      ),
    );
  });
});

describe('scenario markers', () => {
  it('when text has markers, then their names and arguments come back in order', () => {
    assert.deepEqual(scenarioOf('a [[scenario:stream-error]] b [[scenario:processing:5]] [[scenario:x:1:two]]', true), [
      { name: 'stream-error', args: [] },
      { name: 'processing', args: ['5'] },
      { name: 'x', args: ['1', 'two'] },
    ]);
    assert.equal(findScenario(scenarioOf('[[scenario:uncertain]]', true), 'uncertain')?.name, 'uncertain');
  });

  it('when scenarios are disabled or the marker is malformed, then nothing is found', () => {
    assert.deepEqual(scenarioOf('[[scenario:uncertain]]', false), []);
    assert.deepEqual(scenarioOf('[scenario:uncertain] [[scenario:]] [[Scenario:x]] [[scenario:UP]]', true), []);
  });

  it('when stripping, then markers leave and the text stays', () => {
    assert.equal(stripScenarios('Fail me  [[scenario:stream-error]] now', true), 'Fail me now');
    assert.equal(stripScenarios('keep [[scenario:uncertain]]', false), 'keep [[scenario:uncertain]]');
  });
});

describe('tokens', () => {
  it('when text is split into deltas, then they are whole characters and join into the decoded text', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 60 }), (text) => {
        const tokens = encodeText(text);
        const deltas = [...tokenDeltas(tokens)];
        assert.equal(deltas.map((d) => d.text).join(''), decodeTokens(tokens));
        assert.equal(
          deltas.reduce((n, d) => n + d.tokens, 0),
          tokens.length,
        );
      }),
    );
    // A real U+FFFD before a character split across tokens (once found by fast-check).
    const replacement = encodeText('\uFFFD\u045D');
    assert.equal([...tokenDeltas(replacement)].map((d) => d.text).join(''), '\uFFFD\u045D');
    const emoji = [...tokenDeltas(encodeText('🚀🌋 ünï 日本語'))];
    assert.ok(emoji.every((d) => !d.text.includes('\uFFFD')));
  });

  it('when bounding a prompt, then the byte bound is at least the exact count', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ role: fc.constantFrom('system', 'user', 'assistant'), content: fc.string({ maxLength: 200 }) }), { minLength: 1, maxLength: 5 }),
        (messages) => {
          return chatPromptTokenUpperBound(messages) >= chatPromptTokens(messages);
        },
      ),
    );
    assert.equal(countTokens(''), 0);
  });
});

describe('local stand-in provider', () => {
  const provider = new LocalTextProvider({ delayMs: 0 });
  const messages = [
    { role: 'system' as const, content: 'Answer in French.' },
    { role: 'user' as const, content: 'Hello there' },
  ];

  it('when asked, then it restates, transforms and notes the system prompt, with exact usage', async () => {
    const events = await collect(provider.generate({ model: 'm', messages, max_tokens: 4096 }));
    const text = events.flatMap((e) => (e.type === 'delta' ? [e.content] : [])).join('');
    assert.equal(text, composeAnswer(messages));
    assert.match(text, /not a language model/);
    assert.match(text, /HELLO THERE/);
    assert.match(text, /there Hello/);
    assert.match(text, /Answer in French\./);
    const finish = events.at(-1);
    assert.ok(finish?.type === 'finish');
    assert.equal(finish.finish_reason, 'stop');
    assert.deepEqual(finish.usage, {
      prompt_tokens: chatPromptTokens(messages),
      completion_tokens: countTokens(text),
      total_tokens: chatPromptTokens(messages) + countTokens(text),
    });
  });

  it('when max_tokens is short, then it stops at that many tokens with length', async () => {
    const events = await collect(provider.generate({ model: 'm', messages, max_tokens: 3 }));
    const finish = events.at(-1);
    assert.ok(finish?.type === 'finish');
    assert.equal(finish.finish_reason, 'length');
    assert.equal(finish.usage?.completion_tokens, 3);
  });

  it('when json_object is asked, then the answer parses', () => {
    const parsed = JSON.parse(composeAnswer(messages, 'json_object')) as Record<string, unknown>;
    assert.equal(parsed.restated, 'Hello there');
    assert.equal(parsed.systemInstructions, 'Answer in French.');
  });
});

describe('upstream plumbing', () => {
  it('when a base URL is configured, then the chat-completions endpoint is derived from it', () => {
    assert.equal(chatCompletionsUrl('http://h:11434'), 'http://h:11434/v1/chat/completions');
    assert.equal(chatCompletionsUrl('http://h:8000/v1/'), 'http://h:8000/v1/chat/completions');
    assert.equal(chatCompletionsUrl('https://api.example/v1/chat/completions'), 'https://api.example/v1/chat/completions');
  });

  it('when SSE arrives split at any byte with LF, CRLF or CR line ends, then the same data comes out', async () => {
    const stream = ': comment\n\ndata: a\n\ndata: b1\ndata: b2\n\nevent: x\ndata: c\n\ndata: [DONE]\n\n';
    for (const eol of ['\n', '\r\n', '\r']) {
      const text = stream.replaceAll('\n', eol);
      const bytes = new TextEncoder().encode(text);
      for (let cut = 1; cut < bytes.length; cut += 3) {
        async function* body() {
          yield bytes.slice(0, cut);
          yield bytes.slice(cut);
        }
        const out: string[] = [];
        for await (const d of sseData(body())) out.push(d);
        assert.deepEqual(out, ['a', 'b1\nb2', 'c', '[DONE]'], `eol ${JSON.stringify(eol)} cut ${cut}`);
      }
    }
  });
});
