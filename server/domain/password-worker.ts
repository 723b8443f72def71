/**
 * Worker-thread entry for console passwords: one argon2id hash or verification
 * costs ~190 ms of CPU, which on the event loop delayed every other request
 * (password-pool.ts). One job at a time; the pool sends the next when this one answers.
 */
import { answerJobs } from '../threads.ts';
import { passwordJob } from './password-pool.ts';

answerJobs(passwordJob);
