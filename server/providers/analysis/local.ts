/**
 * The embedded video analyzer: real measurement, no model and no network. It
 * decodes the video once with the shipped ffmpeg (scene cuts at full frame rate,
 * small frames sampled at ≤ 4 fps, audio loudness), makes the scenes the
 * segments, suggests a frame at each scene start and the sharpest frame of each
 * scene, and writes a readable summary that answers the prompt where the
 * measurements can (scenes, audio, colours, motion, duration, resolution,
 * brightness, thumbnails) and says so where they cannot.
 *
 * Usage it reports (documented token accounting, as a multimodal model bills):
 *   input  = sampled frames × 258 + (audio ? ceil(duration) × 32 : 0) + 64 + prompt tokens
 *   output = tokens of the JSON it returns
 * (tokens counted with the server's tokenizer, o200k_base). With at most 240
 * sampled frames and a 2,000-character prompt this stays far below the
 * 262,144-token reservation.
 */
import { countTokens } from '../../tokens.ts';
import { ToolError } from '../../media/run.ts';
import { decodeVideo, type Decoded } from './decode.ts';
import { brightnessWord, dominantColours, motionLevel, type ColourName } from './measures.ts';
import { buildScenes, suggestedFrames, type Scene } from './scenes.ts';
import { AnalysisError, type AnalysisProvider, type AnalysisRequest, type AnalysisResult, type AnalysisUsage, type AnalysisVideo } from './types.ts';

export const FRAME_TOKENS = 258;
export const AUDIO_TOKENS_PER_SECOND = 32;
export const INSTRUCTION_TOKENS = 64;

/** The usage the local analyzer reports for one analysis (see the module comment). */
export function localUsage(sampledFrames: number, durationSeconds: number, hasAudio: boolean, prompt: string, output: string): AnalysisUsage {
  return {
    inputTokens:
      sampledFrames * FRAME_TOKENS + (hasAudio ? Math.ceil(durationSeconds) * AUDIO_TOKENS_PER_SECOND : 0) + INSTRUCTION_TOKENS + countTokens(prompt),
    outputTokens: countTokens(output),
  };
}

const sec = (t: number) => `${t.toFixed(2)} s`;
const pct = (x: number) => `${Math.round(x * 100)}%`;
/** Motion percentages are small: one decimal. */
const pct1 = (x: number) => `${(Math.round(x * 1000) / 10).toFixed(1)}%`;
const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

function colourPhrase(colours: Scene['colours']): string {
  if (colours.length === 0) return 'no clear colour';
  return colours.map((c) => `${c.name} (${pct(c.share)})`).join(', ');
}

/** What the whole video measured, in one place for the summary and the answers. */
export interface Measured {
  video: AnalysisVideo;
  scenes: Scene[];
  colours: Scene['colours'];
  motion: number;
  brightness: number;
  audio: Decoded['audio'];
  sampledFrames: number;
  frames: ReturnType<typeof suggestedFrames>;
}

export function measureAll(video: AnalysisVideo, decoded: Decoded): Measured {
  const scenes = buildScenes(decoded.cuts, decoded.samples, video.durationSeconds);
  // Whole-video colours: every measured sample counts the same.
  const counts = new Map<ColourName, number>();
  for (const s of scenes) for (const [name, n] of s.colourCounts) counts.set(name, (counts.get(name) ?? 0) + n);
  const colours = dominantColours(counts);
  const pairs = scenes.reduce((n, s) => n + s.motionPairs, 0);
  const motion = pairs ? scenes.reduce((sum, s) => sum + s.motion * s.motionPairs, 0) / pairs : 0;
  const length = scenes.reduce((n, s) => n + (s.endSeconds - s.startSeconds), 0);
  const light = length ? scenes.reduce((sum, s) => sum + s.brightness * (s.endSeconds - s.startSeconds), 0) / length : 0;
  return {
    video,
    scenes,
    colours,
    motion,
    brightness: light,
    audio: decoded.audio,
    sampledFrames: decoded.samples.frames.length,
    frames: suggestedFrames(scenes),
  };
}

