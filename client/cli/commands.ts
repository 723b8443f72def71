/** One function per command, each a thin wiring of flags to the client and its helpers. */
import path from 'node:path';
import type { GemforgeClient, Model, Spent, Submission, Task } from '../client.ts';
import { isTerminal, TaskWaitAborted, TaskWaitTimeout } from '../tasks.ts';
import { saveTaskOutputs } from '../downloads.ts';
import { uploadAsset, uploadVoice } from '../uploads.ts';
import type { CliValues } from './main.ts';
import { printJson, type CliIo } from './output.ts';
import { parseParams, UsageError } from './params.ts';
import { createProgress } from './progress.ts';
import type { RetryPolicy } from '../retry.ts';

export interface Ctx {
  gf: GemforgeClient;
  io: CliIo;
  values: CliValues;
  args: string[];
  json: boolean;
  pollScheduleMs?: number[];
  /** The identity of a spending command (from --idempotency-key or new); undefined for the others. */
  idempotencyKey?: string;
}

type Command = (ctx: Ctx) => Promise<number>;

const gems = (n: number) => `${n} Gem${n === 1 ? '' : 's'}`;

const int = (name: string, value: string | undefined): number | undefined => {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new UsageError(`--${name} must be a whole number`);
  return n;
};

function one(ctx: Ctx, what: string): string {
  if (ctx.args.length !== 1) throw new UsageError(`expected exactly one ${what}${ctx.args.length > 1 ? ' (quote a prompt with spaces)' : ''}`);
  return ctx.args[0];
}

/** Retries print a line, so a person sees why the command waits and that the key stays the same. */
const retryNotice = (ctx: Ctx): RetryPolicy => ({
  onRetry: ({ delayMs, error }) =>
    ctx.io.stderr.write(
      `${error.code ?? `HTTP ${error.status ?? 'no answer'}`}: retrying in ${(delayMs / 1000).toFixed(1)} s with the same Idempotency-Key ${error.idempotencyKey}\n`,
    ),
});

/** --model, or the first model of the kind from discovery that is not marked unavailable. */
async function modelFor(ctx: Ctx, kind: Model['kind'], fits: (m: Model) => boolean = () => true): Promise<string> {
  if (ctx.values.model) return ctx.values.model;
  const { models } = await ctx.gf.models.list();
  const model = models.find((m) => m.kind === kind && m.available !== false && fits(m));
  if (!model) throw new UsageError(`no ${kind} model found in discovery; pass --model`);
  return model.id;
}

const models: Command = async (ctx) => {
  const list = await ctx.gf.models.list();
  if (ctx.json) return (printJson(ctx.io, list), 0);
  for (const m of list.models) {
    const flags = [m.available === false ? 'unavailable' : m.available ? 'available' : '', m.baseGems !== undefined ? `from ${gems(m.baseGems)}` : '']
      .filter(Boolean)
      .join(', ');
    ctx.io.stdout.write(`${m.id.padEnd(28)} ${m.kind.padEnd(6)} ${m.name}${flags ? ` (${flags})` : ''}\n`);
  }
  return 0;
};

const upload: Command = async (ctx) => {
  const file = one(ctx, 'FILE');
  const asset = await uploadAsset(ctx.gf, file, { contentType: ctx.values.type, filename: ctx.values.filename });
  if (ctx.json) return (printJson(ctx.io, { asset }), 0);
  ctx.io.stdout.write(`${asset.id}\n`);
  ctx.io.stderr.write(`uploaded ${path.basename(file)} as ${asset.kind} asset ${asset.id} (${asset.state})\n`);
  return 0;
};

