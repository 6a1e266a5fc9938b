import { parentPort } from 'node:worker_threads';
import { runJob, type JobOptions } from './job.js';
import type { IsingProblem } from './problem.js';

/** Runs jobs off the request thread, one at a time: the problem and options in, the result (or the error) out. */
parentPort!.on('message', (job: { problem: IsingProblem; options: JobOptions }) => {
  try {
    parentPort!.postMessage({ ok: true, result: runJob(job.problem, job.options) });
  } catch (error) {
    parentPort!.postMessage({ ok: false, message: error instanceof Error ? error.message : String(error) });
  }
});
parentPort!.postMessage({ ready: true });
