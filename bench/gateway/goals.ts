import { fmt, ratio } from './format.js';
import type { CellResult } from './measure.js';
import type { WorkloadResult } from './report.js';

/*
 * The goals the project holds itself to, judged on one run's figures: against its peers, against a baseline
 * checkout, and REST against the same operations over GraphQL.
 */

export interface Goal {
  goal: string;
  measured: string;
  met: boolean;
}

/**
 * A goal comparing two targets of one workload: `ours` against `theirs`. Each bound set must hold: the rate
 * above theirs (`rpsAbove`), at least `rpsAtLeast` times theirs, gateway CPU per request at most `cpuAtMost`
 * times theirs. The goal is judged only when the run measured both targets.
 */
interface Comparison {
  /** The goal as the table states it; `{w}` stands for the workload's name. */
  goal: string;
  ours: string;
  theirs: string;
  rpsAbove?: true;
  rpsAtLeast?: number;
  cpuAtMost?: number;
}

/** Comparisons judged on each of `workloads` (`every`: each workload of the run, in its order). */
interface ComparisonGroup {
  workloads: readonly string[] | 'every';
  comparisons: readonly Comparison[];
}

/** The goals the project holds itself to against its peers and a baseline, in the order they are reported. */
const COMPARISONS: readonly ComparisonGroup[] = [
  {
    workloads: ['federated', 'mix'],
    comparisons: [
      { goal: '{w}: distributed mode ahead of Hive Gateway', ours: 'project', theirs: 'hive', rpsAbove: true },
      { goal: '{w}: distributed mode at least 2x stock @apollo/gateway', ours: 'project', theirs: 'stock', rpsAtLeast: 2 },
      { goal: '{w}: npm start (PGlite) ahead of Hive Gateway', ours: 'one-process-pglite', theirs: 'hive', rpsAbove: true },
      { goal: '{w}: distributed mode at least 1.25x Hive Gateway with the Rust planner', ours: 'project', theirs: 'hive-rust', rpsAtLeast: 1.25 },
      { goal: '{w}: gateway CPU per request at most 0.8x Hive Gateway with the Rust planner', ours: 'project', theirs: 'hive-rust', cpuAtMost: 0.8 },
      {
        goal: '{w}: npm start (PGlite) at least level with Hive Gateway with the Rust planner',
        ours: 'one-process-pglite',
        theirs: 'hive-rust',
        rpsAtLeast: 1,
      },
    ],
  },
  // Like for like: nothing shared between requests on either side, request by request.
  {
    workloads: ['federated-unshared', 'shallow-unshared'],
    comparisons: [
      {
        goal: "{w}: nothing shared, at least 1.5x the Rust-planned Hive Gateway's rate",
        ours: 'project-unshared',
        theirs: 'hive-rust-unshared',
        rpsAtLeast: 1.5,
      },
      {
        goal: "{w}: nothing shared, gateway CPU per request at most 0.5x the Rust-planned Hive Gateway's",
        ours: 'project-unshared',
        theirs: 'hive-rust-unshared',
        cpuAtMost: 0.5,
      },
    ],
  },
  // Against a baseline checkout (--baseline): this tree no slower and no costlier beyond noise (10%).
  {
    workloads: 'every',
    comparisons: [
      {
        goal: '{w}: distributed mode rate and gateway CPU per request within 10% of the baseline',
        ours: 'project',
        theirs: 'project-baseline',
        rpsAtLeast: 0.9,
        cpuAtMost: 1.1,
      },
      {
        goal: '{w}: npm start (PGlite) rate and gateway CPU per request within 10% of the baseline',
        ours: 'one-process-pglite',
        theirs: 'one-process-pglite-baseline',
        rpsAtLeast: 0.9,
        cpuAtMost: 1.1,
      },
      {
        goal: '{w}: distributed mode, nothing shared rate and gateway CPU per request within 10% of the baseline',
        ours: 'project-unshared',
        theirs: 'project-baseline-unshared',
        rpsAtLeast: 0.9,
        cpuAtMost: 1.1,
      },
    ],
  },
  {
    workloads: 'every',
    comparisons: [{ goal: "{w}: gateway CPU per request at or below stock's", ours: 'project', theirs: 'stock', cpuAtMost: 1 }],
  },
];