const voices: Command = async (ctx) => {
  if (ctx.args[0] === 'add') {
    const file = ctx.args[1];
    if (!file || ctx.args.length !== 2) throw new UsageError('usage: gemforge voices add FILE --duration S --rights-confirmed');
    if (!ctx.values.duration) throw new UsageError('--duration S (the recording length in seconds, 15–300) is required');
    if (!ctx.values['rights-confirmed']) throw new UsageError("--rights-confirmed is required: pass it only after the speaker's permission is confirmed");
    const voice = await uploadVoice(ctx.gf, file, { duration: ctx.values.duration, rightsConfirmed: true });
    if (ctx.json) return (printJson(ctx.io, { voice }), 0);
    ctx.io.stdout.write(`${voice.id}\n`);
    ctx.io.stderr.write(`private draft voice "${voice.name}"; use it with: gemforge speech "…" --voice ${voice.id} --clone\n`);
    return 0;
  }
  if (ctx.args.length)
    throw new UsageError('usage: gemforge voices [--scope mine|explore] [--page N] [--language L] [--model M]  |  gemforge voices add FILE …');
  const scope = ctx.values.scope;
  if (scope !== undefined && scope !== 'mine' && scope !== 'explore') throw new UsageError('--scope is mine or explore');
  const list = await ctx.gf.voices.list({ scope, page: int('page', ctx.values.page), language: ctx.values.language, model: ctx.values.model });
  if (ctx.json) return (printJson(ctx.io, list), 0);
  for (const v of list.voices) ctx.io.stdout.write(`${v.id.padEnd(28)} ${(v.language ?? '-').padEnd(6)} ${v.name}\n`);
  const usable = ctx.values.model ? ` ${ctx.values.model} can speak with` : '';
  ctx.io.stderr.write(`page ${list.page}: ${list.voices.length} of ${list.total} voices${usable}${list.hasMore ? `; next: --page ${list.page + 1}` : ''}\n`);
  return 0;
};

/** Submit, wait with progress, save outputs. Ctrl-C or the time-out print how to resume; nothing is resubmitted. */
async function runMedia(ctx: Ctx, submit: (opts: { idempotencyKey?: string; retry: RetryPolicy }) => Promise<Spent<Submission>>): Promise<number> {
  const sub = await submit({ idempotencyKey: ctx.idempotencyKey, retry: retryNotice(ctx) });
  const { task } = sub.data;
  ctx.io.stderr.write(
    `task ${task.id} ${sub.data.created ? 'created' : 'replayed'} (${gems(task.quotedGems)} quoted; Idempotency-Key ${sub.idempotencyKey})\n`,
  );
  if (ctx.values['no-wait']) {
    if (ctx.json) return (printJson(ctx.io, { ...sub.data, idempotencyKey: sub.idempotencyKey }), 0);
    ctx.io.stdout.write(`${task.id}\n`);
    return 0;
  }
  return waitAndSave(ctx, task.id, { idempotencyKey: sub.idempotencyKey, created: sub.data.created });
}

