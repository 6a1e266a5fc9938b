import { loadavg } from 'node:os';
import { relative } from 'node:path';
import { argv } from 'node:process';
import { subgraphNames } from '../schema/subgraphs.js';
import { isLocal, seedDatabases } from './gateway/databases.js';
import { LoadGenerator, type CpuMeter } from './gateway/measure.js';
import { parseOptions, type Options } from './gateway/options.js';
import { machineCpuMs, postgresCpuMs } from './gateway/processes.js';
import { profileGateways } from './gateway/profiling.js';
import { printResults, writeResults, type BenchResults } from './gateway/report.js';
import { measureWorkloads, type Measuring } from './gateway/rounds.js';
import { BenchRun, log, ROOT } from './gateway/run-context.js';
import { startSubgraphs, type SubgraphServers } from './gateway/subgraph-servers.js';
import { startTargets } from './gateway/targets.js';
import { verifyWorkloads } from './gateway/verify.js';
import { mixRequests, restPairs } from './gateway/workloads.js';

/*
 * npm run bench -- gateway [--quick] [--seconds N] [--warmup N] [--rounds N] [--connections N]
 *                          [--paging-rows N] [--only w1,w2] [--targets k1,k2] [--profile-seconds N] [--profile-mix] [--out DIR]
 *                          [--baseline DIR [--baseline-env NAME=value,...]] [--env NAME=value,...]
 *
 * The five subgraphs start once, as processes of their own, on PostgreSQL (BENCH_DATABASE_URL, or the
 * local postgres://postgres@127.0.0.1:5432/test when it answers; a schema of this run's own, dropped
 * afterwards) or else on PGlite. In front of them, each its own process: the project's gateway
 * (distributed mode), stock @apollo/gateway + @apollo/server, Hive Gateway and Hive Gateway with Hive
 * Router's Rust query planner (`--hive-router-runtime`), all on the checked-in
 * supergraph (pointed at this run's subgraph ports); beside them the project's one-process server
 * (`npm start`) on PGlite and on PostgreSQL. The load generator (autocannon) is a process of its own.
 * The subgraph servers serve only calls signed with PRINCIPAL_SECRET (one of this run's own, given to every
 * server): the peers sign theirs with the project's PrincipalSigner (bench/peers), so every gateway compared
 * pays the same signing work per call.
 *
 * Every workload is first checked: each gateway must answer its operations with the same data. Then each
 * target is warmed up, and the rounds interleave the targets, in turn forwards and backwards (A B C,
 * C B A, ...), so that the machine's drift falls on all of them alike, and so does going first after
 * another server's turn (its leftover work, cold caches). Written to bench/results/gateway.{md,json} (a full run) with the date,
 * the machine's load average and the commit.
 *
 * `--baseline DIR`: another checkout of this project (with its node_modules), whose gateway and one-process
 * server run beside this tree's, against the same subgraph processes, in place of the peers: the same
 * checks that every target answers alike, and the two trees' rates and CPU side by side in one run.
 * `--baseline-env NAME=value[,...]` sets variables for the baseline's servers only: with `--baseline .`, one
 * tree against itself with a setting changed (`USAGE_RECORDING=false` measures what field usage costs).
 * `--env NAME=value[,...]` sets variables for this tree's servers only. Two slots of identical code can
 * differ by several percent in one run (docs/performance.md), so a setting's cost is measured crossed over:
 * one run with it on in this tree's slot and off in the baseline's, one the other way round; the slots'
 * bias cancels in the geometric mean of the two ratios.
 * `--targets project,project-baseline` runs only those targets (keys as in bench/results/gateway.json).
 *
 * The phases, in the order they run, are under bench/gateway/: databases.ts (seeding), subgraph-servers.ts,
 * targets.ts (the gateways under test), verify.ts (the checks), rounds.ts (the measured rounds), profiling.ts
 * and report.ts; run-context.ts holds what they share.
 */

export default async function gatewayBench(): Promise<void> {
  const options = parseOptions(argv.slice(3));
  const run = new BenchRun();
  let load: LoadGenerator | null = null;
  const started = new Date();
  const loadAverages: number[] = [loadavg()[0]!];
  try {
    await seedDatabases(run, options);
    const subgraphs = await startSubgraphs(run);
    const targets = await startTargets(run, options, subgraphs);
    load = new LoadGenerator(ROOT);
    const measuring: Measuring = { options, load, meters: cpuMeters(run, subgraphs, load), subgraphs: subgraphs.servers, loadAverages };
    const mix = mixRequests(options.bookings);
    const pairs = restPairs();
    const { verified, pageStarts } = await verifyWorkloads(options, targets, mix, pairs);
    const shared = targets.filter((t) => !t.unshared);
    const unshared = targets.filter((t) => t.unshared);
    const results = await measureWorkloads(measuring, { options, shared, unshared, mix, pairs, pageStarts }, verified);
    loadAverages.push(loadavg()[0]!);
    const profiles = await profileGateways(run, measuring, subgraphs, mix);
    const bench: BenchResults = {
      date: started.toISOString(),
      seconds: Math.round((Date.now() - started.getTime()) / 1000),
      options: recordedOptions(options),
      database: run.postgres ? 'PostgreSQL (subgraph processes and npm start on PostgreSQL share one schema)' : 'PGlite (a data directory per process)',
      loadAverages,
      targets: targets.map((t) => ({ key: t.key, label: t.label })),
      workloads: results,
      profiles,
    };
    printResults(results, bench);
    if (options.out) {
      const written = writeResults(bench, options.out, ROOT);
      log(`written: ${written.join(', ')}`);
    }
  } finally {
    load?.close();
    await run.close();
  }
}

/**
 * What every round reads besides the target's gateway: each subgraph process, the load generator,
 * PostgreSQL's own CPU when it runs on this machine (its processes are read from /proc), and the machine's.
 */
function cpuMeters(run: BenchRun, subgraphs: SubgraphServers, load: LoadGenerator): Record<string, CpuMeter> {
  const meters: Record<string, CpuMeter> = Object.fromEntries(subgraphNames.map((name, i) => [name, subgraphs.servers[i]!.child.pid!]));
  meters['load generator'] = load.pid;
  if (run.postgres && isLocal(run.postgres.url) && postgresCpuMs() !== null) meters['database'] = () => postgresCpuMs() ?? Number.NaN;
  meters['machine'] = machineCpuMs;
  return meters;
}

/** The options as the results record them: sets as lists, the output directory relative to the project. */
function recordedOptions(options: Options): Record<string, unknown> {
  return {
    ...options,
    only: options.only ? [...options.only] : null,
    targets: options.targets ? [...options.targets] : null,
    out: options.out ? relative(ROOT, options.out) : null,
  };
}
