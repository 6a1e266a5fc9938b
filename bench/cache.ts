import { argv } from 'node:process';
import { subgraphNames } from '../schema/subgraphs.js';
import { selfCheck } from './cache/stale.js';
import { parseCacheOptions, type CacheOptions } from './cache/options.js';
import { printResults, summarize, writeResults } from './cache/report.js';
import { CacheLoad, measureTargets } from './cache/rounds.js';
import { startCacheTargets, stateCacheCounters, writeKeys } from './cache/targets.js';
import { MACHINES_PER_WRITER } from './cache/workload.js';
import { isLocal, postgresSchema } from './gateway/databases.js';
import type { CpuMeter } from './gateway/measure.js';
import { machineCpuMs, postgresCpuMs } from './gateway/processes.js';
import { BenchRun, log, ROOT } from './gateway/run-context.js';
import { machineId, POOL_FIRST_MACHINE, seedDatabase } from './gateway/seed.js';
import { startSubgraphs, type SubgraphServers } from './gateway/subgraph-servers.js';

/*
 * npm run bench -- cache [--seconds N] [--rounds N] [--concurrency N] [--warmup N] [--tenants N] [--lag MS]
 *                        [--write-share F] [--targets k1,k2] [--out DIR]
 *
 * `--write-share 0` runs the reads alone: what the cache can give when nothing changes.
 * What a gateway's cache buys a dashboard, and what it costs in freshness. The workload is a dashboard's: 95%
 * reads (the fleet summary, the machine list with each machine's status, a tenant's ledger page of 50 bookings
 * with its total, and one of the tenant's recent bookings with its delivery tracking, in equal shares) and 5%
 * writes (quote a machine, confirm the quote into a booking, complete the oldest of a writer's two bookings so
 * its machines come back), half of the writes over GraphQL and half over the REST paths. Its clients
 * (`--concurrency`, default 32; a quarter of them writers) each hold one of `--tenants` tenants' API keys
 * (default 4, new to the run, so tenant-scoped answers differ per tenant) and one of the target's two gateway
 * processes (round-robin), and send one request at a time; a writer's reads carry the `state-position` of its
 * last write where the target gave one (read-your-writes), other readers' do not.
 *
 * The five subgraph servers run once, on one PostgreSQL database (BENCH_DATABASE_URL, or
 * postgres://postgres@127.0.0.1:5432/test; a schema of the run's own, dropped afterwards). The targets, each two
 * processes in front of them: `project-cached`, the project's gateway with its state cache on
 * (STATE_CACHE_MB=64, DATABASE_URL the shared database, whose event log the cache follows); `project-uncached`,
 * the same with STATE_CACHE_MB=0; `hive-cached`, Hive Gateway with its response cache (1 s, invalidated by
 * mutations, per principal; bench/peers/hive-cache.config.ts). Hive serves no REST paths, so its writes all go
 * over GraphQL; it checks no key (it signs each subgraph call as the key's principal) and has no rate limits
 * (the project's gateways run with RATE_LIMIT_PER_S=0).
 *
 * Each target is warmed up (`--warmup`, default 2 s), then rounds of `--seconds` (default 5) interleave the
 * targets, in turn forwards and backwards, `--rounds` times (default 4). Measured per target: requests per
 * second (reads and writes apart), p50 and p99 latency, CPU ms per request of its two gateway processes (summed),
 * of the subgraph servers, of PostgreSQL and of the whole machine (from /proc, read once the servers are quiet
 * after each round), and stale reads: every read is judged against the writes acknowledged more than LAG
 * (`--lag`, default 1000 ms) before it started, by facts that only grow (bench/cache/stale.ts), and a writer's
 * reads also against its own writes at LAG 0. The ratios are the cached target's rate over the uncached one's
 * and over Hive's. Written to bench/results/cache.json (or `--out DIR`) with every round. Traffic only to
 * 127.0.0.1; every round is bounded in time.
 */

