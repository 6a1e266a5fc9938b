import { Worker } from 'node:worker_threads';
import type { JobOptions, JobResult } from './job.js';
import type { IsingProblem } from './problem.js';

const ENTRY = new URL('./worker-entry.mjs', import.meta.url);
const WORKER = new URL('./worker.ts', import.meta.url).href;

/**
 * Runs one job in a worker thread of its own (a 24-qubit run takes seconds of CPU and up to ~400 MiB,
 * which must not stall the request thread), and ends the worker when the job is done.
 */
export function runInWorker(problem: IsingProblem, options: JobOptions): { result: Promise<JobResult>; cancel(): Promise<void> } {
  const worker = new Worker(ENTRY, { workerData: { entry: WORKER, problem, options } });
  let cancelled = false;
  const result = new Promise<JobResult>((resolve, reject) => {
    worker.once('message', (message: { ok: true; result: JobResult } | { ok: false; message: string }) => {
      if (message.ok) resolve(message.result);
      else reject(new Error(message.message));
      void worker.terminate();
    });
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(cancelled ? 'cancelled: the service stopped' : `the simulation worker exited with code ${code}`)));
  });
  return {
    result,
    async cancel() {
      cancelled = true;
      await worker.terminate();
    },
  };
}
