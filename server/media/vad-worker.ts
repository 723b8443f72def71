/**
 * Worker-thread entry for the voice-activity analysis: a 300 s recording takes
 * a couple of CPU seconds, which must not block the server's event loop.
 */
import { parentPort } from 'node:worker_threads';
import { analyzeSpeech } from './vad.ts';

parentPort?.on('message', (msg: { samples: Float32Array; sampleRate: number }) => {
  parentPort!.postMessage(analyzeSpeech(msg.samples, msg.sampleRate));
});