function audioPhrase(m: Measured): string {
  if (!m.video.hasAudio || !m.audio) return 'no audio track';
  if (m.audio.rmsDb <= -60) return `an audio track that is silent (peak ${m.audio.peakDb} dBFS)`;
  return `an audio track (mean level ${m.audio.rmsDb} dBFS, peak ${m.audio.peakDb} dBFS)`;
}

function sceneDescription(s: Scene): string {
  const main = s.colours[0];
  const colours = main && main.share >= 0.5 ? `Mostly ${colourPhrase(s.colours)}` : `Mixed colours: ${colourPhrase(s.colours)}`;
  return `${colours}; ${brightnessWord(s.brightness)} brightness; ${motionLevel(s.motion)} motion (mean frame difference ${pct1(s.motion)}).`;
}

function summary(m: Measured): string {
  const { video } = m;
  const resolution = video.width && video.height ? `${video.width}×${video.height}` : 'unknown resolution';
  const cuts = m.scenes.slice(1).map((s) => sec(s.startSeconds));
  const lines = [
    `Measured without a model (local analyzer): ${resolution}, ${sec(video.durationSeconds)}, ${audioPhrase(m)}.`,
    `${plural(m.scenes.length, 'scene')}${cuts.length ? ` (cuts at ${cuts.join(', ')})` : ' (no cuts)'}: ` +
      m.scenes
        .map(
          (s, i) => `${i + 1}) ${sec(s.startSeconds)}–${sec(s.endSeconds)} ${s.colours[0] && s.colours[0].share >= 0.4 ? s.colours[0].name : 'mixed colours'}`,
        )
        .join('; ') +
      '.',
    `Motion: ${motionLevel(m.motion)} (mean frame difference ${pct1(m.motion)}). Brightness: ${brightnessWord(m.brightness)} (${pct(m.brightness)}).`,
    `Dominant colours: ${colourPhrase(m.colours)}.`,
  ];
  return lines.join(' ');
}

/** Answers the parts of a prompt that the measurements can answer; says what it cannot. */
export function answerPrompt(prompt: string, m: Measured): string {
  const p = prompt.toLowerCase();
  if (!p.trim()) return '';
  const answers: string[] = [];
  const has = (re: RegExp) => re.test(p);
  if (has(/scene|cut|shot|segment|transition/)) {
    const cuts = m.scenes.slice(1).map((s) => sec(s.startSeconds));
    answers.push(
      `There ${m.scenes.length === 1 ? 'is 1 scene' : `are ${m.scenes.length} scenes`}${cuts.length ? `, with cuts at ${cuts.join(', ')}` : ' and no cut'}.`,
    );
  }
  if (has(/audio|sound|music|noise|loud|quiet|silen|voice|speech|speak/)) {
    answers.push(
      `The video has ${audioPhrase(m)}.` +
        (m.audio && m.video.hasAudio && has(/speech|speak|voice|music|say/) ? ' Whether it is speech or music cannot be told without a model.' : ''),
    );
  }
  if (has(/colou?r/)) answers.push(`The dominant colours are ${colourPhrase(m.colours)}.`);
  if (has(/motion|move|moving|movement|static|still|action|camera/)) {
    const most = [...m.scenes].sort((a, b) => b.motion - a.motion)[0]!;
    const where = m.scenes.length > 1 ? ` The most motion is in scene ${m.scenes.indexOf(most) + 1} (${motionLevel(most.motion)}, ${pct1(most.motion)}).` : '';
    answers.push(`Motion is ${motionLevel(m.motion)} overall (mean frame difference ${pct1(m.motion)}).${where}`);
  }
  if (has(/how long|duration|length|seconds/)) answers.push(`It lasts ${sec(m.video.durationSeconds)}.`);
  if (has(/resolution|dimension|size|wide|tall|aspect/) && m.video.width && m.video.height) answers.push(`It is ${m.video.width}×${m.video.height}.`);
  if (has(/bright|dark|light/)) answers.push(`It is ${brightnessWord(m.brightness)} overall (mean brightness ${pct(m.brightness)}).`);
  if (has(/thumbnail|cover|poster|best frame|frame/)) {
    const rank = (f: Measured['frames'][number]) => (f.reason === 'sharpest' ? 2 : f.reason === 'representative' ? 1 : 0) + f.score / 10;
    const best = [...m.frames].sort((a, b) => rank(b) - rank(a))[0];
    if (best) answers.push(`Suggested thumbnail: ${sec(best.timeSeconds)} (${best.reason.replace('_', ' ')}, score ${best.score}).`);
  }
  const limits = 'It cannot recognise objects, people, text or what is said: that needs a multimodal model.';
  if (answers.length === 0) return `About the prompt: this analyzer only measures the video, so it cannot answer "${clip(prompt.trim(), 200)}". ${limits}`;
  if (has(/\bwho\b|\bwhat\b|which|describe|object|person|people|face|animal|text|read|say|said|identify|recogni|happen/)) answers.push(limits);
  return `About the prompt: ${answers.join(' ')}`;
}

