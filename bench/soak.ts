import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { argv, env } from 'node:process';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';
import { cpuMs, freePort, sleep, startServer, stopServer } from './gateway/processes.js';
import { machineId, POOL_FIRST_MACHINE, seedDatabase } from './gateway/seed.js';
import {
  COMPLETE_MUTATION,
  CONFIRM_MUTATION,
  FEDERATED_QUERY,
  graphql,
  QUOTE_MUTATION,
  restPairs,
  SHALLOW_QUERY,
  type RequestSpec,
} from './gateway/workloads.js';
import { rssKiB } from './subscriptions.js';
import { quantile, slope } from './support/stats.js';

/*
 * npm run bench -- soak [--seconds 900] [--warmup 300] [--rate 40] [--chains 2] [--subscribers 200]
 *
 * One `npm start` server (every subgraph in process, PGlite in a data directory of its own, seeded with
 * 2,000 bookings and a pool of machines) under a steady mixed load, ten minutes measured after a warm-up of
 * five: the gateway's fetch cache and the event hub's replay memory hold what the last five minutes brought
 * (GATEWAY_FETCH_CACHE_MAX_AGE_S, EVENT_REPLAY_MEMORY_AGE_S), so they fill until then and hold steady after;
 * their filling is not growth:
 * - `--rate` reads per second, in turn: the federated ledger query, `fleetSummary`, and the REST paths
 *   `/rental/bookings?limit=20` and `/rental/fleet/summary` (open loop: sent on schedule, whatever the answers);
 * - `--chains` mutation chains per second: quote one machine of the pool, confirm the quote, complete the
 *   booking (the machine returns to the pool), so the fleet's state keeps changing;
 * - `--subscribers` graphql-ws sockets on `fleetSummaryChanged`, each counting the events every change sends.
 *
 * Every 10 s it samples the server's resident set (/proc) and CPU, and the window's answers: count, p50 and
 * p99, errors. After the warm-up, the resident set's slope (least squares, MiB per minute) says whether
 * memory grows; the p99 of each minute says whether the tail drifts. Only 127.0.0.1; bounded in time.
 */

const root = fileURLToPath(new URL('..', import.meta.url));
const SAMPLE_MS = 10_000;
const POOL = 120;
const SUBSCRIPTION = 'subscription { fleetSummaryChanged { cursor reserved utilization surgeMultiplier } }';

interface Options {
  seconds: number;
  warmup: number;
  rate: number;
  chains: number;
  subscribers: number;
}

function parseOptions(args: string[]): Options {
  const number = (flag: string, fallback: number) => {
    const i = args.indexOf(flag);
    if (i < 0) return fallback;
    const n = Number(args[i + 1]);
    if (!Number.isFinite(n) || n < 0) throw new Error(`${flag} wants a number of at least 0, not ${args[i + 1]}`);
    return n;
  };
  const options = {
    seconds: number('--seconds', 900),
    warmup: number('--warmup', 300),
    rate: number('--rate', 40),
    chains: number('--chains', 2),
    subscribers: number('--subscribers', 200),
  };
  if (options.warmup >= options.seconds) throw new Error('--warmup must be shorter than --seconds');
  return options;
}

/** What one 10-second window saw. */
interface Window {
  atS: number;
  rssMiB: number;
  /** The server's JS heap in use and its memory outside the heap (buffers, WebAssembly memory), from its /metrics. */
  heapMiB: number;
  externalMiB: number;
  /** What the gateway's fetch cache holds (it fills up to GATEWAY_FETCH_CACHE_MB, then stays there). */
  fetchCacheMiB: number;
  cpuMsPerS: number;
  answers: number;
  errors: number;
  p50: number;
  p99: number;
  events: number;
}

class Tally {
  latencies: number[] = [];
  errors = 0;
  samples: string[] = [];
  events = 0;

  fail(what: string): void {
    this.errors++;
    if (this.samples.length < 5) this.samples.push(what.slice(0, 300));
  }

  take(): { latencies: number[]; errors: number; events: number } {
    const taken = { latencies: this.latencies, errors: this.errors, events: this.events };
    this.latencies = [];
    this.errors = 0;
    this.events = 0;
    return taken;
  }
}

async function send(url: string, spec: RequestSpec, tally: Tally): Promise<Record<string, unknown> | null> {
  const started = performance.now();
  try {
    const res = await fetch(`${url}${spec.path}`, {
      method: spec.method,
      ...(spec.body ? { body: spec.body, headers: { 'content-type': 'application/json' } } : {}),
      signal: AbortSignal.timeout(10_000),
    });
    const text = await res.text();
    if (res.status !== 200) {
      tally.fail(`${spec.method} ${spec.path}: ${res.status} ${text}`);
      return null;
    }
    const body = JSON.parse(text) as { data?: Record<string, unknown>; errors?: unknown[] };
    if (body.errors) {
      tally.fail(`${spec.method} ${spec.path}: ${text}`);
      return null;
    }
    tally.latencies.push(performance.now() - started);
    return body.data ?? body;
  } catch (error) {
    tally.fail(`${spec.method} ${spec.path}: ${String(error)}`);
    return null;
  }
}

