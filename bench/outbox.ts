import { writeFileSync } from 'node:fs';
import { argv } from 'node:process';
import { fileURLToPath } from 'node:url';
import { startServer } from '../gateway/server.js';
import { loadConfig } from '../gateway/config.js';
import type { Database } from '../platform/db.js';
import { pruneOutbox } from '../platform/outbox-retention.js';
import { subgraphs } from '../subgraphs/registry.js';
import { PG_BIN, TestPostgres } from '../test/support/postgres.js';
import { quantile, round } from './support/stats.js';

/*
 * npm run bench -- outbox [EVENTS]
 *
 * The bounded outbox, on a PostgreSQL cluster of the benchmark's own (initdb on a free port; PGlite when the
 * machine has no server binaries): EVENTS (default 1,000,000) events older than the retention, shaped as a
 * bonding session's metrics events (the highest-rate topic), written in statements of 100,000; their rows and bytes
 * per event; then quotes made one after another (POST /rental/pricing/quote through the gateway, the
 * machines released between quotes by a clock that moves past each quote's expiry) without pruning, and
 * again while the pruner deletes every one of those events in its batches: the p50/p99 of a quote in both,
 * side by side, and the pruner's rate and CPU per thousand events (this process; the database's own CPU is
 * the server's). Traffic only to 127.0.0.1; bounded in count and time.
 */

const EVENTS = Number(argv[3] ?? 1_000_000);
const QUOTES_IDLE = 300;

/** A bonding metrics event as a session writes it (16 paths' figures): the payload pruning deals with most. */
function metricsPayload(): Record<string, unknown> {
  const paths = Array.from({ length: 4 }, (_, i) => ({
    id: `p${i}`,
    kind: ['fiber', 'lte', 'satellite', 'microwave'][i],
    up: true,
    latencyMs: 12.5 + i,
    jitterMs: 1.2,
    lossPct: 0.1,
    capacityMbps: 500,
    outageProbability: 0.01,
    sharedRisk: [`duct-${i % 2}`],
  }));
  return {
    sessionId: 'BS-000000000000',
    kind: 'metrics',
    state: 'bonded',
    previousState: null,
    tick: 1,
    reason: 'p0 latency up, p2 loss down',
    paths,
    at: new Date().toISOString(),
    runner: 'host:1:0',
  };
}

/** The gateway's clock, moved ahead by the quotes so that each finds its machine free again. */
interface MovingClock {
  now: () => Date;
  advance: (ms: number) => void;
}

function movingClock(): MovingClock {
  let offsetMs = 0;
  return {
    now: () => new Date(Date.now() + offsetMs),
    advance: (ms) => {
      offsetMs += ms;
    },
  };
}

/** The outbox after the events were written: how long that took, and its size per event. */
interface Written {
  writeS: number;
  bytesPerEvent: number;
  heapPerEvent: number;
}

/** The pruner's run, and the quote times measured while it ran. */
interface Pruning {
  result: Awaited<ReturnType<typeof pruneOutbox>>;
  pruneS: number;
  cpu: NodeJS.CpuUsage;
  during: number[];
  left: number;
}

export default async function main(): Promise<void> {
  const cluster = PG_BIN ? await TestPostgres.start() : null;
  const clock = movingClock();
  const config = loadConfig({
    PORT: '0',
    LOG_LEVEL: 'warn',
    DATA_DIR: ':memory:',
    FEATURES_DATA_DIR: ':memory:',
    QUOTE_TTL_SECONDS: '5',
    QUOTE_SWEEP_INTERVAL_MS: '600000',
    OUTBOX_PRUNE_INTERVAL_MS: '86400000',
    BONDING_TICK_MS: '600000',
    FLEET_TICK_MS: '600000',
    TRACKING_TICK_MS: '600000',
    ...(cluster ? { DATABASE_URL: cluster.url } : {}),
  });
  const server = await startServer({ config, clock });
  const db = server.db!;
  try {
    console.log(`outbox bench: ${EVENTS.toLocaleString('en')} events on ${db.kind}${cluster ? ' (a cluster of its own)' : ''}`);
    const written = await writeEvents(db);
    const quote = quoter(server.url, clock);
    for (let i = 0; i < 20; i++) await quote(); // warm-up
    const idle: number[] = [];
    for (let i = 0; i < QUOTES_IDLE; i++) idle.push(await quote());
    const pruning = await pruneWhileQuoting(db, quote);
    report(db.kind, cluster !== null, written, idle, pruning);
  } finally {
    await server.close();
    await cluster?.close();
  }
}

