import { fork, type ChildProcess } from 'node:child_process';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import type { CleanupRequest, LoadMessage, LoadResult, RunRequest } from './load.js';
import { cpuMs, resetPeakRss, sleep, type ServerProcess } from './processes.js';
import type { LoadPlan } from './workloads.js';
import { quantile, round } from '../support/stats.js';

/*
 * One measured run of the load generator against one server, with the CPU time each process of the
 * system used meanwhile; and the aggregation of a cell's rounds.
 */

/** A gateway under test. */
export interface Target {
  key: string;
  label: string;
  server: ServerProcess;
  /** The subgraphs run in their own processes (the shared subgraph servers), not inside the gateway. */
  remoteSubgraphs: boolean;
  /** The project's server: it also serves the REST paths. */
  project: boolean;
  /** Configured to share nothing between requests (the nothing-shared workloads run on it alone). */
  unshared: boolean;
}

/** One row of a workload's table: a target, sent one variant of the workload's requests. */
export interface Cell {
  target: Target;
  /** `graphql`, `rest` for the REST paths, `batch` for batches. */
  variant: string;
  plan: LoadPlan;
  /** Operations each request carries (a batch's entries). @default 1 */
  operations?: number;
}

/** What a round reads CPU time from: a process id, or a reader of the CPU ms used so far (PostgreSQL, the machine). */
export type CpuMeter = number | (() => number);

export const readMeter = (meter: CpuMeter) => (typeof meter === 'number' ? cpuMs(meter) : meter());

export interface Round {
  load: LoadResult;
  /** CPU ms each meter (a process, PostgreSQL's processes, the machine) read during the round, by name. */
  cpuMs: Record<string, number>;
  loadAverage: number;
}

export interface CellResult {
  target: string;
  label: string;
  variant: string;
  /** Operations each request carried (a batch's entries; 1 otherwise). */
  operations: number;
  rounds: { ok: number; seconds: number; rps: number; p50: number; p99: number; errors: number }[];
  /** Successful responses per second over all rounds. */
  rps: number;
  rpsMin: number;
  rpsMax: number;
  p50: number;
  p99: number;
  responses: number;
  errors: number;
  timeouts: number;
  /** Requests sent (the CPU figures are per request sent: the servers finish every one). */
  sent: number;
  /** Gateway process CPU ms per request (for one-process targets, subgraphs included). */
  gatewayCpuMs: number;
  /** The subgraph processes' CPU ms per request (remote subgraphs only; null for one-process targets). */
  subgraphsCpuMs: number | null;
  /** CPU ms per request of each subgraph process. */
  subgraphCpuMs: Record<string, number> | null;
  loadGeneratorCpuMs: number;
  /** The local PostgreSQL server's processes, CPU ms per request (null when not measured). */
  databaseCpuMs: number | null;
  /** The whole machine's busy CPU ms per request: every process, the kernel, and whatever else ran meanwhile. */
  machineCpuMs: number | null;
  peakRssMiB: number;
  /** Rows read per second (paging). */
  rowsPerSecond: number | null;
  rows: number;
  samples: string[];
}

export class LoadGenerator {
  private readonly child: ChildProcess;
  private nextId = 1;
  private readonly waiting = new Map<number, (m: LoadMessage) => void>();

