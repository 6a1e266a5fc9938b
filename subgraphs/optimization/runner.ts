import { Worker } from 'node:worker_threads';
import type { JobOptions, JobResult } from './job.js';
import type { IsingProblem } from './problem.js';

const ENTRY = new URL('./worker-entry.mjs', import.meta.url);
const WORKER = new URL('./worker.ts', import.meta.url).href;

type Reply = { ok: true; result: JobResult } | { ok: false; message: string } | { ready: true };

interface Slot {
  worker: Worker;
  ready: Promise<void>;
}

/**
 * Worker threads for runs: a 24-qubit run takes seconds of CPU and up to ~400 MiB, which must not stall
 * the request thread. A worker loads the simulator once (compiling TypeScript takes a while) and is reused
 * for the next run; one that is cancelled mid-run is terminated and replaced on demand.
 */
export class WorkerPool {
  private readonly idle: Slot[] = [];
  private readonly busy = new Set<Slot>();
  private closed = false;

  private spawn(): Slot {
    const worker = new Worker(ENTRY, { workerData: { entry: WORKER } });
    worker.unref();
    const ready = new Promise<void>((resolve, reject) => {
      const onMessage = (m: Reply) => {
        if ('ready' in m) {
          worker.off('message', onMessage);
          resolve();
        }
      };
      worker.on('message', onMessage);
      worker.once('error', reject);
    });
    return { worker, ready };
  }

  run(problem: IsingProblem, options: JobOptions): { result: Promise<JobResult>; cancel(): Promise<void> } {
    if (this.closed) throw new Error('the worker pool is closed');
    const slot = this.idle.pop() ?? this.spawn();
    this.busy.add(slot);
    let cancelled = false;
    let settled = false;
    const result = new Promise<JobResult>((resolve, reject) => {
      const cleanup = () => {
        settled = true;
        slot.worker.off('message', onMessage);
        slot.worker.off('error', onError);
        slot.worker.off('exit', onExit);
        this.busy.delete(slot);
      };
      const onMessage = (m: Reply) => {
        if ('ready' in m) return;
        cleanup();
        if (!this.closed) this.idle.push(slot);
        else void slot.worker.terminate();
        if (m.ok) resolve(m.result);
        else reject(new Error(m.message));
      };
      const onError = (error: Error) => {
        cleanup();
        reject(error);
      };
      const onExit = (code: number) => {
        cleanup();
        reject(new Error(cancelled ? 'cancelled: the service stopped' : `the simulation worker exited with code ${code}`));
      };
      slot.worker.on('message', onMessage);
      slot.worker.once('error', onError);
      slot.worker.once('exit', onExit);
      slot.ready.then(
        () => slot.worker.postMessage({ problem, options }),
        (error: unknown) => onError(error instanceof Error ? error : new Error(String(error))),
      );
    });
    return {
      result,
      async cancel() {
        if (settled) return;
        cancelled = true;
        await slot.worker.terminate();
      },
    };
  }

  /** Ends idle workers; running ones are ended by their cancel(). */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.idle.splice(0).map((s) => s.worker.terminate()));
  }
}