/** Quote, confirm and complete one machine; the machine goes back to the pool whatever happened. */
async function chain(url: string, machine: string, tally: Tally): Promise<void> {
  const startTime = new Date(Math.ceil(Date.now() / 3_600_000) * 3_600_000 + 48 * 3_600_000).toISOString();
  const input = { machineIds: [machine], locationId: `LOC-00${1 + (Number(machine.slice(3)) % 6)}`, startTime, durationHours: 4 };
  const quoted = await send(url, graphql(QUOTE_MUTATION, { input }), tally);
  const quoteId = (quoted?.['createQuote'] as { id: string } | undefined)?.id;
  if (!quoteId) return;
  const confirmed = await send(url, graphql(CONFIRM_MUTATION, { input: { quoteId, customerName: 'Soak customer' } }), tally);
  const bookingId = (confirmed?.['confirmBooking'] as { id: string } | undefined)?.id;
  if (!bookingId) return;
  await send(url, graphql(COMPLETE_MUTATION, { id: bookingId }), tally);
}

/** A graphql-ws subscriber counting events; resolves once the server has registered the subscription. */
function subscribe(url: string, tally: Tally, closed: { count: number }): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url.replace('http', 'ws') + '/graphql', 'graphql-transport-ws');
    ws.once('error', reject);
    ws.once('open', () => ws.send(JSON.stringify({ type: 'connection_init' })));
    ws.on('close', () => closed.count++);
    ws.on('message', (raw: Buffer) => {
      const text = raw.toString();
      if (text.includes('"connection_ack"')) {
        ws.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query: SUBSCRIPTION } }));
        ws.send(JSON.stringify({ type: 'ping' }));
      } else if (text.includes('"pong"')) resolve(ws);
      else if (text.includes('"next"')) {
        if (text.includes('"errors"')) tally.fail(`subscription: ${text}`);
        else tally.events++;
      } else if (text.includes('"error"') || text.includes('"complete"')) tally.fail(`subscription ended: ${text}`);
    });
  });
}

/** The server's own figures of its memory (its /metrics), MiB. */
async function serverMemory(url: string): Promise<{ heapMiB: number; externalMiB: number; fetchCacheMiB: number }> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const gauge = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN) / 1048576;
  return {
    heapMiB: gauge('nodejs_heap_size_used_bytes'),
    externalMiB: gauge('nodejs_external_memory_bytes'),
    fetchCacheMiB: gauge('subgraph_fetch_cache_bytes'),
  };
}

export default async function run(): Promise<void> {
  const options = parseOptions(argv.slice(3));
  const tmp = mkdtempSync(join(tmpdir(), 'ops-supergraph-bench-soak-'));
  const dataDir = join(tmp, 'data');
  const logDir = join(tmp, 'logs');
  mkdirSync(logDir);
  const sockets: WebSocket[] = [];
  let server: Awaited<ReturnType<typeof startServer>> | null = null;
  try {
    console.log(`seeding 2,000 bookings and ${POOL} pool machines`);
    await seedDatabase({ dataDir }, { bookings: 2_000, poolMachines: POOL });
    server = await startSoakServer(dataDir, logDir);
    const tally = new Tally();
    const closed = { count: 0 };
    for (let i = 0; i < options.subscribers; i++) sockets.push(await subscribe(server.url, tally, closed));
    console.log(
      `${options.subscribers} subscribers open; ${options.seconds} s of ${options.rate} reads/s and ${options.chains} mutation chains/s (warm-up ${options.warmup} s)`,
    );
    const load = await drive(server.url, server.child.pid!, options, tally);
    report(options, load, trend(options, load), closed.count, tally.samples);
  } finally {
    for (const ws of sockets) ws.terminate();
    if (server) await stopServer(server);
    rmSync(tmp, { recursive: true, force: true });
  }
}

/** The server as `npm start` runs it, on the seeded data directory. */
async function startSoakServer(dataDir: string, logDir: string): ReturnType<typeof startServer> {
  const port = await freePort();
  return startServer({
    name: 'soak',
    // What `npm start` runs: the compiled server (tools/start.mjs).
    args: ['tools/start.mjs'],
    env: { ...env, PORT: String(port), HOST: '127.0.0.1', DATA_DIR: dataDir, LOG_LEVEL: 'warn', NODE_ENV: env['NODE_ENV'] ?? 'production' },
    port,
    cwd: root,
    logDir,
    startTimeoutMs: 120_000,
  });
}

