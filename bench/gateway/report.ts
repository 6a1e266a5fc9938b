import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join, relative } from 'node:path';
import type { CellResult, PairedSide } from './measure.js';
import { fmt, ratio } from './format.js';
import { goals } from './goals.js';
import type { ProfileSummary } from './profile.js';

/*
 * The benchmark's output: a table per workload on the console, and bench/results/gateway.md (tables,
 * ratios, the goals, where the CPU goes) with bench/results/gateway.json (every round).
 */

export interface WorkloadResult {
  name: string;
  title: string;
  /** What was compared across the targets before measuring. */
  verified: string;
  /** Peak RSS is this workload's own (reset before its warm-up), not the process's lifetime's. */
  peakRssPerWorkload: boolean;
  cells: CellResult[];
  /** rest: REST and GraphQL POST sent to the same server at the same time, latencies kept apart. */
  paired?: PairedResult[];
}

/** One target's REST paths and their GraphQL operations under load together (half the connections each). */
export interface PairedResult {
  target: string;
  label: string;
  connectionsEach: number;
  seconds: number;
  rest: PairedSide;
  graphql: PairedSide;
}

export interface BenchResults {
  date: string;
  seconds: number;
  options: Record<string, unknown>;
  database: string;
  /** 1-minute load average at the start, before each workload and at the end. */
  loadAverages: number[];
  targets: { key: string; label: string }[];
  workloads: WorkloadResult[];
  profiles: { target: string; summary: ProfileSummary }[];
}

const name = (w: WorkloadResult, c: CellResult) =>
  w.name === 'rest'
    ? `${c.label}, ${c.variant === 'rest' ? 'REST' : 'GraphQL POST'}`
    : w.name === 'batched'
      ? `${c.label}, ${c.variant === 'batch' ? `${c.operations} per POST` : 'one per POST'}`
      : c.label;

/** A table's lines: the first column left-aligned (names), the others right-aligned (figures). */
function markdownTable(table: Record<string, string | number>[]): string[] {
  const headers = Object.keys(table[0] ?? {});
  return [
    `| ${headers.join(' | ')} |`,
    `|---|${headers
      .slice(1)
      .map(() => '---:')
      .join('|')}|`,
    ...table.map((r) => `| ${Object.values(r).join(' | ')} |`),
  ];
}

function pairedRows(paired: PairedResult[]) {
  return paired.map((p) => ({
    target: p.label,
    'REST p50 ms': fmt(p.rest.p50),
    'REST p99 ms': fmt(p.rest.p99),
    'GraphQL p50 ms': fmt(p.graphql.p50),
    'GraphQL p99 ms': fmt(p.graphql.p99),
    'p99 REST / GraphQL': ratio(p.rest.p99, p.graphql.p99),
    'answers REST / GraphQL': `${p.rest.ok.toLocaleString('en-US')} / ${p.graphql.ok.toLocaleString('en-US')}`,
    errors: p.rest.errors + p.graphql.errors,
  }));
}

function rows(w: WorkloadResult) {
  return w.cells.map((c) => ({
    target: name(w, c),
    'rps (rounds min-max)': `${fmt(c.rps)} (${fmt(c.rpsMin, 0)}-${fmt(c.rpsMax, 0)})`,
    'p50 ms': fmt(c.p50, 1),
    'p99 ms': fmt(c.p99, 1),
    errors: c.errors,
    timeouts: c.timeouts,
    'gateway CPU ms/req': fmt(c.gatewayCpuMs, 2),
    'subgraphs CPU ms/req': fmt(c.subgraphsCpuMs, 2),
    'peak RSS MiB': fmt(c.peakRssMiB, 0),
    ...(w.name === 'batched' ? { 'operations/s': fmt(c.rps * c.operations), 'gateway CPU ms/operation': fmt(c.gatewayCpuMs / c.operations, 3) } : {}),
    ...(c.rowsPerSecond !== null ? { 'rows/s': fmt(c.rowsPerSecond, 0), 's per 1M rows': fmt(1e6 / c.rowsPerSecond, 0) } : {}),
  }));
}

/**
 * Where the CPU of one request went, in ms: each process measured, PostgreSQL's processes, and the rest of the
 * machine's busy time (the kernel's network work no process is charged for, anything else running here).
 */
