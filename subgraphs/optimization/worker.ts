import { parentPort, workerData } from 'node:worker_threads';
import { runJob, type JobOptions } from './job.js';
import type { IsingProblem } from './problem.js';

/** A run off the request thread: the problem and options in, the result (or the error's message) out. */
const { problem, options } = workerData as { problem: IsingProblem; options: JobOptions };
try {
  parentPort!.postMessage({ ok: true, result: runJob(problem, options) });
} catch (error) {
  parentPort!.postMessage({ ok: false, message: error instanceof Error ? error.message : String(error) });
}