/** What the load sent, and what each window and the time after the last one saw. */
interface Load {
  windows: Window[];
  sentReads: number;
  sentChains: number;
  skipped: number;
  rest: ReturnType<Tally['take']>;
}

/** Sends the reads and mutation chains on schedule for `options.seconds`, sampling a window every 10 s. */
async function drive(url: string, pid: number, options: Options, tally: Tally): Promise<Load> {
  const [ledger, summary] = restPairs();
  const reads: RequestSpec[] = [graphql(FEDERATED_QUERY), ledger!.rest, graphql(SHALLOW_QUERY), summary!.rest];
  const pool = Array.from({ length: POOL }, (_, k) => machineId(POOL_FIRST_MACHINE + k));
  const inFlight = new Set<Promise<unknown>>();
  const track = (p: Promise<unknown>) => {
    inFlight.add(p);
    void p.finally(() => inFlight.delete(p));
  };
  const started = performance.now();
  const end = started + options.seconds * 1000;
  let sentReads = 0;
  let sentChains = 0;
  let skipped = 0;
  const windows: Window[] = [];
  let lastCpu = cpuMs(pid);
  let nextSample = started + SAMPLE_MS;
  // Open loop, on a 20 ms tick: what the schedule says is due is sent, whatever is still in flight (up to a
  // bound, past which a request is counted as skipped: the server is not keeping up).
  while (performance.now() < end) {
    const elapsed = (performance.now() - started) / 1000;
    while (sentReads < elapsed * options.rate) {
      if (inFlight.size >= 500) skipped++;
      else track(send(url, reads[sentReads % reads.length]!, tally));
      sentReads++;
    }
    while (sentChains < elapsed * options.chains) {
      const machine = pool.shift();
      if (!machine || inFlight.size >= 500) skipped++;
      else track(chain(url, machine, tally).finally(() => pool.push(machine)));
      sentChains++;
    }
    if (performance.now() >= nextSample) {
      const { window, cpu } = await sample(url, pid, tally, Math.round((nextSample - started) / 1000), lastCpu);
      windows.push(window);
      lastCpu = cpu;
      nextSample += SAMPLE_MS;
      printWindow(window);
    }
    await sleep(20);
  }
  await Promise.all(inFlight);
  return { windows, sentReads, sentChains, skipped, rest: tally.take() };
}

/** The window ending at `atS`: the answers since the last one, and the server's memory and CPU since `lastCpu`. */
async function sample(url: string, pid: number, tally: Tally, atS: number, lastCpu: number): Promise<{ window: Window; cpu: number }> {
  const window = tally.take();
  const cpu = cpuMs(pid);
  const sorted = window.latencies.sort((a, b) => a - b);
  const memory = await serverMemory(url).catch(() => ({ heapMiB: Number.NaN, externalMiB: Number.NaN, fetchCacheMiB: Number.NaN }));
  return {
    window: {
      atS,
      rssMiB: rssKiB(pid) / 1024,
      ...memory,
      cpuMsPerS: (cpu - lastCpu) / (SAMPLE_MS / 1000),
      answers: sorted.length,
      errors: window.errors,
      p50: sorted.length ? quantile(sorted, 0.5) : Number.NaN,
      p99: sorted.length ? quantile(sorted, 0.99) : Number.NaN,
      events: window.events,
    },
    cpu,
  };
}

function printWindow(w: Window): void {
  console.log(
    `${String(w.atS).padStart(4)} s  RSS ${w.rssMiB.toFixed(1)} MiB  heap ${w.heapMiB.toFixed(1)}  external ${w.externalMiB.toFixed(1)}  CPU ${w.cpuMsPerS.toFixed(0)} ms/s  answers ${w.answers}  p50 ${w.p50.toFixed(1)} ms  p99 ${w.p99.toFixed(1)} ms  errors ${w.errors}  events ${w.events}`,
  );
}

/** The windows after the warm-up, with the slopes and tail figures the goals are judged on. */
interface Trend {
  measured: Window[];
  rssSlope: number;
  meanRss: number;
  heapSlope: number;
  externalSlope: number;
  lastHalfSlope: number;
  minutes: number;
  growth: number;
  minuteP99: number[];
  p99Slope: number;
  medianP99: number;
  errors: number;
  answers: number;
  events: number;
}

