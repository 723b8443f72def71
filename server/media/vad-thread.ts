/**
 * Runs the voice-activity analysis on a worker thread: a 300 s recording costs
 * about two CPU seconds, which must not stall every other request. The worker
 * loads the TypeScript module through tsx's API (the server runs under tsx);
 * should the worker fail to start, the analysis runs inline instead.
 */
import { Worker } from 'node:worker_threads';
import { analyzeSpeech, type SpeechAnalysis } from './vad.ts';

const workerModule = new URL('./vad-worker.ts', import.meta.url).href;

function tsxApi(): string | undefined {
  try {
    return import.meta.resolve('tsx/esm/api');
  } catch {
    return undefined;
  }
}

/** analyzeSpeech, off the event loop. */
export function analyzeSpeechOffThread(samples: Float32Array, sampleRate: number): Promise<SpeechAnalysis> {
  const api = tsxApi();
  if (!api) return Promise.resolve(analyzeSpeech(samples, sampleRate));
  return new Promise((resolve) => {
    let settled = false;
    const inline = () => {
      if (settled) return;
      settled = true;
      resolve(analyzeSpeech(samples, sampleRate));
    };
    const bootstrap = `import(${JSON.stringify(api)}).then((m) => { m.register(); return import(${JSON.stringify(workerModule)}); })`;
    const worker = new Worker(bootstrap, { eval: true });
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