const clip = (text: string, max: number) => (text.length > max ? `${text.slice(0, max)}…` : text);

/** The extraction object the analyzer returns (as JSON text) for what it measured. */
export function composeExtraction(m: Measured, prompt: string) {
  const answer = answerPrompt(prompt, m);
  return {
    analysis: answer ? `${summary(m)} ${answer}` : summary(m),
    durationSeconds: m.video.durationSeconds,
    frames: m.frames,
    segments: m.scenes.map((s) => ({ startSeconds: s.startSeconds, endSeconds: s.endSeconds, description: sceneDescription(s) })),
  };
}

export interface LocalAnalyzerOptions {
  ffmpegPath: string;
  /** A fresh temp file path (under DATA_DIR/tmp): sampled frames are written there while decoding. */
  tempFile(suffix: string): Promise<string>;
  /** Analyses decoding at once (default 2); more wait their turn, so a burst cannot start an ffmpeg per request. */
  concurrency?: number;
}

export class LocalAnalysisProvider implements AnalysisProvider {
  readonly name = 'local';
  private running = 0;
  private readonly waiting: Array<() => void> = [];
  constructor(private readonly options: LocalAnalyzerOptions) {}

  async analyze(request: AnalysisRequest): Promise<AnalysisResult> {
    // A finishing analysis hands its slot straight to the next waiter, so the limit holds.
    if (this.running >= (this.options.concurrency ?? 2)) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.running++;
    try {
      return await this.run(request);
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.running--;
    }
  }

  private async run(request: AnalysisRequest): Promise<AnalysisResult> {
    const { video, prompt } = request;
    let decoded: Decoded;
    try {
      decoded = await decodeVideo(video.file, {
        ffmpegPath: this.options.ffmpegPath,
        tempFile: await this.options.tempFile('.rgb'),
        durationSeconds: video.durationSeconds,
        width: video.width,
        height: video.height,
        hasAudio: video.hasAudio,
      });
    } catch (error) {
      // Nothing billable happened: the video could not be decoded.
      const detail = error instanceof ToolError ? error.message : String(error);
      throw new AnalysisError('refused', `The video could not be decoded for analysis (${detail}).`);
    }
    if (decoded.samples.frames.length === 0) throw new AnalysisError('refused', 'The video has no decodable frames.');
    const output = JSON.stringify(composeExtraction(measureAll(video, decoded), prompt));
    return { output, usage: localUsage(decoded.samples.frames.length, video.durationSeconds, video.hasAudio, prompt, output) };
  }
}
