import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

/**
 * Work that changes no answer (a document built on its first request anyway), run after the server listens so
 * that the start answers sooner (docs/performance.md, "Start"): one task per turn of the event loop, so
 * requests are served between them. `/health` says whether it is done (`warm_up`).
 */
class WarmUp {
  private readonly tasks: { name: string; run: () => void }[] = [];
  /** How many tasks have run: the rest are pending. */
  private ran = 0;
  private tookMs: number | null = null;

  /** A task: building something that would otherwise be built when first asked for. */
  add(name: string, run: () => void): void {
    this.tasks.push({ name, run });
  }

  /** Runs the tasks, each in a turn of its own (after the port is listening). A failed task is left to its first request. */
  start(onError: (name: string, error: unknown) => void): void {
    const started = performance.now();
    const next = () => {
      const task = this.tasks[this.ran];
      if (!task) {
        this.tookMs = Math.round(performance.now() - started);
        return;
      }
      try {
        task.run();
      } catch (error) {
        onError(task.name, error);
      }
      this.ran++;
      setImmediate(next);
    };
    setImmediate(next);
  }

  /** For /health: done, or what is still to be made. */
  report(): { done: boolean; pending: string[]; ms: number | null } {
    const pending = this.tasks.slice(this.ran).map((t) => t.name);
    return { done: pending.length === 0, pending, ms: this.tookMs };
  }
}

/**
 * The `warm-up` part: `app.warmUp`, where every part adds what it can build after the server listens; run
 * once the port is listening.
 */
export const warmUpPlugin = fp(
  async (app: FastifyInstance) => {
    const warmUp = new WarmUp();
    app.decorate('warmUp', warmUp);
    app.addHook('onListen', async () => {
      warmUp.start((name, error) => app.log.warn({ err: error, task: name }, 'warm-up task failed; it is made on first use'));
    });
  },
  { name: 'warm-up', fastify: '5.x' },
);

declare module 'fastify' {
  interface FastifyInstance {
    /** Work after listening that changes no answer: each part adds its own tasks. */
    warmUp: WarmUp;
  }
}
