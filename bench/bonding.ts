import { availableParallelism, cpus } from 'node:os';
import { loadConfig } from '../gateway/config.js';
import { startServer } from '../gateway/server.js';
import { runBb84 } from '../subgraphs/bonding/bb84.js';
import { hybridKey, mlKemExchange } from '../subgraphs/bonding/hybrid.js';
import { PATH_KINDS } from '../subgraphs/bonding/link-model.js';
import { Random } from '../platform/random.js';
import { recommend, type CandidatePath } from '../subgraphs/bonding/recommend.js';
import { ownOutageOf } from '../subgraphs/bonding/state-machine.js';
import { toeplitzFft, toeplitzWords } from '../subgraphs/bonding/toeplitz.js';
import { quantile as percentile } from './support/stats.js';

/*
 * `npm run bench -- bonding`: 256-bit hybrid keys per second (in process and end to end through REST),
 * Toeplitz hashing throughput on a 1 Mbit block, and path recommendation time at 10, 100 and 500 paths
 * (in process and through REST). Every measurement is bounded by a count and a time budget; traffic goes
 * to 127.0.0.1 only.
 */

const MAX_SECONDS = 4;

async function measure(call: (i: number) => unknown, maxCalls: number, warmup = 3) {
  for (let i = 0; i < warmup; i++) await call(i);
  const latencies: number[] = [];
  const deadline = performance.now() + MAX_SECONDS * 1000;
  const started = performance.now();
  for (let i = 0; i < maxCalls && performance.now() < deadline; i++) {
    const t = performance.now();
    await call(i);
    latencies.push(performance.now() - t);
  }
  const elapsed = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  return { calls: latencies.length, perSecond: latencies.length / elapsed, p50: percentile(latencies, 0.5), p99: percentile(latencies, 0.99) };
}

function candidatePaths(n: number, seed: number): CandidatePath[] {
  const rng = new Random(seed, 'bench-paths');
  return Array.from({ length: n }, (_, i) => {
    const kind = PATH_KINDS[i % PATH_KINDS.length]!;
    return {
      id: `p${i}`,
      latencyMs: 2 + rng.next() * 200,
      jitterMs: rng.next() * 20,
      lossPct: rng.next() * 2,
      capacityMbps: 20 + rng.next() * 980,
      up: rng.next() > 0.05,
      ownOutage: ownOutageOf({ kind }),
      sharedRisk: [`conduit:d${rng.int(Math.max(2, n / 4))}`, `cell-site:m${rng.int(Math.max(2, n / 6))}`],
    };
  });
}

const fmt = (x: number) => (x >= 100 ? x.toFixed(0) : x >= 1 ? x.toFixed(2) : x.toFixed(3));

type Measured = Awaited<ReturnType<typeof measure>>;
/** A Toeplitz hashing row: the form, input bits, output bits, median milliseconds. */
type ToeplitzRow = [string, number, number, number];
/** An in-process recommendation row: paths, p50 and p99 ms, pairs in all, pairs evaluated. */
type RecommendationRow = [number, number, number, number, number];
/** A REST recommendation row: paths, p50 and p99 ms. */
type RestRecommendationRow = [number, number, number];

export default async function benchBonding(): Promise<void> {
  const toeplitzRows = toeplitzTimes();
  const recommendationRows = await recommendationsInProcess();
  const inProcess = await keysInProcess();
  const { restKeys, restRecommendationRows } = await overRest();
  printTable(inProcess, restKeys, toeplitzRows, recommendationRows, restRecommendationRows);
}

/** Toeplitz hashing: a 1 Mbit block to 512 kbit (FFT), and the word-parallel form on a 64 kbit block. */
function toeplitzTimes(): ToeplitzRow[] {
  const rng = new Random(1, 'bench-toeplitz');
  const bits = (n: number) => Uint8Array.from({ length: n }, () => rng.uint32() & 1);
  const toeplitzRows: ToeplitzRow[] = [];
  for (const [name, n, l, fn, reps] of [
    ['FFT', 1 << 20, 1 << 19, toeplitzFft, 3],
    ['word-parallel', 1 << 16, 1 << 15, toeplitzWords, 3],
    ['FFT', 1 << 16, 1 << 15, toeplitzFft, 5],
  ] as const) {
    const seed = bits(n + l - 1);
    const x = bits(n);
    fn(seed, x, l);
    const times: number[] = [];
    for (let r = 0; r < reps; r++) {
      const t = performance.now();
      fn(seed, x, l);
      times.push(performance.now() - t);
    }
    times.sort((a, b) => a - b);
    toeplitzRows.push([name, n, l, percentile(times, 0.5)]);
  }
  return toeplitzRows;
}

/** Path recommendation, in process. */
async function recommendationsInProcess(): Promise<RecommendationRow[]> {
  const recommendationRows: RecommendationRow[] = [];
  for (const n of [10, 100, 500]) {
    const paths = candidatePaths(n, n);
    const m = await measure(() => recommend(paths, { maxLatencyMs: 150, minCombinedCapacityMbps: 200 }), 2000, 20);
    const r = recommend(paths, { maxLatencyMs: 150, minCombinedCapacityMbps: 200 });
    recommendationRows.push([n, m.p50, m.p99, r.pairsTotal, r.pairsEvaluated]);
  }
  return recommendationRows;
}

