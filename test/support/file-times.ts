import type { Reporter, TestModule } from 'vitest/node';

/**
 * Prints each test file's time (tests and hooks), slowest first, after the run, marking the files over
 * `budgetMs`: a file that creeps towards the test timeout shows here before it fails on a busy machine.
 */
export class FileTimesReporter implements Reporter {
  constructor(private readonly budgetMs = 30_000) {}

  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    const rows = testModules.map((m) => ({ file: m.relativeModuleId, ms: m.diagnostic().duration, state: m.state() })).sort((a, b) => b.ms - a.ms);
    if (rows.length === 0) return;
    const total = rows.reduce((sum, r) => sum + r.ms, 0);
    const lines = rows.map((r) => {
      const over = r.ms > this.budgetMs ? `  (over ${this.budgetMs / 1000} s)` : '';
      return `  ${(r.ms / 1000).toFixed(1).padStart(6)} s  ${r.file}${r.state === 'failed' ? '  FAILED' : ''}${over}`;
    });
    process.stdout.write(`\nTime per test file, slowest first (${(total / 1000).toFixed(1)} s in all, across workers):\n${lines.join('\n')}\n`);
  }
}
