import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join, relative } from 'node:path';
import { fmt, ratio } from '../gateway/format.js';
import { commit } from '../gateway/report.js';
import { quantile, round } from '../support/stats.js';
import type { StaleTally, Tally } from './load.js';
import type { MeasuredRound } from './rounds.js';
import type { CacheTarget } from './targets.js';

/*
 * The output of `npm run bench -- cache`: a table on the console and bench/results/cache.json (every round).
 */

interface Latency {
  p50: number;
  p99: number;
}

export interface TargetSummary {
  target: string;
  label: string;
  settings: Record<string, string>;
  rounds: { seconds: number; requestsPerSecond: number; readsPerSecond: number; writesPerSecond: number; errors: number; stale: number }[];
  /** Successful answers per second over all rounds. */
  requestsPerSecond: number;
  readsPerSecond: number;
  writesPerSecond: number;
  /** Writes sent, and of those over the REST paths. */
  writes: number;
  restWrites: number;
  latencyMs: { reads: Latency; writes: Latency; all: Latency };
  errors: number;
  timeouts: number;
  /** CPU ms per request sent (reads and writes): the two gateways together and each, the subgraph servers, PostgreSQL, ... */
  cpuMsPerRequest: {
    gateway: number;
    gatewayProcesses: number[];
    subgraphs: number;
    database: number | null;
    loadGenerator: number;
    machine: number;
  };
  stale: StaleTally;
  samples: string[];
}

const sumTally = (tallies: Tally[]): Tally => ({
  sent: tallies.reduce((s, t) => s + t.sent, 0),
  ok: tallies.reduce((s, t) => s + t.ok, 0),
  errors: tallies.reduce((s, t) => s + t.errors, 0),
  timeouts: tallies.reduce((s, t) => s + t.timeouts, 0),
  latencies: tallies.flatMap((t) => t.latencies),
});

function latency(values: number[]): Latency {
  const sorted = [...values].sort((a, b) => a - b);
  return { p50: round(quantile(sorted, 0.5), 2), p99: round(quantile(sorted, 0.99), 2) };
}

function sumStale(tallies: StaleTally[]): StaleTally {
  const sum = (f: (t: StaleTally) => number) => tallies.reduce((s, t) => s + f(t), 0);
  return {
    checked: sum((t) => t.checked),
    facts: sum((t) => t.facts),
    stale: sum((t) => t.stale),
    ownReads: sum((t) => t.ownReads),
    staleOwn: sum((t) => t.staleOwn),
    withPosition: sum((t) => t.withPosition),
    examples: tallies.flatMap((t) => t.examples).slice(0, 8),
  };
}

/** One target's rounds, summed: rates over the rounds' own lengths, CPU over the requests sent. */
export function summarize(target: CacheTarget, rounds: MeasuredRound[], subgraphNames: readonly string[]): TargetSummary {
  const mine = rounds.filter((r) => r.target === target.key);
  const reads = sumTally(mine.map((r) => r.load.reads));
  const writes = sumTally(mine.map((r) => r.load.writes));
  const seconds = mine.reduce((s, r) => s + r.load.seconds, 0);
  const sent = reads.sent + writes.sent;
  const cpu = (name: string) => mine.reduce((s, r) => s + (r.cpuMs[name] ?? 0), 0);
  const per = (ms: number) => (sent > 0 ? round(ms / sent, 3) : Number.NaN);
  const gatewayProcesses = target.servers.map((_, i) => per(cpu(`gateway-${i + 1}`)));
  return {
    target: target.key,
    label: target.label,
    settings: target.settings,
    rounds: mine.map((r) => ({
      seconds: round(r.load.seconds, 2),
      requestsPerSecond: round((r.load.reads.ok + r.load.writes.ok) / r.load.seconds, 1),
      readsPerSecond: round(r.load.reads.ok / r.load.seconds, 1),
      writesPerSecond: round(r.load.writes.ok / r.load.seconds, 1),
      errors: r.load.reads.errors + r.load.writes.errors,
      stale: r.load.stale.stale,
    })),
    requestsPerSecond: round((reads.ok + writes.ok) / seconds, 1),
    readsPerSecond: round(reads.ok / seconds, 1),
    writesPerSecond: round(writes.ok / seconds, 1),
    writes: writes.sent,
    restWrites: mine.reduce((s, r) => s + r.load.restWrites, 0),
    latencyMs: { reads: latency(reads.latencies), writes: latency(writes.latencies), all: latency([...reads.latencies, ...writes.latencies]) },
    errors: reads.errors + writes.errors,
    timeouts: reads.timeouts + writes.timeouts,
    cpuMsPerRequest: {
      gateway: round(
        gatewayProcesses.reduce((s, x) => s + x, 0),
        3,
      ),
      gatewayProcesses,
      subgraphs: per(subgraphNames.reduce((s, n) => s + cpu(n), 0)),
      database: mine.every((r) => 'database' in r.cpuMs) ? per(cpu('database')) : null,
      loadGenerator: per(cpu('load generator')),
      machine: per(cpu('machine')),
    },
    stale: sumStale(mine.map((r) => r.load.stale)),
    samples: mine.flatMap((r) => r.load.samples).slice(0, 5),
  };
}

