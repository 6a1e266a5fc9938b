/** Runs `task` every `ms`, never two at once; `stop()` waits for a run in progress. A failed run waits for the next tick. */
export function periodic(task: () => Promise<unknown>, ms: number): { stop(): Promise<void> } {
  let running: Promise<unknown> | null = null;
  const timer = setInterval(() => {
    running ??= task()
      .catch(() => undefined)
      .finally(() => {
        running = null;
      });
  }, ms);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
