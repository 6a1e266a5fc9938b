/**
 * Work that changes no answer (a document built on its first request anyway), run after the server listens so
 * that the start answers sooner (docs/performance.md, "Start"): one task per turn of the event loop, so
 * requests are served between them. `/health` says whether it is done (`warm_up`).
 */
export class WarmUp {
  private readonly tasks: { name: string; run: () => void }[] = [];
  private pending: string[] = [];
  private tookMs: number | null = null;

  /** A task: building something that would otherwise be built when first asked for. */
  add(name: string, run: () => void): void {
    this.tasks.push({ name, run });
    this.pending.push(name);
  }

  /** Runs the tasks, each in a turn of its own (after the port is listening). A failed task is left to its first request. */
  start(onError: (name: string, error: unknown) => void): void {
    const started = performance.now();
    const next = (i: number) => {
      const task = this.tasks[i];
      if (!task) {
        this.tookMs = Math.round(performance.now() - started);
        return;
      }
      try {
        task.run();
      } catch (error) {
        onError(task.name, error);
      }
      this.pending = this.pending.filter((name) => name !== task.name);
      setImmediate(() => next(i + 1));
    };
    setImmediate(() => next(0));
  }

  /** For /health: done, or what is still to be made. */
  report(): { done: boolean; pending: string[]; ms: number | null } {
    return { done: this.pending.length === 0, pending: [...this.pending], ms: this.tookMs };
  }
}