/** 256-bit hybrid keys in process: BB84 simulation at 2% noise, ML-KEM-768, HKDF. */
function keysInProcess(): Promise<Measured> {
  let k = 0;
  return measure(() => {
    const run = runBb84({ bits: 256, noise: 0.02, interceptFraction: 0, rng: new Random(k++, 'bench-bb84') });
    if (!run.key) throw new Error('a key run aborted');
    return hybridKey(run.key, mlKemExchange().sharedSecret, 256, 'bench');
  }, 200);
}

/** Keys and recommendations through the REST paths of a gateway started in this process. */
async function overRest(): Promise<{ restKeys: Measured; restRecommendationRows: RestRecommendationRow[] }> {
  const server = await startServer({
    config: loadConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: ':memory:', LOG_LEVEL: 'silent', BONDING_TICK_MS: '1000' }),
  });
  try {
    const post = async (path: string, body?: unknown) => {
      const res = await fetch(`${server.url}${path}`, {
        method: 'POST',
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      if (res.status !== 200) throw new Error(`${path}: HTTP ${res.status} ${await res.text()}`);
      return (await res.json()) as Record<string, unknown>;
    };
    const session = (await post('/bonding/api/bonding/start?user_id=bench'))['session_id'] as string;
    const restKeys = await measure(async () => {
      const r = await post('/bonding/api/qkd/generate', { session_id: session, bits: 256, noise: 0.02 });
      if (r['status'] !== 'completed') throw new Error('a key run aborted');
    }, 200);
    const restRecommendationRows: RestRecommendationRow[] = [];
    for (const n of [10, 100, 500]) {
      const body = optimizeBody(n);
      const m = await measure(() => post('/bonding/api/quantum/optimize', body), 300, 5);
      restRecommendationRows.push([n, m.p50, m.p99]);
    }
    return { restKeys, restRecommendationRows };
  } finally {
    await server.close();
  }
}

/** The REST request body recommending among `n` candidate paths. */
function optimizeBody(n: number) {
  return {
    paths: candidatePaths(n, n).map((p, i) => ({
      id: p.id,
      kind: PATH_KINDS[i % PATH_KINDS.length],
      latency_ms: p.latencyMs,
      jitter_ms: p.jitterMs,
      loss_pct: p.lossPct,
      capacity_mbps: p.capacityMbps,
      up: p.up,
      shared_risk: p.sharedRisk,
    })),
    constraints: { max_latency_ms: 150, min_combined_capacity_mbps: 200 },
  };
}

function printTable(
  inProcess: Measured,
  restKeys: Measured,
  toeplitzRows: readonly ToeplitzRow[],
  recommendationRows: readonly RecommendationRow[],
  restRecommendationRows: readonly RestRecommendationRow[],
): void {
  const lines: string[] = [];
  const row = (...cells: (string | number)[]) => lines.push(`| ${cells.join(' | ')} |`);
  const cpu = cpus()[0]?.model ?? 'unknown CPU';
  console.log(`\nbonding benchmark: Node ${process.version}, ${availableParallelism()} cores (${cpu}); one process, loopback HTTP`);
  console.log(`each row: up to its call count or ${MAX_SECONDS} s after warm-up; latency per call\n`);
  lines.push('| what | size | p50 ms | p99 ms | rate |', '|---|---|---:|---:|---:|');
  row(
    '256-bit hybrid key, in process (BB84 simulation 2% noise + ML-KEM-768 + HKDF)',
    '256 bits',
    fmt(inProcess.p50),
    fmt(inProcess.p99),
    `${fmt(inProcess.perSecond)} keys/s`,
  );
  row('256-bit hybrid key, REST POST /bonding/api/qkd/generate', '256 bits', fmt(restKeys.p50), fmt(restKeys.p99), `${fmt(restKeys.perSecond)} keys/s`);
  for (const [name, n, l, ms] of toeplitzRows) {
    row(`Toeplitz hashing, ${name}`, `${n.toLocaleString('en-US')} -> ${l.toLocaleString('en-US')} bits`, fmt(ms), '', `${fmt(n / 1e6 / (ms / 1000))} Mbit/s`);
  }
  for (const [n, p50, p99, total, evaluated] of recommendationRows) {
    row(
      'path recommendation, in process',
      `${n} paths (${total.toLocaleString('en-US')} pairs, ${evaluated.toLocaleString('en-US')} evaluated)`,
      fmt(p50),
      fmt(p99),
      '',
    );
  }
  for (const [n, p50, p99] of restRecommendationRows) row('path recommendation, REST POST /bonding/api/quantum/optimize', `${n} paths`, fmt(p50), fmt(p99), '');
  console.log(lines.join('\n'));
}