/** The ratios the benchmark is for: the state cache against no cache, and against Hive's response cache. */
function ratios(summaries: TargetSummary[]): Record<string, string> {
  const rate = (key: string) => summaries.find((s) => s.target === key)?.requestsPerSecond;
  const pair = (a: string, b: string) => {
    const x = rate(a);
    const y = rate(b);
    return x === undefined || y === undefined ? [] : [[`${a} / ${b}, requests/s`, ratio(x, y)]];
  };
  return Object.fromEntries([...pair('project-cached', 'project-uncached'), ...pair('project-cached', 'hive-cached')]);
}

export function printResults(summaries: TargetSummary[], lagMs: number, writeShare: number): void {
  const writes = Math.round(writeShare * 1000) / 10;
  console.log(`\ncache: a dashboard (${100 - writes}% reads, ${writes}% writes) over two gateways per target`);
  console.table(
    summaries.map((s) => ({
      target: s.target,
      'req/s (rounds min-max)': `${fmt(s.requestsPerSecond)} (${fmt(Math.min(...s.rounds.map((r) => r.requestsPerSecond)), 0)}-${fmt(Math.max(...s.rounds.map((r) => r.requestsPerSecond)), 0)})`,
      'reads/s': fmt(s.readsPerSecond),
      'writes/s': fmt(s.writesPerSecond),
      'read p50 / p99 ms': `${fmt(s.latencyMs.reads.p50, 1)} / ${fmt(s.latencyMs.reads.p99, 1)}`,
      'write p50 / p99 ms': `${fmt(s.latencyMs.writes.p50, 1)} / ${fmt(s.latencyMs.writes.p99, 1)}`,
      errors: s.errors,
    })),
  );
  console.log('CPU ms per request (reads and writes), by process');
  console.table(
    summaries.map((s) => ({
      target: s.target,
      'gateways (2)': `${fmt(s.cpuMsPerRequest.gateway, 3)} (${s.cpuMsPerRequest.gatewayProcesses.map((x) => fmt(x, 3)).join(' + ')})`,
      subgraphs: fmt(s.cpuMsPerRequest.subgraphs, 3),
      PostgreSQL: fmt(s.cpuMsPerRequest.database, 3),
      'load generator': fmt(s.cpuMsPerRequest.loadGenerator, 3),
      'machine, all': fmt(s.cpuMsPerRequest.machine, 3),
    })),
  );
  console.log(`stale reads: LAG ${lagMs} ms; writers' reads after their own writes at LAG 0`);
  console.table(
    summaries.map((s) => ({
      target: s.target,
      'reads checked': s.stale.checked,
      facts: s.stale.facts,
      [`stale (LAG ${lagMs} ms)`]: s.stale.stale,
      "writers' reads": s.stale.ownReads,
      'with a state position': s.stale.withPosition,
      'own writes missed (LAG 0)': s.stale.staleOwn,
    })),
  );
  for (const s of summaries) {
    if (s.samples.length > 0) console.log(`  ${s.target} errors, first: ${s.samples[0]}`);
    if (s.stale.examples.length > 0) console.log(`  ${s.target} stale, first: ${s.stale.examples.slice(0, 3).join('; ')}`);
  }
  console.log('\nratios (one run):');
  console.table(ratios(summaries));
}

/** Writes cache.json: the summaries, the ratios, every round, and when, where and how the run was made. */
export function writeResults(dir: string, root: string, run: Record<string, unknown>, summaries: TargetSummary[], rounds: MeasuredRound[]): string {
  mkdirSync(dir, { recursive: true });
  const machine = { cpu: cpus()[0]?.model ?? 'unknown', cores: cpus().length, memoryGiB: Math.round(totalmem() / 2 ** 30), node: process.version };
  const file = join(dir, 'cache.json');
  const everyRound = rounds.map((r) => ({
    target: r.target,
    loadAverage: round(r.loadAverage, 2),
    cpuMs: r.cpuMs,
    seconds: round(r.load.seconds, 3),
    reads: { ...r.load.reads, latencies: undefined, latency: latency(r.load.reads.latencies) },
    writes: { ...r.load.writes, latencies: undefined, latency: latency(r.load.writes.latencies) },
    restWrites: r.load.restWrites,
    stale: r.load.stale,
  }));
  writeFileSync(
    file,
    `${JSON.stringify({ ...run, commit: commit(root), machine, targets: summaries, ratios: ratios(summaries), rounds: everyRound }, null, 2)}\n`,
  );
  return relative(root, file);
}
