/**
 * Worker-thread entry for moderating long texts (off-thread.ts): loads the
 * policy file the server loaded and judges each text with the embedded
 * provider the server uses in process. One job at a time; the pool sends the
 * next when this one answers.
 */
import { workerData } from 'node:worker_threads';
import { answerJobs } from '../../threads.ts';
import { embeddedProvider } from './index.ts';
import type { ModerationWorkerData } from './off-thread.ts';
import { loadModerationPolicy } from './policy-file.ts';
import type { ModerationInput } from './types.ts';

const provider = embeddedProvider(loadModerationPolicy((workerData as ModerationWorkerData).policyPath));

answerJobs((input: ModerationInput) => provider.moderate(input));