function cpuRows(w: WorkloadResult) {
  return w.cells.map((c) => {
    const measured = c.gatewayCpuMs + (c.subgraphsCpuMs ?? 0) + (c.databaseCpuMs ?? 0) + c.loadGeneratorCpuMs;
    return {
      target: name(w, c),
      gateway: fmt(c.gatewayCpuMs, 2),
      subgraphs: fmt(c.subgraphsCpuMs, 2),
      PostgreSQL: fmt(c.databaseCpuMs, 2),
      'load generator': fmt(c.loadGeneratorCpuMs, 2),
      'rest of the machine': fmt(c.machineCpuMs === null ? null : c.machineCpuMs - measured, 2),
      'machine, all': fmt(c.machineCpuMs, 2),
    };
  });
}

export function printResults(workloads: WorkloadResult[], bench?: BenchResults): void {
  for (const w of workloads) {
    console.log(`\n${w.name}: ${w.title}`);
    console.table(rows(w));
    for (const c of w.cells) if (c.samples.length > 0) console.log(`  ${name(w, c)} errors, first: ${c.samples[0]}`);
    console.log(`${w.name}: CPU ms per request, by where it went`);
    console.table(cpuRows(w));
    if (w.paired?.length) {
      console.log(`\n${w.name}: REST and GraphQL POST sent at the same time to the same server`);
      console.table(pairedRows(w.paired));
    }
  }
  if (!bench) return;
  for (const w of bench.workloads) {
    console.log(`\n${w.name}: rps ratio, row / column`);
    console.table(Object.fromEntries(w.cells.map((a) => [name(w, a), Object.fromEntries(w.cells.map((b) => [name(w, b), ratio(a.rps, b.rps)]))])));
  }
  console.log('\ngoals:');
  console.table(goals(bench.workloads));
  for (const p of bench.profiles) {
    console.log(`\nself time of the ${p.target} on the federated query (busy ${p.summary.busyMs} ms), top entries:`);
    console.table(p.summary.functions.slice(0, 15).map((f) => ({ function: f.name, ms: f.ms, '%': f.percent })));
  }
}

/** The commit the tree is at, and whether it has changes not committed. */
export function commit(root: string): string {
  try {
    const sha = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: root, encoding: 'utf8' }).trim();
    return dirty ? `${sha} (with uncommitted changes)` : sha;
  } catch {
    return 'unknown';
  }
}

/** The machine the run was measured on. */
interface Machine {
  cpu: string;
  cores: number;
  memoryGiB: number;
  node: string;
}

/** The options of the run the report describes. */
type RunOptions = {
  connections: number;
  warmup: number;
  rounds: number;
  seconds: number;
  pagingRows: number;
};

export function writeResults(bench: BenchResults, dir: string, root: string): string[] {
  mkdirSync(dir, { recursive: true });
  const machine: Machine = { cpu: cpus()[0]?.model ?? 'unknown', cores: cpus().length, memoryGiB: Math.round(totalmem() / 2 ** 30), node: process.version };
  const sha = commit(root);
  const goalList = goals(bench.workloads);
  const json = join(dir, 'gateway.json');
  writeFileSync(json, `${JSON.stringify({ ...bench, commit: sha, machine, goals: goalList }, null, 2)}\n`);
  const runOptions = bench.options as RunOptions;
  const lines: string[] = [
    ...introLines(bench, machine, sha, runOptions),
    '',
    '## Goals',
    '',
    '| goal | measured | met |',
    '|---|---|---|',
    ...goalList.map((g) => `| ${g.goal} | ${g.measured} | ${g.met ? 'yes' : '**no**'} |`),
  ];
  for (const w of bench.workloads) lines.push(...workloadLines(w));
  if (bench.profiles.length > 0) lines.push(...profileLines(bench, runOptions));
  const md = join(dir, 'gateway.md');
  writeFileSync(md, `${lines.join('\n')}\n`);
  return [relative(root, md), relative(root, json)];
}

