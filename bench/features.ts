import { Session } from 'node:inspector/promises';
import { createRequire } from 'node:module';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createConnection } from 'node:net';
import { argv } from 'node:process';
import { Worker } from 'node:worker_threads';
import { startServer } from '../gateway/server.js';
import { loadConfig } from '../gateway/config.js';
import { DuckDbEngine } from '../subgraphs/features/duckdb-engine.js';
import { DAY_MS, emptyLabels, type LabelRows, type ViewData } from '../subgraphs/features/frame.js';
import type { FeaturesContext } from '../subgraphs/features/context.js';
import { sortView, tsAsOf } from '../subgraphs/features/ts-engine.js';
import { Random } from '../platform/random.js';
import { SYSTEM_PRINCIPAL } from '../platform/principal.js';
import { quantile as percentile } from './support/stats.js';

/*
 * `npm run bench -- features [labels:rows ...] [--warm-up N] [--no-online]`: the point-in-time join with both
 * engines side by side on the same data (label rows per second, identical matches checked), then online lookups
 * p50/p99 in process and over REST (after N warm-up calls, 3,000 by default), on the database and (when one
 * answers on 127.0.0.1:6379) Redis. Bounded by count and time; traffic only to 127.0.0.1.
 */

const DEFAULT_SIZES: [number, number][] = [
  [10_000, 100_000],
  [100_000, 1_000_000],
  [1_000_000, 10_000_000],
];

/** A feature view of `rows` rows over rows/10 entities, timestamps on an hourly grid (many ties), 2 features. */
function syntheticView(rows: number, rng: Random): ViewData {
  const entities = Math.max(1, Math.floor(rows / 10));
  const view: ViewData = {
    name: 'bench',
    entity: 'policy',
    features: ['a', 'b'],
    ttlMs: 90 * DAY_MS,
    entityCount: entities,
    length: rows,
    entityCode: new Int32Array(rows),
    ts: new Float64Array(rows),
    created: new Float64Array(rows),
    values: [new Float64Array(rows), new Float64Array(rows)],
  };
  const span = 4 * 365 * 24;
  for (let i = 0; i < rows; i++) {
    view.entityCode[i] = rng.int(entities);
    view.ts[i] = rng.int(span) * 3_600_000;
    view.created[i] = view.ts[i]! + rng.int(48) * 3_600_000;
    view.values[0]![i] = i;
    view.values[1]![i] = rng.next();
  }
  return view;
}

function syntheticLabels(n: number, entities: number, rng: Random): LabelRows {
  const labels = emptyLabels(n);
  const span = 4 * 365 * 24;
  for (let i = 0; i < n; i++) {
    labels.keys.policy[i] = rng.int(entities);
    labels.ts[i] = rng.int(span) * 3_600_000;
  }
  return labels;
}

async function pitJoins(sizes: [number, number][]): Promise<void> {
  console.log('\nPoint-in-time join (one view, TTL 90 days, hourly timestamps with ties; DuckDB threads = 2)');
  console.log('Each engine prepares a view once (DuckDB: the dedup table; TypeScript: the sort) and reuses it for every join;');
  console.log('"total" is prepare + one join. DuckDB load is appending the rows from memory (not counted in its total).\n');
  console.log(
    '| label rows | feature rows | DuckDB load s | DuckDB dedup s | DuckDB join s | DuckDB total s | TS sort s | TS join s | TS total s | TS / DuckDB total | TS / DuckDB join | mismatches |',
  );
  console.log('|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const [labelsN, rowsN] of sizes) {
    const rng = new Random(11, `bench-${labelsN}-${rowsN}`);
    const view = syntheticView(rowsN, rng);
    const labels = syntheticLabels(labelsN, view.entityCount, rng);
    let t = performance.now();
    const duck = await DuckDbEngine.open([view], { threads: 2 });
    const load = (performance.now() - t) / 1000;
    // The dedup ran inside open(); run it once more on its own to time it.
    const conn = await duck.instance.connect();
    t = performance.now();
    await conn.run(DuckDbEngine.dedupSql('bench'));
    const dedup = (performance.now() - t) / 1000;
    conn.closeSync();
    t = performance.now();
    const fromDuck = (await duck.join(['bench'], labels, 'AS_KNOWN')).get('bench')!;
    const duckJoin = (performance.now() - t) / 1000;
    duck.close();
    t = performance.now();
    const sorted = sortView(view);
    const sort = (performance.now() - t) / 1000;
    t = performance.now();
    const fromTs = tsAsOf(sorted, labels, view.ttlMs, 'AS_KNOWN');
    const tsJoin = (performance.now() - t) / 1000;
    let mismatches = 0;
    for (let i = 0; i < labelsN; i++) if (fromDuck[i] !== fromTs[i]) mismatches++;
    const tsTotal = sort + tsJoin;
    const duckTotal = dedup + duckJoin;
    console.log(
      `| ${labelsN.toLocaleString('en')} | ${rowsN.toLocaleString('en')} | ${(load - dedup).toFixed(2)} | ${dedup.toFixed(3)} | ${duckJoin.toFixed(3)} | ${duckTotal.toFixed(3)} | ${sort.toFixed(3)} | ${tsJoin.toFixed(3)} | ${tsTotal.toFixed(3)} | ${(tsTotal / duckTotal).toFixed(2)}x | ${(tsJoin / duckJoin).toFixed(2)}x | ${mismatches} |`,
    );
  }
}