/** Writes EVENTS events older than the retention, in statements of 100,000, and measures the table. */
async function writeEvents(db: Database): Promise<Written> {
  const t0 = performance.now();
  // In statements of 100,000 (each well within DATABASE_QUERY_TIMEOUT_MS).
  for (let from = 0; from < EVENTS; from += 100_000) {
    await db.query(
      `INSERT INTO outbox (topic, key, payload, audience, tags, created_at)
       SELECT 'bonding.session', k.key, $1::jsonb,
              '{"owner":{"tenant":"bench","principal":"bench"},"grain":"principal"}'::jsonb,
              ARRAY['BondingSession', 'BondingSession:' || k.key, 'BondingSession@bench'], now() - interval '8 days'
       FROM generate_series($2::int, $3::int) AS i, LATERAL (SELECT 'BS-' || lpad((i % 1000)::text, 12, '0') AS key) k`,
      [JSON.stringify(metricsPayload()), from + 1, Math.min(EVENTS, from + 100_000)],
    );
  }
  const writeS = (performance.now() - t0) / 1000;
  const size = await db.query<{ rows: string; table: string; total: string }>(
    `SELECT (SELECT count(*) FROM outbox)::text AS rows, pg_relation_size('outbox')::text AS table, pg_total_relation_size('outbox')::text AS total`,
  );
  const rows = Number(size.rows[0]!.rows);
  return { writeS, bytesPerEvent: Number(size.rows[0]!.total) / rows, heapPerEvent: Number(size.rows[0]!.table) / rows };
}

/** One quote through the gateway per call, answering its time in ms; the machines go round fifteen. */
function quoter(url: string, clock: MovingClock): () => Promise<number> {
  let machine = 0;
  return async () => {
    // Every quote's machines are free again: the clock moves past the previous quote's expiry.
    clock.advance(10_000);
    const id = `EQ-${String((machine++ % 15) + 1).padStart(3, '0')}`;
    const startTime = new Date(clock.now().getTime() + 48 * 3_600_000).toISOString();
    const t = performance.now();
    const res = await fetch(`${url}/rental/pricing/quote`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ machine_ids: [id], location_id: 'LOC-001', start_time: startTime, duration_hours: 2 }),
    });
    const ms = performance.now() - t;
    if (res.status !== 200) throw new Error(`quote answered ${res.status}: ${await res.text()}`);
    return ms;
  };
}

/** Prunes every event past the retention while quotes run one after another, until the pruner is done. */
async function pruneWhileQuoting(db: Database, quote: () => Promise<number>): Promise<Pruning> {
  const during: number[] = [];
  let pruning = true;
  const cpu0 = process.cpuUsage();
  const p0 = performance.now();
  const pruned = pruneOutbox(db, { retentionS: 7 * 86_400, policies: subgraphs.flatMap((m) => m.retention ?? []), relayedThrough: async () => null }).finally(
    () => {
      pruning = false;
    },
  );
  while (pruning) during.push(await quote());
  const result = await pruned;
  const pruneS = (performance.now() - p0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const left = Number((await db.query<{ n: string }>(`SELECT count(*)::text AS n FROM outbox WHERE topic = 'bonding.session'`)).rows[0]!.n);
  return { result, pruneS, cpu, during, left };
}

/** Prints the table and writes it to bench/results/outbox.md. */
function report(kind: Database['kind'], ownCluster: boolean, written: Written, idle: number[], pruning: Pruning): void {
  const { writeS, bytesPerEvent, heapPerEvent } = written;
  const { result, pruneS, cpu, during, left } = pruning;
  idle.sort((a, b) => a - b);
  during.sort((a, b) => a - b);
  const lines = [
    `# Outbox retention (npm run bench -- outbox ${EVENTS})`,
    '',
    `${new Date().toISOString().slice(0, 10)}, ${kind}${ownCluster ? " (a cluster of the benchmark's own, fsync off)" : ''}, one process; quotes through the gateway one after another.`,
    '',
    '| | value |',
    '|---|---:|',
    `| events written (statements of 100,000) | ${EVENTS.toLocaleString('en')} in ${round(writeS)} s |`,
    `| bytes per event, table and indexes | ${Math.round(bytesPerEvent)} (heap ${Math.round(heapPerEvent)}) |`,
    `| pruned | ${result.pruned.toLocaleString('en')} in ${round(pruneS)} s (${Math.round(result.pruned / pruneS).toLocaleString('en')} events/s); ${left} left of the topic |`,
    `| CPU of this process (gateway, quotes and pruner) per 1,000 events pruned | ${round((cpu.user + cpu.system) / 1000 / (result.pruned / 1000))} ms |`,
    `| quote p50 / p99, no pruning (${idle.length}) | ${round(quantile(idle, 0.5))} / ${round(quantile(idle, 0.99))} ms |`,
    `| quote p50 / p99, while pruning (${during.length}) | ${round(quantile(during, 0.5))} / ${round(quantile(during, 0.99))} ms |`,
    `| p99 while pruning / without | ${round(quantile(during, 0.99) / quantile(idle, 0.99))}x |`,
  ];
  console.log(lines.join('\n'));
  writeFileSync(fileURLToPath(new URL('./results/outbox.md', import.meta.url)), `${lines.join('\n')}\n`);
}
