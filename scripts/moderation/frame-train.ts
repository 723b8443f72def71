/**
 * How the frame judge (server/providers/moderation/frame.ts) is trained: every labelled set under
 * test/fixtures/moderation/, each text read as the server reads a refused one (its tokens, and
 * its gloss's when it has one, with the rules' concepts of them), and one logistic regression,
 * harmful requests against benign text, fitted by stochastic gradient descent with AdaGrad steps
 * and an L2 penalty in an order a seeded generator shuffles: the same sets and options give the
 * same bytes. Shared by `npm run train:moderation` and the test that checks the shipped model.
 */
import path from 'node:path';
import type { Features } from '../../server/providers/moderation/features.ts';
import { frameFeatures, type FrameModel } from '../../server/providers/moderation/frame.ts';
import { stopWordDetector } from '../../server/providers/moderation/language.ts';
import { frameReadings } from '../../server/providers/moderation/local.ts';
import { inDictionary } from '../../server/providers/moderation/normalize.ts';
import type { ModerationPolicy } from '../../server/providers/moderation/policy-file.ts';
import { rng } from '../../server/providers/random.ts';
import { SETS_DIR, type LabelledSet } from './eval-set.ts';
import { setsChecksum } from './train.ts';

export interface FrameOptions {
  bits: number;
  epochs: number;
  seed: number;
  /** AdaGrad's base step. */
  rate: number;
  /** L2 penalty per step on the weights a sample touches. */
  l2: number;
  /** How much a harmful sample's loss weighs against a benign one's (an overrule of harm costs more than a false positive). */
  harmfulWeight: number;
}

export const FRAME_OPTIONS: FrameOptions = { bits: 16, epochs: 10, seed: 7, rate: 0.3, l2: 1e-5, harmfulWeight: 1 };

/** A sample as the frame judge's training reads it. */
export interface FrameSample {
  features: Features;
  harmful: boolean;
}

export function encodeFrame(set: LabelledSet, policy: ModerationPolicy, bits: number): FrameSample[] {
  const languages = stopWordDetector(inDictionary);
  return set.samples.map((s) => ({ features: frameFeatures(frameReadings(policy, s.text, languages.detect(s.text)), bits), harmful: s.harmful }));
}

/** The module whose reading of a text the weights depend on (besides the policy's vocabulary and concepts). */
const FRAME_SOURCE = path.join(import.meta.dirname, '../../server/providers/moderation/frame.ts');

/** SHA-256 over the training files, the options and the frame judge's feature reader: what frame-model.json records. */
export function frameChecksum(options: FrameOptions, dir = SETS_DIR): string {
  return setsChecksum(options, FRAME_SOURCE, dir);
}

/** Fits the weights and bias of one logistic regression, then stores each weight as a signed byte. */
export function trainFrame(samples: readonly FrameSample[], options: FrameOptions): Pick<FrameModel, 'bits' | 'weights' | 'bias' | 'scale'> {
  const weights = new Float32Array(1 << options.bits);
  const squares = new Float32Array(weights.length).fill(1e-8);
  let bias = 0;
  let biasSquare = 1e-8;
  const next = rng(options.seed);
  const order = samples.map((_, i) => i);
  for (let epoch = 0; epoch < options.epochs; epoch++) {
    for (let i = order.length - 1; i > 0; i--) {
      const j = Math.floor(next() * (i + 1));
      [order[i], order[j]] = [order[j]!, order[i]!];
    }
    for (const index of order) {
      const { features, harmful } = samples[index]!;
      let z = bias;
      for (const b of features.buckets) z += weights[b]! * features.value;
      const g = (harmful ? options.harmfulWeight : 1) * (1 / (1 + Math.exp(-z)) - (harmful ? 1 : 0));
      biasSquare += g * g;
      bias -= (options.rate * g) / Math.sqrt(biasSquare);
      for (const b of features.buckets) {
        const gw = g * features.value + options.l2 * weights[b]!;
        squares[b]! += gw * gw;
        weights[b]! -= (options.rate * gw) / Math.sqrt(squares[b]!);
      }
    }
  }
  let largest = 0;
  for (const w of weights) largest = Math.max(largest, Math.abs(w));
  const scale = largest === 0 ? 1 : largest / 127;
  const bytes = new Int8Array(weights.length);
  for (let i = 0; i < weights.length; i++) bytes[i] = Math.round(weights[i]! / scale);
  return { bits: options.bits, weights: bytes, bias, scale };
}