type FindCell = (workload: string, target: string, variant?: string) => CellResult | undefined;

/** The goals the project holds itself to, judged on this run's figures. */
export function goals(workloads: WorkloadResult[]): Goal[] {
  const find: FindCell = (w, target, variant = 'graphql') =>
    workloads.find((x) => x.name === w)?.cells.find((c) => c.target === target && c.variant === variant);
  const out: Goal[] = [];
  for (const group of COMPARISONS) {
    for (const w of group.workloads === 'every' ? workloads.map((x) => x.name) : group.workloads) {
      for (const c of group.comparisons) {
        const ours = find(w, c.ours);
        const theirs = find(w, c.theirs);
        if (ours && theirs) out.push(compared(c, w, ours, theirs));
      }
    }
  }
  out.push(...pgliteTimeoutGoal(workloads), ...restGoals(workloads, find));
  return out;
}

/** One comparison judged on one workload's two cells. */
function compared(c: Comparison, workload: string, ours: CellResult, theirs: CellResult): Goal {
  const measured: string[] = [];
  let met = true;
  if (c.rpsAbove || c.rpsAtLeast !== undefined) {
    measured.push(`${fmt(ours.rps)} vs ${fmt(theirs.rps)} rps (${ratio(ours.rps, theirs.rps)})`);
    if (c.rpsAbove) met &&= ours.rps > theirs.rps;
    if (c.rpsAtLeast !== undefined) met &&= ours.rps >= c.rpsAtLeast * theirs.rps;
  }
  if (c.cpuAtMost !== undefined) {
    measured.push(`${fmt(ours.gatewayCpuMs, 2)} vs ${fmt(theirs.gatewayCpuMs, 2)} ms (${ratio(ours.gatewayCpuMs, theirs.gatewayCpuMs)})`);
    met &&= ours.gatewayCpuMs <= c.cpuAtMost * theirs.gatewayCpuMs;
  }
  return { goal: c.goal.replaceAll('{w}', workload), measured: measured.join(', '), met };
}

/** `npm start` keeps up at the benchmark's connections: no request timed out in any workload. */
function pgliteTimeoutGoal(workloads: WorkloadResult[]): Goal[] {
  const pgliteCells = workloads.flatMap((w) => w.cells.filter((c) => c.target === 'one-process-pglite'));
  if (pgliteCells.length === 0) return [];
  const timeouts = pgliteCells.reduce((s, c) => s + c.timeouts, 0);
  return [
    {
      goal: 'npm start (PGlite): no timeouts at 50 connections',
      measured: `${timeouts} timeouts over ${pgliteCells.length} workloads`,
      met: timeouts === 0,
    },
  ];
}

/**
 * REST against GraphQL is judged on the paired runs (both at once on one server, so the machine's moments
 * fall on both alike) when there are any; otherwise on the rest workload's separate cells.
 */
function restGoals(workloads: WorkloadResult[], find: FindCell): Goal[] {
  const out: Goal[] = [];
  const paired = workloads.find((x) => x.name === 'rest')?.paired ?? [];
  for (const p of paired) {
    out.push({
      goal: `REST p99 within 1.2x of the same operations over GraphQL POST, sent at the same time (${p.label})`,
      measured: `${fmt(p.rest.p99)} vs ${fmt(p.graphql.p99)} ms (${ratio(p.rest.p99, p.graphql.p99)})`,
      met: p.rest.p99 <= 1.2 * p.graphql.p99,
    });
  }
  for (const target of paired.length > 0 ? [] : ['project', 'one-process-pglite', 'one-process-postgres']) {
    const rest = find('rest', target, 'rest');
    const post = find('rest', target, 'graphql');
    if (rest && post) {
      out.push({
        goal: `REST p99 within 1.2x of the same operations over GraphQL POST (${rest.label})`,
        measured: `${fmt(rest.p99)} vs ${fmt(post.p99)} ms (${ratio(rest.p99, post.p99)})`,
        met: rest.p99 <= 1.2 * post.p99,
      });
    }
  }
  return out;
}
