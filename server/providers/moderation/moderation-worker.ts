/**
 * Worker-thread entry for moderating long texts (off-thread.ts): builds the
 * policy from the document the server built its own from and judges each text
 * with the embedded provider the server uses in process. One job at a time; the pool sends the
 * next when this one answers. Its garbage is collected after the policy is
 * built and once it has been idle a moment, so an idle thread holds about what
 * the policy needs (~12 MB of heap) rather than what building it took.
 */
import { workerData } from 'node:worker_threads';
import { answerJobs, collectGarbage } from '../../threads.ts';
import { embeddedProvider } from './index.ts';
import type { ModerationWorkerData } from './off-thread.ts';
import { parseModerationPolicy } from './policy-file.ts';
import type { ModerationInput } from './types.ts';

const { doc, source, classifier } = workerData as ModerationWorkerData;
const provider = embeddedProvider(parseModerationPolicy(doc, source), { classifier });
// Building the policy (the dictionary read and sorted) leaves ~85 MB of garbage resident: handed back now.
collectGarbage();

answerJobs((input: ModerationInput) => provider.moderate(input), { collectWhenQuiet: true });