export default async function cacheBench(): Promise<void> {
  const options = parseCacheOptions(argv.slice(3));
  // The stale count must be able to fail: a synthetic stale read is counted, or the run stops here.
  selfCheck();
  const run = new BenchRun();
  let load: CacheLoad | null = null;
  const started = new Date();
  try {
    run.postgres = await postgresSchema('bench_cache');
    if (!run.postgres) throw new Error('the cache benchmark runs on PostgreSQL: set BENCH_DATABASE_URL, or start it on 127.0.0.1:5432 (database test)');
    const writers = Math.max(1, Math.round(options.concurrency / 4));
    const machines = Array.from({ length: writers }, (_, w) =>
      Array.from({ length: MACHINES_PER_WRITER }, (_, k) => machineId(POOL_FIRST_MACHINE + w * MACHINES_PER_WRITER + k)),
    );
    log(`seeding PostgreSQL schema ${run.postgres.schema}: 2,000 bookings of the demo tenant, ${writers * MACHINES_PER_WRITER} machines for the writers`);
    await seedDatabase(run.postgres, { bookings: 2000, poolMachines: writers * MACHINES_PER_WRITER });
    const subgraphs = await startSubgraphs(run);
    const keys = writeKeys(run, options.tenants);
    const targets = await startCacheTargets(run, subgraphs, keys, options.targets);
    load = new CacheLoad(ROOT, {
      tenants: keys.keys.map((k) => ({ name: k.tenant, key: k.key })),
      concurrency: options.concurrency,
      writers,
      machines,
      writeShare: options.writeShare,
      lagMs: options.lagMs,
      timeoutMs: 10_000,
    });
    const serving = [...subgraphs.servers, ...targets.flatMap((t) => t.servers)].map((s) => s.child.pid!);
    const rounds = await measureTargets({ options, load, meters: cpuMeters(run, subgraphs, load), serving }, targets);
    const summaries = targets.map((t) => summarize(t, rounds, subgraphNames));
    printResults(summaries, options.lagMs, options.writeShare);
    // What the state cache did over the whole run (warm-up included), by its own counters.
    for (const target of targets) {
      const counters = await stateCacheCounters(target, keys.metricsKey);
      if (counters) log(`${target.key}: state cache ${JSON.stringify(counters)}`);
    }
    const written = writeResults(options.out, ROOT, runRecord(options, started, writers), summaries, rounds);
    log(`written: ${written}`);
  } finally {
    load?.close();
    await run.close();
  }
}

/** Each subgraph process, the load generator, PostgreSQL's processes when it runs here, and the whole machine. */
function cpuMeters(run: BenchRun, subgraphs: SubgraphServers, load: CacheLoad): Record<string, CpuMeter> {
  const meters: Record<string, CpuMeter> = Object.fromEntries(subgraphNames.map((name, i) => [name, subgraphs.servers[i]!.child.pid!]));
  meters['load generator'] = load.pid;
  if (run.postgres && isLocal(run.postgres.url) && postgresCpuMs() !== null) meters['database'] = () => postgresCpuMs() ?? Number.NaN;
  meters['machine'] = machineCpuMs;
  return meters;
}

/** How the run was made, as cache.json records it. */
function runRecord(options: CacheOptions, started: Date, writers: number): Record<string, unknown> {
  return {
    date: started.toISOString(),
    seconds: Math.round((Date.now() - started.getTime()) / 1000),
    options: { ...options, targets: options.targets ? [...options.targets] : null, out: undefined },
    workload: {
      writeShare: options.writeShare,
      writers,
      readers: options.concurrency - writers,
      reads:
        'fleetSummary; machines { id status ... }; bookings(first: 50) { totalCount edges { node { id status ... } } }; booking(id) { status tracking { ... } }',
      writes: 'createQuote, confirmBooking, completeBooking; on the project targets every second write of a writer over REST',
    },
    database: 'PostgreSQL: the subgraph servers and the project gateways share one schema',
    differences: [
      'Hive Gateway serves no REST paths: its writes all go over GraphQL.',
      "Hive Gateway checks no API key: it signs each subgraph call as the key's principal (an unknown key as the anonymous principal); the project's gateways authenticate and authorize every request.",
      "Hive's response cache lives in each process's memory: a mutation invalidates the entities it names in the process that served it only; the other process's copies live out their 1 s.",
      'Hive has no notion of a state position: a writer reads without one there.',
    ],
  };
}