  constructor(cwd: string) {
    this.child = fork(fileURLToPath(new URL('./load.ts', import.meta.url)), [], {
      cwd,
      execArgv: ['--import', 'tsx'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.child.on('message', (m: LoadMessage) => {
      this.waiting.get(m.id)?.(m);
      this.waiting.delete(m.id);
    });
    this.child.on('exit', (code) => {
      for (const [id, resolve] of this.waiting) resolve({ id, error: `the load generator exited with ${code}` });
      this.waiting.clear();
    });
  }

  get pid(): number {
    return this.child.pid!;
  }

  private ask(message: Omit<RunRequest, 'id'> | Omit<CleanupRequest, 'id'>): Promise<LoadMessage> {
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.waiting.set(id, resolve);
      this.child.send({ ...message, id });
    });
  }

  async run(request: Omit<RunRequest, 'id' | 'type'>): Promise<LoadResult> {
    const answer = await this.ask({ type: 'run', ...request });
    if ('error' in answer) throw new Error(`load generator: ${answer.error}`);
    if (!('result' in answer)) throw new Error('load generator: unexpected answer');
    return answer.result;
  }

  async cleanup(url: string, poolKey: string): Promise<{ freed: number; lost: number }> {
    const answer = await this.ask({ type: 'cleanup', url, poolKey });
    if ('error' in answer) throw new Error(`load generator: ${answer.error}`);
    if (!('cleaned' in answer)) throw new Error('load generator: unexpected answer');
    return answer.cleaned;
  }

  close(): void {
    if (this.child.connected) this.child.send({ type: 'exit' });
  }
}

export interface RunSettings {
  connections: number;
  seconds?: number;
  amount?: number;
}

/**
 * Runs the cell's plan once, reading the CPU time of every listed process before and after. A run that
 * stops on time leaves a request in flight on each connection; the servers finish those afterwards, so
 * the CPU time is read once the `serving` processes are quiet again (and divided by the requests sent),
 * and the next round never starts while this one's work is still running.
 */
export async function measureRound(
  load: LoadGenerator,
  cell: Cell,
  settings: RunSettings,
  processes: Record<string, CpuMeter>,
  serving: number[],
): Promise<Round> {
  const before = Object.fromEntries(Object.entries(processes).map(([name, meter]) => [name, readMeter(meter)]));
  const result = await load.run({ url: cell.target.server.url, timeoutSeconds: 10, plan: cell.plan, ...settings });
  await quiet(serving);
  const cpu = Object.fromEntries(Object.entries(processes).map(([name, meter]) => [name, readMeter(meter) - before[name]!]));
  if (cell.plan.kind === 'mutations') await load.cleanup(cell.target.server.url, cell.plan.poolKey);
  return { load: result, cpuMs: cpu, loadAverage: loadavg()[0]! };
}

/**
 * Sends two plans to one target at the same time, `connections` each (REST paths and the same operations as
 * GraphQL POST): both meet the same moments of the machine, so their latencies compare directly.
 */
export async function measurePaired(
  load: LoadGenerator,
  target: Target,
  plans: [Cell['plan'], Cell['plan']],
  settings: { connections: number; seconds: number },
  serving: number[],
): Promise<[LoadResult, LoadResult]> {
  const [a, b] = await Promise.all(plans.map((plan) => load.run({ url: target.server.url, timeoutSeconds: 10, plan, ...settings })));
  await quiet(serving);
  return [a!, b!];
}

/** One side of a pair (REST or GraphQL POST) over its runs. */
export interface PairedSide {
  ok: number;
  errors: number;
  p50: number;
  p99: number;
}

/** Successes, errors and p50 / p99 over the runs of one side of a pair. */
export function pairedSide(runs: LoadResult[]): PairedSide {
  const latencies = runs.flatMap((r) => r.latencies).sort((x, y) => x - y);
  return {
    ok: runs.reduce((s, r) => s + r.ok, 0),
    errors: runs.reduce((s, r) => s + r.non2xx + r.graphqlErrors + r.errors, 0),
    p50: round(quantile(latencies, 0.5), 1),
    p99: round(quantile(latencies, 0.99), 1),
  };
}

/** Waits until the processes together use under 10% of a core over 300 ms (at most 30 s). */
export async function quiet(pids: number[]): Promise<void> {
  const total = () => pids.reduce((s, pid) => s + cpuMs(pid), 0);
  const deadline = Date.now() + 30_000;
  let last = total();
  do {
    await sleep(300);
    const now = total();
    if (now - last <= 30) return;
    last = now;
  } while (Date.now() < deadline);
}

export function resetPeaks(pids: number[]): boolean {
  return pids.map(resetPeakRss).every(Boolean);
}

export function summarize(cell: Cell, rounds: Round[], subgraphNames: string[], peakRss: number): CellResult {
  const sum = (f: (r: Round) => number) => rounds.reduce((s, r) => s + f(r), 0);
  const ok = sum((r) => r.load.ok);
  const responses = sum((r) => r.load.responses);
  const sent = sum((r) => r.load.sent);
  const seconds = sum((r) => r.load.seconds);
  const latencies = rounds.flatMap((r) => r.load.latencies).sort((a, b) => a - b);
  const perRound = rounds.map((r) => {
    const sorted = [...r.load.latencies].sort((a, b) => a - b);
    return {
      ok: r.load.ok,
      seconds: round(r.load.seconds, 2),
      rps: round(r.load.ok / r.load.seconds, 1),
      p50: quantile(sorted, 0.5),
      p99: quantile(sorted, 0.99),
      errors: r.load.responses - r.load.ok + r.load.errors,
    };
  });
  const per = (ms: number) => (sent > 0 ? round(ms / sent, 3) : Number.NaN);
  const subgraphCpu = Object.fromEntries(subgraphNames.map((n) => [n, per(sum((r) => r.cpuMs[n] ?? 0))]));
  const rows = sum((r) => r.load.rows);
  return {
    target: cell.target.key,
    label: cell.target.label,
    variant: cell.variant,
    operations: cell.operations ?? 1,
    rounds: perRound,
    rps: round(ok / seconds, 1),
    rpsMin: Math.min(...perRound.map((r) => r.rps)),
    rpsMax: Math.max(...perRound.map((r) => r.rps)),
    p50: quantile(latencies, 0.5),
    p99: quantile(latencies, 0.99),
    responses,
    sent,
    errors: responses - ok + sum((r) => r.load.errors),
    timeouts: sum((r) => r.load.timeouts),
    gatewayCpuMs: per(sum((r) => r.cpuMs['gateway'] ?? 0)),
    subgraphsCpuMs: cell.target.remoteSubgraphs ? per(sum((r) => subgraphNames.reduce((s, n) => s + (r.cpuMs[n] ?? 0), 0))) : null,
    subgraphCpuMs: cell.target.remoteSubgraphs ? subgraphCpu : null,
    loadGeneratorCpuMs: per(sum((r) => r.cpuMs['load generator'] ?? 0)),
    databaseCpuMs: rounds.every((r) => 'database' in r.cpuMs) ? per(sum((r) => r.cpuMs['database']!)) : null,
    machineCpuMs: rounds.every((r) => 'machine' in r.cpuMs) ? per(sum((r) => r.cpuMs['machine']!)) : null,
    peakRssMiB: round(peakRss, 1),
    rowsPerSecond: cell.plan.kind === 'paging' ? Math.round(rows / seconds) : null,
    rows,
    samples: rounds.flatMap((r) => r.load.samples).slice(0, 5),
  };
}
