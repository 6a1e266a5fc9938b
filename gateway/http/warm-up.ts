/**
 * Work that changes no answer (a document built on its first request anyway), run after the server listens so
 * that the start answers sooner (docs/performance.md, "Start"): one task per turn of the event loop, so
 * requests are served between them. `/health` says whether it is done (`warm_up`).
 */
export class WarmUp {
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