async function waitAndSave(ctx: Ctx, id: string, extra: Record<string, unknown> = {}): Promise<number> {
  const out = ctx.values.out ?? '.';
  const resume = `gemforge task ${id} --wait --out ${/[\s"'$`\\]/.test(out) ? JSON.stringify(out) : out}`;
  const timeout = ctx.values.timeout === undefined ? 900 : Number(ctx.values.timeout);
  if (!Number.isFinite(timeout) || timeout <= 0) throw new UsageError('--timeout must be a number of seconds');
  const progress = createProgress(ctx.io.stderr);
  const controller = new AbortController();
  const onSigint = () => controller.abort();
  process.once('SIGINT', onSigint);
  let task: Task;
  try {
    task = await ctx.gf.tasks.wait(id, {
      signal: controller.signal,
      maxWaitMs: timeout * 1000,
      scheduleMs: ctx.pollScheduleMs,
      onProgress: ({ task: t, elapsedMs }) => progress.update(t, elapsedMs),
    });
  } catch (error) {
    progress.stop();
    if (error instanceof TaskWaitAborted || error instanceof TaskWaitTimeout) {
      const why = error instanceof TaskWaitAborted ? 'interrupted' : `still ${error.lastTask?.status ?? 'unknown'} after ${timeout} s`;
      ctx.io.stderr.write(`${why}: task ${id} goes on (nothing was resubmitted). Resume with:\n  ${resume}\n`);
      if (ctx.json) printJson(ctx.io, { taskId: id, status: error.lastTask?.status, resume, ...extra });
      return error instanceof TaskWaitAborted ? 130 : 75;
    }
    throw error;
  } finally {
    process.off('SIGINT', onSigint);
  }
  progress.stop();
  return finish(ctx, task, out, extra);
}

async function finish(ctx: Ctx, task: Task, out: string, extra: Record<string, unknown>): Promise<number> {
  const saved = task.status === 'succeeded' || task.status === 'partial' ? await saveTaskOutputs(ctx.gf, task, out) : { saved: [], skipped: [] };
  const failed = task.status === 'failed' || task.status === 'cancelled';
  if (ctx.json) {
    printJson(ctx.io, { task, files: saved.saved, skipped: saved.skipped, ...extra });
  } else {
    for (const f of saved.saved) ctx.io.stdout.write(`${f.path}\n`);
    for (const s of saved.skipped) ctx.io.stderr.write(`output ${s.index}: ${s.status}, nothing to save\n`);
    ctx.io.stderr.write(`task ${task.id} ${task.status}: ${gems(task.chargedGems)} charged, ${task.releasedGems} released\n`);
  }
  if (failed) {
    ctx.io.stderr.write(`error: ${task.error?.code ?? task.status}: ${task.error?.message ?? 'the task did not produce outputs'}\n`);
    return 1;
  }
  return 0;
}

/** The shared media envelope from the flags. */
function envelope(ctx: Ctx, kind: 'image' | 'video' | 'audio', model: string, prompt: string) {
  return {
    model,
    prompt,
    parameters: parseParams(kind, ctx.values.param),
    ...(ctx.values.ref?.length ? { referenceAssetIds: ctx.values.ref } : {}),
    ...(ctx.values['max-gems'] !== undefined ? { maxGems: int('max-gems', ctx.values['max-gems']) } : {}),
  };
}

const image: Command = async (ctx) => {
  const prompt = one(ctx, '"prompt"');
  const body = envelope(ctx, 'image', await modelFor(ctx, 'image'), prompt);
  return runMedia(ctx, (o) => ctx.gf.images.create(body, o));
};

const video: Command = async (ctx) => {
  const prompt = one(ctx, '"prompt"');
  const body = envelope(ctx, 'video', await modelFor(ctx, 'video'), prompt);
  // The API wants the mode said explicitly; the CLI can tell it from the inputs, and says so.
  if (body.parameters.mode === undefined) {
    body.parameters.mode = body.parameters.sourceImage === undefined ? 'text-to-video' : 'image-to-video';
    const why = body.parameters.sourceImage === undefined ? 'no sourceImage given' : 'a sourceImage is given';
    if (!ctx.json) ctx.io.stderr.write(`mode: ${String(body.parameters.mode)} (${why}; choose with --param mode=…)\n`);
  }
  return runMedia(ctx, (o) => ctx.gf.videos.create(body as never, o));
};

const hasOperation = (op: string) => (m: Model) => Array.isArray(m.capabilities.operations) && (m.capabilities.operations as unknown[]).includes(op);

const speech: Command = async (ctx) => {
  const text = one(ctx, '"text"');
  if (!ctx.values.voice) throw new UsageError('--voice VOICE_ID is required (list voices with `gemforge voices --scope explore`)');
  const operation = ctx.values.clone ? 'voice_clone' : 'speech';
  const body = envelope(ctx, 'audio', await modelFor(ctx, 'audio', hasOperation(operation)), text);
  const full = { ...body, operation, parameters: { ...body.parameters, voiceProfileId: ctx.values.voice } };
  return runMedia(ctx, (o) => ctx.gf.audio.create(full as never, o));
};

const music: Command = async (ctx) => {
  const prompt = one(ctx, '"prompt"');
  const body = { ...envelope(ctx, 'audio', await modelFor(ctx, 'audio', hasOperation('music')), prompt), operation: 'music' };
  return runMedia(ctx, (o) => ctx.gf.audio.create(body as never, o));
};

const text: Command = async (ctx) => {
  const prompt = one(ctx, '"prompt"');
  const v = ctx.values;
  const temperature = v.temperature === undefined ? undefined : Number(v.temperature);
  if (temperature !== undefined && !Number.isFinite(temperature)) throw new UsageError('--temperature must be a number');
  const body = {
    model: await modelFor(ctx, 'text'),
    messages: [...(v.system ? [{ role: 'system' as const, content: v.system }] : []), { role: 'user' as const, content: prompt }],
    ...(v['max-tokens'] !== undefined ? { max_tokens: int('max-tokens', v['max-tokens']) } : {}),
    ...(temperature !== undefined ? { temperature } : {}),
    ...(v['json-object'] ? { response_format: { type: 'json_object' as const } } : {}),
    ...(v['max-gems'] !== undefined ? { maxGems: int('max-gems', v['max-gems']) } : {}),
  };
  const opts = { idempotencyKey: ctx.idempotencyKey, retry: retryNotice(ctx) };
  if (v.stream) {
    const stream = await ctx.gf.chat.completions.stream(body, opts);
    const done = await stream.finalCompletion(ctx.json ? undefined : (delta) => ctx.io.stdout.write(delta));
    if (ctx.json) printJson(ctx.io, { ...done, idempotencyKey: stream.idempotencyKey });
    else ctx.io.stdout.write('\n');
    return (noteCut(ctx, done.finish_reason), 0);
  }
  const { data, idempotencyKey } = await ctx.gf.chat.completions.create(body, opts);
  if (ctx.json) return (printJson(ctx.io, { ...data, idempotencyKey }), 0);
  ctx.io.stdout.write(`${data.choices[0]?.message.content ?? ''}\n`);
  return (noteCut(ctx, data.choices[0]?.finish_reason), 0);
};

/** An answer cut by max_tokens ends mid-thought: say so (on stderr, so stdout stays the answer). */
function noteCut(ctx: Ctx, finishReason: string | null | undefined): void {
  if (finishReason !== 'length' || ctx.json) return;
  const limit = ctx.values['max-tokens'] ?? 'the default';
  ctx.io.stderr.write(`note: the answer was cut at --max-tokens (${limit}) (finish_reason: length); raise --max-tokens for the rest\n`);
}

const extract: Command = async (ctx) => {
  const videoAssetId = one(ctx, 'VIDEO_ASSET_ID');
  const body = {
    model: 'gemforge-video-analysis-1' as const,
    videoAssetId,
    ...(ctx.values.prompt !== undefined ? { prompt: ctx.values.prompt } : {}),
    ...(ctx.values['max-gems'] !== undefined ? { maxGems: int('max-gems', ctx.values['max-gems']) } : {}),
  };
  const { data, idempotencyKey } = await ctx.gf.extract.video(body, { idempotencyKey: ctx.idempotencyKey, retry: retryNotice(ctx) });
  if (ctx.json) return (printJson(ctx.io, { ...data, idempotencyKey }), 0);
  const e = data.extraction;
  ctx.io.stdout.write(`${e.analysis}\n`);
  for (const f of e.frames) ctx.io.stdout.write(`frame ${f.timeSeconds}s ${f.reason}${f.score !== undefined ? ` (${f.score})` : ''}\n`);
  for (const s of e.segments ?? []) ctx.io.stdout.write(`${s.startSeconds}s–${s.endSeconds}s ${s.description}\n`);
  return 0;
};

const task: Command = async (ctx) => {
  const id = one(ctx, 'task ID');
  if (ctx.values.wait) return waitAndSave(ctx, id);
  const snapshot = await ctx.gf.tasks.get(id);
  if (ctx.values.out && isTerminal(snapshot.status)) return finish(ctx, snapshot, ctx.values.out, {});
  if (ctx.json) return (printJson(ctx.io, { task: snapshot }), 0);
  ctx.io.stdout.write(
    `${snapshot.id} ${snapshot.status} (${snapshot.kind}, ${snapshot.model}): quoted ${snapshot.quotedGems}, charged ${snapshot.chargedGems}, released ${snapshot.releasedGems} Gems\n`,
  );
  for (const o of snapshot.outputs) ctx.io.stdout.write(`  output ${o.index}: ${o.status}${o.asset ? ` ${o.asset.mimeType} ${o.asset.url}` : ''}\n`);
  if (snapshot.error) ctx.io.stdout.write(`  error: ${snapshot.error.code}: ${snapshot.error.message}\n`);
  if (!isTerminal(snapshot.status)) ctx.io.stderr.write(`not finished; wait for it with: gemforge task ${id} --wait --out DIR\n`);
  return 0;
};

export const COMMANDS: Record<string, Command> = { models, upload, voices, image, video, speech, music, text, extract, task };

/** The commands that spend Gems: each runs under one Idempotency-Key. */
export const SPENDING: ReadonlySet<string> = new Set(['image', 'video', 'speech', 'music', 'text', 'extract']);
