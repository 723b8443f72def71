/**
 * Runs the voice-activity analysis on a worker thread: a 300 s recording costs
 * about two CPU seconds, which must not stall every other request. The worker
 * loads the TypeScript module through tsx's API (the server runs under tsx);
 * should the worker fail to start, the analysis runs inline instead.
 */
import { analyzeSpeech, type SpeechAnalysis } from './vad.ts';
import { typescriptWorker } from '../threads.ts';

const workerModule = new URL('./vad-worker.ts', import.meta.url).href;

/** analyzeSpeech, off the event loop. */
export function analyzeSpeechOffThread(samples: Float32Array, sampleRate: number): Promise<SpeechAnalysis> {
  const worker = typescriptWorker(workerModule);
  if (!worker) return Promise.resolve(analyzeSpeech(samples, sampleRate));
  return new Promise((resolve) => {
    let settled = false;
    const inline = () => {
      if (settled) return;
      settled = true;
      resolve(analyzeSpeech(samples, sampleRate));
    };
    worker.once('message', (result: SpeechAnalysis) => {
      settled = true;
      resolve(result);
      void worker.terminate();
    });
    worker.once('error', inline);
    worker.once('exit', inline);
    worker.postMessage({ samples, sampleRate });
  });
}