function trend(options: Options, { windows, rest }: Load): Trend {
  const measured = windows.filter((w) => w.atS > options.warmup);
  const perMinute = (points: { x: number; y: number }[]) => slope(points) * 60;
  const rssSlope = perMinute(measured.map((w) => ({ x: w.atS, y: w.rssMiB })));
  const meanRss = measured.reduce((s, w) => s + w.rssMiB, 0) / measured.length;
  const heapSlope = perMinute(measured.filter((w) => Number.isFinite(w.heapMiB)).map((w) => ({ x: w.atS, y: w.heapMiB })));
  const externalSlope = perMinute(measured.filter((w) => Number.isFinite(w.externalMiB)).map((w) => ({ x: w.atS, y: w.externalMiB })));
  const lastHalf = measured.slice(Math.floor(measured.length / 2));
  const lastHalfSlope = perMinute(lastHalf.map((w) => ({ x: w.atS, y: w.rssMiB })));
  const minutes = (options.seconds - options.warmup) / 60;
  const growth = rssSlope * minutes;
  const minuteP99: number[] = [];
  for (let m = 0; m * 6 < measured.length; m++) {
    const slice = measured.slice(m * 6, m * 6 + 6).filter((w) => Number.isFinite(w.p99));
    if (slice.length > 0) minuteP99.push(Math.max(...slice.map((w) => w.p99)));
  }
  const p99Slope = perMinute(measured.filter((w) => Number.isFinite(w.p99)).map((w) => ({ x: w.atS, y: w.p99 })));
  const medianP99 = quantile(
    [...minuteP99].sort((a, b) => a - b),
    0.5,
  );
  const errors = windows.reduce((s, w) => s + w.errors, 0) + rest.errors;
  const answers = windows.reduce((s, w) => s + w.answers, 0) + rest.latencies.length;
  const events = windows.reduce((s, w) => s + w.events, 0) + rest.events;
  return { measured, rssSlope, meanRss, heapSlope, externalSlope, lastHalfSlope, minutes, growth, minuteP99, p99Slope, medianP99, errors, answers, events };
}

function report(options: Options, load: Load, figures: Trend, closedSockets: number, errorSamples: string[]): void {
  const { sentReads, sentChains, skipped } = load;
  const { measured, errors, answers, events, meanRss, growth, minuteP99, medianP99 } = figures;
  console.log(`\n| figure | value |`);
  console.log('|---|---:|');
  console.log(`| duration, warm-up | ${options.seconds} s, ${options.warmup} s |`);
  console.log(`| reads sent, mutation chains sent, skipped (server behind) | ${sentReads}, ${sentChains}, ${skipped} |`);
  console.log(`| answers (2xx without errors), errors | ${answers}, ${errors} |`);
  console.log(`| subscribers, events delivered, sockets closed | ${options.subscribers}, ${events}, ${closedSockets} |`);
  console.log(
    `| resident set after warm-up: first, last, mean | ${measured[0]!.rssMiB.toFixed(1)}, ${measured.at(-1)!.rssMiB.toFixed(1)}, ${meanRss.toFixed(1)} MiB |`,
  );
  console.log(
    `| resident set slope after warm-up | ${figures.rssSlope.toFixed(2)} MiB/min (${growth.toFixed(1)} MiB over ${figures.minutes.toFixed(1)} min) |`,
  );
  console.log(`| resident set slope, last half of the measured stretch | ${figures.lastHalfSlope.toFixed(2)} MiB/min |`);
  console.log(`| JS heap in use slope, memory outside the heap slope | ${figures.heapSlope.toFixed(2)}, ${figures.externalSlope.toFixed(2)} MiB/min |`);
  console.log(
    `| fetch cache after warm-up: first, last (bounded by GATEWAY_FETCH_CACHE_MB) | ${measured[0]!.fetchCacheMiB.toFixed(1)}, ${measured.at(-1)!.fetchCacheMiB.toFixed(1)} MiB |`,
  );
  console.log(`| p99 of each minute after warm-up | ${minuteP99.map((p) => p.toFixed(1)).join(', ')} ms |`);
  console.log(`| p99 slope after warm-up | ${figures.p99Slope.toFixed(2)} ms/min |`);
  console.log(`| server CPU, mean | ${(measured.reduce((s, w) => s + w.cpuMsPerS, 0) / measured.length).toFixed(0)} ms/s |`);
  if (errorSamples.length > 0) console.log(`\nfirst errors:\n${errorSamples.join('\n')}`);

  const goals = [
    { goal: 'no errors, nothing skipped, no subscription ended', met: errors === 0 && skipped === 0 && closedSockets === 0 },
    { goal: 'every subscriber received events', met: events >= options.subscribers },
    // Near zero: what the slope adds over the measured stretch stays within 2% of the resident set.
    { goal: 'resident set flat after warm-up: slope x duration within 2% of the mean', met: Math.abs(growth) <= 0.02 * meanRss },
    // Steady: no minute's p99 more than twice the median minute's.
    { goal: "p99 steady: no minute's p99 above twice the median minute's", met: minuteP99.every((p) => p <= 2 * medianP99) },
  ];
  console.log('\n| goal | met |\n|---|---|');
  for (const g of goals) console.log(`| ${g.goal} | ${g.met ? 'yes' : 'no'} |`);
}