/** The report's opening: when and where it ran, how the load was sent, and what each figure means. */
function introLines(bench: BenchResults, machine: Machine, sha: string, runOptions: RunOptions): string[] {
  const la = bench.loadAverages;
  return [
    '# Gateway benchmark: the project against its peers',
    '',
    `\`npm run bench -- gateway\`, run ${bench.date.slice(0, 16).replace('T', ' ')} UTC at commit ${sha}, ${Math.round(bench.seconds / 60)} min.`,
    `Machine: ${machine.cpu}, ${machine.cores} cores, ${machine.memoryGiB} GiB, Node ${machine.node}; shared with other work while it ran:`,
    `1-minute load average ${fmt(Math.min(...la), 2)} to ${fmt(Math.max(...la), 2)} (at the start ${fmt(la[0]!, 2)}, before each workload ${la
      .slice(1, -1)
      .map((x) => fmt(x, 2))
      .join(', ')}, at the end ${fmt(la[la.length - 1]!, 2)}).`,
    'The gateways, the subgraphs, PostgreSQL and the load generator share the two cores, so the figures are noisy: the',
    'spread of each target across its rounds is shown beside its rate, and ratios within one workload (measured in',
    'interleaved rounds) are more trustworthy than absolute figures.',
    '',
    `Load: autocannon in a process of its own, ${runOptions.connections} connections, a ${runOptions.warmup} s warm-up per target, then ${runOptions.rounds} rounds`,
    `of ${runOptions.seconds} s per target interleaved, in turn forwards and backwards (A B C, C B A, ...). Paging sends a fixed number of pages per round (${runOptions.pagingRows.toLocaleString('en-US')} rows per`,
    'target over its rounds); the mutation mix sends whole quote-confirm-complete chains, as many per connection as the',
    "target's warm-up pace fits in a round, so no quote is left holding a machine.",
    `Database: ${bench.database}. rps counts successful responses (2xx without GraphQL errors); p50/p99 are over every`,
    "round; CPU ms per request is the process's user + system time over the rounds (/proc/<pid>/stat, read once the",
    'servers are quiet again after each round) divided by the requests sent; for `npm start` the gateway process runs the',
    'subgraphs too, and "subgraphs" is the five subgraph processes together. PostgreSQL is its processes on this machine',
    "(the postmaster's, its backends' and those of backends that ended meanwhile); \"machine, all\" is the machine's busy",
    'time (/proc/stat: user, nice, system, irq, softirq), and "rest of the machine" what no measured process accounts for',
    "(the kernel's network work, anything else running). Peak RSS is VmHWM, reset before each workload.",
    `Before measuring, every target answered each workload's operations with the same data (${bench.workloads.map((w) => `${w.name}: ${w.verified}`).join('; ')}).`,
  ];
}

/** A workload's section: its table, where the CPU went, first errors, rps ratios and the paired runs. */
function workloadLines(w: WorkloadResult): string[] {
  const lines = ['', `## ${w.name}: ${w.title}`, '', ...markdownTable(rows(w))];
  lines.push('', 'CPU ms per request, by where it went:', '', ...markdownTable(cpuRows(w)));
  const errored = w.cells.filter((c) => c.samples.length > 0);
  for (const c of errored) lines.push('', `${name(w, c)}, first error: \`${c.samples[0]!.replace(/`/g, "'").slice(0, 200)}\``);
  lines.push('', 'rps ratio, row / column:', '', `| | ${w.cells.map((c) => name(w, c)).join(' | ')} |`, `|---|${w.cells.map(() => '---:').join('|')}|`);
  for (const a of w.cells) lines.push(`| ${name(w, a)} | ${w.cells.map((b) => ratio(a.rps, b.rps)).join(' | ')} |`);
  if (w.paired?.length) {
    const p0 = w.paired[0]!;
    lines.push(
      '',
      `REST and GraphQL POST sent at the same time to the same server (${p0.connectionsEach} connections each, ${fmt(p0.seconds, 0)} s per target over the`,
      'rounds): both meet the same moments of the machine, so their tails compare directly. The REST p99 goal is judged here.',
      '',
      ...markdownTable(pairedRows(w.paired)),
    );
  }
  return lines;
}

/** Where the CPU goes: each profiled gateway's self time by package or folder and by function. */
function profileLines(bench: BenchResults, runOptions: RunOptions): string[] {
  const lines = ['', '## Where the CPU goes', ''];
  lines.push(
    `Each gateway below was started again with \`node --cpu-prof\` after the measured rounds and sent the federated query`,
    `(${runOptions.connections} connections) for ${String(bench.options['profileSeconds'])} s after a 2 s warm-up, in distributed mode, on the same subgraph processes.`,
    "Self time, as a share of the process's busy (non-idle) samples of that stretch. V8 samples wall time, so on a",
    'machine this busy the time a process waits for a core is charged to whatever it was running; the profiler adds',
    'some overhead of its own.',
  );
  for (const p of bench.profiles) {
    lines.push(
      '',
      `### ${p.target} (busy ${p.summary.busyMs.toLocaleString('en-US')} ms, idle ${p.summary.idleMs.toLocaleString('en-US')} ms)`,
      '',
      '| by package or folder | self ms | % |',
      '|---|---:|---:|',
    );
    for (const f of p.summary.places.slice(0, 16)) lines.push(`| ${f.name} | ${fmt(f.ms, 0)} | ${fmt(f.percent, 1)} |`);
    lines.push('', '| by function | self ms | % |', '|---|---:|---:|');
    for (const f of p.summary.functions) lines.push(`| \`${f.name}\` | ${fmt(f.ms, 0)} | ${fmt(f.percent, 1)} |`);
  }
  return lines;
}
