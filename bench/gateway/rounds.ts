import { loadavg } from 'node:os';
import { subgraphNames } from '../../schema/subgraphs.js';
import type { LoadResult } from './load.js';
import {
  measurePaired,
  measureRound,
  pairedSide,
  resetPeaks,
  summarize,
  type Cell,
  type CpuMeter,
  type LoadGenerator,
  type Round,
  type RunSettings,
  type Target,
} from './measure.js';
import { wanted, type Options } from './options.js';
import { peakRssMiB, type ServerProcess } from './processes.js';
import { printResults, type PairedResult, type WorkloadResult } from './report.js';
import { log } from './run-context.js';
import { poolOf } from './seed.js';
import { verifyMutations } from './verify.js';
import { WORKLOAD_TABLE, type Workload, type WorkloadContext } from './workload-table.js';

/*
 * The measured rounds of each workload: every target warmed up, then the rounds interleave the targets, in
 * turn forwards and backwards (A B C, C B A, ...), so that the machine's drift falls on all of them alike,
 * and so does going first after another server's turn (its leftover work, cold caches).
 */

/** What measuring needs beside the workload: the load generator, the CPU meters and the subgraph servers. */
export interface Measuring {
  options: Options;
  load: LoadGenerator;
  /** Read every round besides the target's gateway: each subgraph, the load generator, PostgreSQL, the machine. */
  meters: Record<string, CpuMeter>;
  subgraphs: ServerProcess[];
  /** The 1-minute load average before each workload is added here. */
  loadAverages: number[];
}

/** The processes that serve a target's requests: its gateway and, in distributed mode, the subgraphs. */
export function serving(target: Target, subgraphs: readonly ServerProcess[]): number[] {
  return [target.server.child.pid!, ...(target.remoteSubgraphs ? subgraphs.map((s) => s.child.pid!) : [])];
}

/**
 * Measures each workload of the run in turn, printing its table when it is done. `verified` says what each
 * workload's check compared; the mutations are checked here, just before they are measured.
 */
export async function measureWorkloads(measuring: Measuring, ctx: WorkloadContext, verified: Record<string, string>): Promise<WorkloadResult[]> {
  const results: WorkloadResult[] = [];
  for (const workload of WORKLOAD_TABLE) {
    if (!wanted(measuring.options, workload.name)) continue;
    if (workload.name === 'mutations') {
      log('checking that every gateway answers quote, confirm and complete alike');
      await verifyMutations(ctx.shared.map((t, i) => ({ name: t.label, url: t.server.url, machine: poolOf(i)[0]! })));
      verified['mutations'] = 'a quote, confirm and complete each, ids left out';
    }
    const result = await measureWorkload(measuring, workload, ctx, verified[workload.name] ?? '');
    results.push(result);
    printResults([result]);
  }
  return results;
}

async function measureWorkload(measuring: Measuring, workload: Workload, ctx: WorkloadContext, verified: string): Promise<WorkloadResult> {
  const { options, load, meters, subgraphs } = measuring;
  const cells = workload.cells(ctx);
  const pids = [...new Set(cells.map((c) => c.target.server.child.pid!)), ...subgraphs.map((s) => s.child.pid!)];
  const peaksReset = resetPeaks(pids);
  measuring.loadAverages.push(loadavg()[0]!);
  log(`${workload.name}: warm-up per target`);
  const warm: RunSettings = workload.warmup?.(ctx) ?? { connections: options.connections, seconds: options.warmup };
  const warmups = new Map<Cell, LoadResult>();
  for (const cell of cells) warmups.set(cell, (await measureRound(load, cell, warm, {}, serving(cell.target, subgraphs))).load);
  const rounds = new Map<Cell, Round[]>(cells.map((cell) => [cell, []]));
  const timed: RunSettings = { connections: options.connections, seconds: options.seconds };
  for (let r = 1; r <= options.rounds; r++) {
    log(`${workload.name}: round ${r} of ${options.rounds} (load average ${loadavg()[0]!.toFixed(2)})`);
    for (const cell of inRoundOrder(cells, r)) {
      const settings = workload.round?.(ctx, warmups.get(cell)!) ?? timed;
      rounds.get(cell)!.push(await measureRound(load, cell, settings, { ...meters, gateway: cell.target.server.child.pid! }, serving(cell.target, subgraphs)));
    }
  }
  // Summarized before the paired runs, so that each peak resident set is the rounds' own.
  const cellResults = cells.map((cell) => summarize(cell, rounds.get(cell)!, subgraphNames, peakRssMiB(cell.target.server.child.pid!)));
  const paired = workload.name === 'rest' ? await measurePairedRest(measuring, ctx) : [];
  return {
    name: workload.name,
    title: typeof workload.title === 'string' ? workload.title : workload.title(ctx),
    verified,
    peakRssPerWorkload: peaksReset,
    cells: cellResults,
    ...(paired.length > 0 ? { paired } : {}),
  };
}

/**
 * REST against GraphQL once more, both sent at the same time to each project target (half the connections
 * each), so that their tails meet the same moments of the machine.
 */
async function measurePairedRest({ options, load, subgraphs }: Measuring, { shared, pairs }: WorkloadContext): Promise<PairedResult[]> {
  const projectTargets = shared.filter((t) => t.project);
  const runs = new Map(projectTargets.map((t) => [t, { rest: [] as LoadResult[], graphql: [] as LoadResult[] }]));
  const each = { connections: Math.max(1, Math.floor(options.connections / 2)), seconds: options.seconds };
  for (let r = 1; r <= options.rounds; r++) {
    log(`rest: REST and GraphQL at once, round ${r} of ${options.rounds}`);
    for (const target of inRoundOrder(projectTargets, r)) {
      const [rest, post] = await measurePaired(
        load,
        target,
        [
          { kind: 'cycle', requests: pairs.map((p) => p.rest) },
          { kind: 'cycle', requests: pairs.map((p) => p.graphql) },
        ],
        each,
        serving(target, subgraphs),
      );
      runs.get(target)!.rest.push(rest);
      runs.get(target)!.graphql.push(post);
    }
  }
  return [...runs].map(([target, { rest, graphql: post }]) => ({
    target: target.key,
    label: target.label,
    connectionsEach: each.connections,
    seconds: each.seconds * options.rounds,
    rest: pairedSide(rest),
    graphql: pairedSide(post),
  }));
}

/** The targets of round `r` (from 1): forwards in odd rounds, backwards in even ones. */
function inRoundOrder<T>(list: readonly T[], r: number): readonly T[] {
  return r % 2 === 1 ? list : [...list].reverse();
}
