import type { LoadResult } from './load.js';
import type { Cell, RunSettings, Target } from './measure.js';
import type { Options, WorkloadName } from './options.js';
import { poolOf } from './seed.js';
import { BATCH_SIZE, batchOf, FEDERATED_QUERY, graphql, PAGE_SIZE, PAGING_QUERY, SHALLOW_QUERY, type RequestSpec, type RestPair } from './workloads.js';

/** What a workload's cells and settings are made of: the run's options and targets, and what the checks found. */
export interface WorkloadContext {
  options: Options;
  /** The targets that share work between requests; every workload but the nothing-shared ones runs on them. */
  shared: Target[];
  /** The targets with nothing shared between requests; they run the nothing-shared workloads only. */
  unshared: Target[];
  mix: RequestSpec[];
  pairs: RestPair[];
  /** Where the paging walks start, spread over the ledger (found by the paging check). */
  pageStarts: (string | null)[];
}

/** A measured workload: its table's title and cells, and how a target is warmed up and a round sized for it. */
export interface Workload {
  name: WorkloadName;
  title: string | ((ctx: WorkloadContext) => string);
  cells: (ctx: WorkloadContext) => Cell[];
  /** How a target is warmed up; by default --connections for --warmup seconds. */
  warmup?: (ctx: WorkloadContext) => RunSettings;
  /** How much a round sends given what the target's warm-up did; by default --connections for --seconds. */
  round?: (ctx: WorkloadContext, warmup: LoadResult) => RunSettings;
}

const everyTarget = ({ shared }: WorkloadContext, plan: Cell['plan']): Cell[] => shared.map((target) => ({ target, variant: 'graphql', plan }));
const everyUnshared = ({ unshared }: WorkloadContext, plan: Cell['plan']): Cell[] => unshared.map((target) => ({ target, variant: 'graphql', plan }));

/** The workloads, in the order they are measured and reported. */
export const WORKLOAD_TABLE: readonly Workload[] = [
  {
    name: 'federated',
    title: 'federated query: bookings(first: 20) with machines, bill, deliveryForecast',
    cells: (ctx) => everyTarget(ctx, { kind: 'cycle', requests: [graphql(FEDERATED_QUERY)] }),
  },
  { name: 'shallow', title: 'shallow query: fleetSummary', cells: (ctx) => everyTarget(ctx, { kind: 'cycle', requests: [graphql(SHALLOW_QUERY)] }) },
  {
    name: 'federated-unshared',
    title: 'federated query with nothing shared between requests (no collapsing, no fetch cache; the peer without deduplication)',
    cells: (ctx) => everyUnshared(ctx, { kind: 'cycle', requests: [graphql(FEDERATED_QUERY)] }),
  },
  {
    name: 'shallow-unshared',
    title: 'shallow query (fleetSummary) with nothing shared between requests',
    cells: (ctx) => everyUnshared(ctx, { kind: 'cycle', requests: [graphql(SHALLOW_QUERY)] }),
  },
  {
    name: 'mix',
    title: ({ mix }) => `mix of ${mix.length} distinct queries over four subgraphs`,
    cells: (ctx) => everyTarget(ctx, { kind: 'cycle', requests: ctx.mix }),
  },
  {
    name: 'rest',
    title: 'REST GET /rental/bookings?limit=20 and /rental/fleet/summary in turn, against the same operations as GraphQL POST',
    cells: ({ shared, pairs }) =>
      shared
        .filter((t) => t.project)
        .flatMap((target) => [
          { target, variant: 'rest', plan: { kind: 'cycle' as const, requests: pairs.map((p) => p.rest) } },
          { target, variant: 'graphql', plan: { kind: 'cycle' as const, requests: pairs.map((p) => p.graphql) } },
        ]),
  },
  {
    name: 'batched',
    title: `batches: the mix's first ${BATCH_SIZE} queries in one POST (an array, as Apollo Client's BatchHttpLink sends), beside the same ${BATCH_SIZE} sent one per request; rates per operation`,
    // The project's gateways only: stock Apollo Server and Hive Gateway serve no batches as configured.
    cells: ({ shared, mix }) =>
      shared
        .filter((t) => t.project)
        .flatMap((target) => [
          { target, variant: 'batch', operations: BATCH_SIZE, plan: { kind: 'cycle' as const, requests: [batchOf(mix.slice(0, BATCH_SIZE))] } },
          { target, variant: 'graphql', plan: { kind: 'cycle' as const, requests: mix.slice(0, BATCH_SIZE) } },
        ]),
  },
  {
    name: 'paging',
    title: ({ options }) =>
      `paging through the ledger, ${PAGE_SIZE} rows a page: ${options.pagingRows.toLocaleString('en-US')} rows per target (${options.bookings.toLocaleString('en-US')} bookings walked again and again)`,
    // Each connection starts at its own page, spread over the ledger, so that concurrent requests differ.
    cells: (ctx) => {
      const { connections: conns } = ctx.options;
      return everyTarget(ctx, {
        kind: 'paging',
        query: PAGING_QUERY,
        starts: Array.from({ length: conns }, (_, i) => ctx.pageStarts[Math.floor((i * ctx.pageStarts.length) / conns)]!),
      });
    },
    round: ({ options }) => ({ connections: options.connections, amount: Math.max(1, Math.round(options.pagingRows / PAGE_SIZE / options.rounds)) }),
  },
  {
    name: 'mutations',
    title: 'mutation mix: createQuote, confirmBooking, completeBooking in turn, one machine per chain',
    // Whole chains only (a stop in the middle would leave quotes holding machines): the warm-up is one chain per
    // connection, a round as many chains per connection as the warm-up's pace fits in --seconds.
    warmup: ({ options }) => ({ connections: options.connections, amount: 3 * options.connections }),
    round: ({ options }, w) => {
      const conns = options.connections;
      return { connections: conns, amount: 3 * conns * Math.max(1, Math.round(((w.ok / w.seconds) * options.seconds) / (3 * conns))) };
    },
    cells: ({ shared }) =>
      shared.map((target, i) => ({
        target,
        variant: 'graphql',
        plan: { kind: 'mutations' as const, poolKey: target.key, pool: poolOf(i).slice(1) },
      })),
  },
];