/**
 * Calls made before the timed ones (`--warm-up N`; at most 5 s of them). "Warm" means the JIT is done: with
 * 100 calls, V8 was still optimizing the server's and the client's code through the timed calls (TurboFan
 * compiled 457 functions in that window, about a second of its threads' CPU on a 2-core machine, and the
 * server's own median fell from 0.38 to 0.17 ms only after 3,000 calls).
 */
const WARM_UP_CALLS = (() => {
  const at = argv.indexOf('--warm-up');
  const n = at >= 0 ? Number(argv[at + 1]) : 3000;
  if (!Number.isInteger(n) || n < 0) throw new Error('--warm-up takes a number of calls');
  return n;
})();

async function lookups(call: (i: number) => Promise<unknown>, count: number) {
  const warmUntil = performance.now() + 5000;
  for (let i = 0; i < WARM_UP_CALLS && performance.now() < warmUntil; i++) await call(i);
  const times: number[] = [];
  const deadline = performance.now() + 5000;
  for (let i = 0; i < count && performance.now() < deadline; i++) {
    const t = performance.now();
    await call(i);
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  return { n: times.length, p50: percentile(times, 0.5), p99: percentile(times, 0.99) };
}

/**
 * The REST caller runs in a worker thread (its own event loop, as a client elsewhere would): the figures are
 * the server's answer times plus one loopback round trip, not the server's loop also running the client.
 * Two clients, side by side: `fetch` (Node's WHATWG fetch, with its streams and Response objects) and
 * undici's `request` on one kept-alive connection (what the gateway itself uses for subgraph calls). The
 * worker shares the machine's two cores with the server, so what a client costs shows in the figures.
 */
const REST_CLIENT = `
const { parentPort, workerData } = require('node:worker_threads');
const { url, count, client, undiciPath, warmUp } = workerData;
const id = (i) => 'P-' + String((i % 3000) + 1).padStart(6, '0');
const pool = client === 'request' ? new (require(undiciPath).Pool)(url, { connections: 1 }) : null;
const call = client === 'request'
  ? async (i) => {
      const r = await pool.request({ method: 'GET', path: '/features/online/policy/' + id(i) });
      if (r.statusCode !== 200) throw new Error('lookup failed: ' + r.statusCode);
      await r.body.arrayBuffer();
    }
  : async (i) => {
      const r = await fetch(url + '/features/online/policy/' + id(i));
      if (r.status !== 200) throw new Error('lookup failed: ' + r.status);
      await r.arrayBuffer();
    };
(async () => {
  let warmed = 0;
  const warmUntil = performance.now() + 5000;
  for (; warmed < warmUp && performance.now() < warmUntil; warmed++) await call(warmed);
  const times = [];
  const deadline = performance.now() + 5000;
  for (let i = 0; i < count && performance.now() < deadline; i++) {
    const t = performance.now();
    await call(i);
    times.push(performance.now() - t);
  }
  if (pool) await pool.close();
  parentPort.postMessage({ times, warmed });
})().catch((e) => parentPort.postMessage({ error: String(e) }));
`;

async function restLookups(url: string, count: number, client: 'fetch' | 'request', warmUp = WARM_UP_CALLS) {
  const undiciPath = createRequire(import.meta.url).resolve('undici');
  const worker = new Worker(REST_CLIENT, { eval: true, workerData: { url, count, client, undiciPath, warmUp } });
  try {
    const answer = await new Promise<{ times: number[]; warmed: number } | { error: string }>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    if ('error' in answer) throw new Error(answer.error);
    const times = answer.times.sort((a, b) => a - b);
    // The worker's warm-up calls, then the timed ones.
    return { n: times.length, calls: answer.warmed + times.length, p50: percentile(times, 0.5), p99: percentile(times, 0.99) };
  } finally {
    await worker.terminate();
  }
}

/**
 * Bytes the server allocates per REST lookup: V8's sampling heap profiler on this thread (the server's; the
 * client is a worker thread with a heap of its own), one sample per 1 KiB allocated on average, objects the
 * collector has already freed included, over every call of one `fetch` client run.
 */
async function allocatedPerLookup(url: string, count: number): Promise<{ calls: number; bytesPerCall: number }> {
  const session = new Session();
  session.connect();
  try {
    await session.post('HeapProfiler.enable');
    await session.post('HeapProfiler.startSampling', {
      samplingInterval: 1024,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
    // The server has served the timed runs before this one: no warm-up calls (the client's heap is its own).
    const run = await restLookups(url, count, 'fetch', 0);
    const { profile } = await session.post('HeapProfiler.stopSampling');
    let bytes = 0;
    const walk = (node: { selfSize: number; children: (typeof node)[] }): void => {
      bytes += node.selfSize;
      for (const child of node.children) walk(child);
    };
    walk(profile.head);
    return { calls: run.calls, bytesPerCall: bytes / run.calls };
  } finally {
    session.disconnect();
  }
}

const redisAnswers = () =>
  new Promise<boolean>((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port: 6379 });
    socket.setTimeout(500);
    socket.once('connect', () => (socket.end(), resolve(true)));
    socket.once('error', () => resolve(false));
    socket.once('timeout', () => (socket.destroy(), resolve(false)));
  });

async function onlineLookups(): Promise<void> {
  // As deployed: answers are not re-checked against their documented schema (a check for the test suites).
  process.env['NODE_ENV'] ??= 'production';
  console.log(
    `\nOnline lookups (3,000 policies materialized; sequential; each row after ${WARM_UP_CALLS.toLocaleString('en')} warm-up calls (at most 5 s), then up to 3,000 calls or 5 s; NODE_ENV=${process.env['NODE_ENV']})\n`,
  );
  console.log('| store | path | calls | p50 ms | p99 ms | on the server: p50 ms | p99 ms |');
  console.log('|---|---|---:|---:|---:|---:|---:|');
  const stores: { name: string; env: Record<string, string> }[] = [{ name: 'database (PGlite)', env: {} }];
  if (await redisAnswers()) stores.push({ name: 'redis', env: { REDIS_URL: 'redis://127.0.0.1:6379', FEATURES_REDIS_PREFIX: `bench-${process.pid}` } });
  else console.log('(Redis: nothing answers on 127.0.0.1:6379, skipped)');
  const allocations: string[] = [];
  for (const store of stores) {
    const server = await startServer({
      config: loadConfig({ PORT: '0', DATA_DIR: ':memory:', FEATURES_DATA_DIR: ':memory:', LOG_LEVEL: 'silent', FEATURES_POLICIES: '3000', ...store.env }),
    });
    try {
      const res = await fetch(`${server.url}/features/offline`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      if (!res.ok) throw new Error(`materialization failed: ${res.status}`);
      const ctx = server.subgraphs.get('features')!.context({ headers: {}, principal: SYSTEM_PRINCIPAL }) as FeaturesContext;
      const id = (i: number) => `P-${String((i % 3000) + 1).padStart(6, '0')}`;
      const inProcess = { ...(await lookups((i) => ctx.service.onlineFeatures('policy', id(i)), 3000)), served: '- | -' };
      // Each lookup also timed on the server, from its request event to its last byte written: what the
      // client's figure holds beyond that is the client's own work and the scheduling of two threads.
      const onServer: number[] = [];
      const timeOnServer = (_request: IncomingMessage, response: ServerResponse) => {
        const started = performance.now();
        response.once('finish', () => onServer.push(performance.now() - started));
      };
      server.app.server.on('request', timeOnServer);
      const served = () => {
        const times = onServer
          .splice(0)
          .slice(-3000)
          .sort((a, b) => a - b);
        return `${percentile(times, 0.5).toFixed(3)} | ${percentile(times, 0.99).toFixed(3)}`;
      };
      const overFetch = { ...(await restLookups(server.url, 3000, 'fetch')), served: served() };
      const overRequest = { ...(await restLookups(server.url, 3000, 'request')), served: served() };
      // Off before allocations are counted (the timing's own closures would be counted with them).
      server.app.server.off('request', timeOnServer);
      const allocated = await allocatedPerLookup(server.url, 2000);
      for (const [path, m] of [
        ['in process', inProcess],
        ['REST (gateway, loopback; fetch client in a worker thread)', overFetch],
        ['REST (gateway, loopback; undici request client in a worker thread)', overRequest],
      ] as const) {
        console.log(`| ${store.name} | ${path} | ${m.n} | ${m.p50.toFixed(3)} | ${m.p99.toFixed(3)} | ${m.served} |`);
      }
      allocations.push(`| ${store.name} | ${allocated.calls} | ${(allocated.bytesPerCall / 1024).toFixed(1)} |`);
    } finally {
      await server.close();
    }
  }
  console.log('\nAllocated by the server per REST lookup (fetch client; V8 sampling heap profiler, freed objects included)\n');
  console.log('| store | calls | KiB per lookup |');
  console.log('|---|---:|---:|');
  for (const row of allocations) console.log(row);
}

export default async function run(): Promise<void> {
  const args = argv.slice(3).filter((a) => /^\d+:\d+$/.test(a));
  const sizes = args.length > 0 ? args.map((a) => a.split(':').map(Number) as [number, number]) : DEFAULT_SIZES;
  // Lookups first, while the process holds nothing else: the joins leave a heap of hundreds of MiB whose
  // collections would otherwise land in the lookups' tail.
  if (!argv.includes('--no-online')) await onlineLookups();
  await pitJoins(sizes);
}
