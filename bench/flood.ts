import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { loadConfig } from '../gateway/config.js';
import { startServer } from '../gateway/server.js';
import { floodWhileMeasuring, hostileRequests } from './hostile.js';
import { quantile } from './support/stats.js';

/*
 * `npm run bench -- flood`: the worst requests a client can build under the body limit (bench/hostile.ts),
 * sent from 8 connections for 10 s (at most 3,000 requests) against a server in this process; prints what
 * each was answered, the server's event loop delay and how /health fared meanwhile. A second run with every
 * request limit raised out of reach (smaller requests, each once) shows what the limits are worth.
 */
export default async function flood(): Promise<void> {
  const rows: { setting: string; requests: number; p50: number; p99: number; max: number; health: string }[] = [];
  const bodyLimit = loadConfig({}).BODY_LIMIT_BYTES;
  const unlimited = {
    GRAPHQL_MAX_TOKENS: '1000000',
    GRAPHQL_MAX_DEPTH: '1000',
    GRAPHQL_MAX_ALIASES: '100000',
    GRAPHQL_MAX_ROOT_FIELDS: '100000',
    GRAPHQL_MAX_FIELDS: '1000000',
    GRAPHQL_MAX_DIRECTIVES: '100000',
    GRAPHQL_MAX_COST: '100000000',
  };
  const runs = [
    { setting: 'default limits, full-size requests', env: {}, requests: hostileRequests(bodyLimit), concurrency: 8, seconds: 10, maxRequests: 3000 },
    // Without the limits, full-size documents would hold the loop for minutes and the fragment bomb forever:
    // this run sends requests a hundredth of the size, each once, to show what the limits are worth.
    {
      setting: 'limits out of reach, 1/100-size requests, each once',
      env: unlimited,
      requests: hostileRequests(bodyLimit / 100).filter((r) => r.name !== 'fragment bomb'),
      concurrency: 1,
      seconds: 120,
      maxRequests: 10,
    },
  ];
  for (const run of runs) {
    const config = loadConfig({ PORT: '0', DATA_DIR: ':memory:', LOG_LEVEL: 'silent', ...run.env });
    const server = await startServer({ config });
    const result = await floodWhileMeasuring(server.url, run.requests, {
      concurrency: run.concurrency,
      seconds: run.seconds,
      maxRequests: Math.min(run.maxRequests, run.requests.length * 1000),
    });
    console.log(`\n${run.setting}: ${result.requests} requests in ${result.seconds} s`);
    for (const [key, n] of Object.entries(result.answers).sort()) console.log(`  ${key.padEnd(48)} ${n}`);
    rows.push({
      setting: run.setting,
      requests: result.requests,
      ...result.loopDelay,
      health: `${result.health.ok}/${result.health.asked} ok, slowest ${Math.round(result.health.maxMs)} ms`,
    });
    await server.close();
  }
  console.log('\nevent loop delay of the server (ms) while flooded:');
  console.table(rows);
  await principalFlood();
}

const FLOODER = 'bench-flooder-key-000001';
const NEIGHBOUR = 'bench-neighbour-key-0001';
const QUERY = JSON.stringify({ query: '{ fleetSummary { total } }' });

/** The neighbour's pace: 30 queries a second, within its own limit (50 a second). */
const NEIGHBOUR_INTERVAL_MS = 1000 / 30;
/** Idle samples (20 s at that pace), and the flood's length: about as many samples again. */
const NEIGHBOUR_SAMPLES = 600;
const FLOOD_SECONDS = 20;

/** `count` queries as the neighbour, one every NEIGHBOUR_INTERVAL_MS; their latencies in ms, sorted. */
/**
 * The neighbour's queries, paced, from a worker thread of its own, so the server's event loop (this
 * thread's) is not also the measuring client's: each query's start (epoch ms) and latency.
 */
function neighbour(url: string, count: number): Promise<{ at: number; ms: number }[]> {
  const worker = new Worker(
    `const { parentPort, workerData } = require('node:worker_threads');
     (async () => {
       const { url, key, body, count, interval } = workerData;
       const samples = [];
       const begin = performance.now();
       for (let i = 0; i < count; i++) {
         const due = begin + i * interval - performance.now();
         if (due > 0) await new Promise((resolve) => setTimeout(resolve, due));
         const at = Date.now();
         const started = performance.now();
         const res = await fetch(url + '/graphql', { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': key }, body });
         await res.arrayBuffer();
         if (res.status !== 200) throw new Error('the neighbour was answered ' + res.status);
         samples.push({ at, ms: performance.now() - started });
       }
       parentPort.postMessage(samples);
     })();`,
    { eval: true, workerData: { url, key: NEIGHBOUR, body: QUERY, count, interval: NEIGHBOUR_INTERVAL_MS } },
  );
  return new Promise((resolve, reject) => {
    worker.once('message', (samples: { at: number; ms: number }[]) => {
      void worker.terminate();
      resolve(samples);
    });
    worker.once('error', reject);
  });
}

const sorted = (samples: { ms: number }[]) => samples.map((x) => x.ms).sort((a, b) => a - b);

/**
 * One principal floods (16 connections from a worker thread, 10 s, at most 20,000 requests) under the
 * default per-principal rate limit; a second principal, paced within its own limit, has its p99
 * measured idle (300 queries) and during the flood.
 * Goal: the flooder is limited (429) and the neighbour's p99 stays within 1.5x of its idle p99.
 */
export async function principalFlood(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'flood-keys-'));
  const file = join(dir, 'keys.json');
  writeFileSync(
    file,
    JSON.stringify([
      { key: FLOODER, principal: 'flooder', tenant: 'ta', scopes: ['fleet:read'] },
      { key: NEIGHBOUR, principal: 'neighbour', tenant: 'tb', scopes: ['fleet:read'] },
    ]),
  );
  const config = loadConfig({ PORT: '0', DATA_DIR: ':memory:', LOG_LEVEL: 'silent', API_KEYS_FILE: file });
  const server = await startServer({ config });
  try {
    await neighbour(server.url, 30);
    const idle = sorted(await neighbour(server.url, NEIGHBOUR_SAMPLES));
    const worker = new Worker(
      `const { parentPort, workerData } = require('node:worker_threads');
       (async () => {
         const { url, key, body, seconds, maxRequests } = workerData;
         const deadline = Date.now() + seconds * 1000;
         const statuses = {};
         let sent = 0;
         const loop = async () => {
           while (Date.now() < deadline && sent < maxRequests) {
             sent++;
             const res = await fetch(url + '/graphql', { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': key }, body });
             await res.arrayBuffer();
             statuses[res.status] = (statuses[res.status] ?? 0) + 1;
           }
         };
         await Promise.all(Array.from({ length: 16 }, loop));
         parentPort.postMessage(statuses);
       })();`,
      { eval: true, workerData: { url: server.url, key: FLOODER, body: QUERY, seconds: FLOOD_SECONDS, maxRequests: 40_000 } },
    );
    // The first second is the flooder spending its burst (allowed); the rest, the flooder limited.
    const floodStart = Date.now();
    const done = new Promise<Record<string, number>>((resolve) => worker.once('message', resolve));
    const during = await neighbour(server.url, Math.floor(((FLOOD_SECONDS - 0.5) * 1000) / NEIGHBOUR_INTERVAL_MS));
    const statuses = await done;
    await worker.terminate();
    const burst = sorted(during.filter((x) => x.at - floodStart < 1000));
    const flooded = sorted(during.filter((x) => x.at - floodStart >= 1000));
    const ratio = quantile(flooded, 0.99) / quantile(idle, 0.99);
    console.log('\none principal flooding under the default rate limit (RATE_LIMIT_PER_S 50, RATE_LIMIT_BURST 200):');
    console.log(`  flooder's answers by status: ${JSON.stringify(statuses)}`);
    console.table([
      { neighbour: 'idle', requests: idle.length, p50: +quantile(idle, 0.5).toFixed(2), p99: +quantile(idle, 0.99).toFixed(2) },
      {
        neighbour: "the flood's first second (its burst allowed)",
        requests: burst.length,
        p50: +quantile(burst, 0.5).toFixed(2),
        p99: +quantile(burst, 0.99).toFixed(2),
      },
      {
        neighbour: 'the rest of the flood (limited)',
        requests: flooded.length,
        p50: +quantile(flooded, 0.5).toFixed(2),
        p99: +quantile(flooded, 0.99).toFixed(2),
      },
    ]);
    console.log(`  neighbour p99 while the flood is limited / idle: ${ratio.toFixed(2)}x (goal at most 1.5x): ${ratio <= 1.5 ? 'met' : 'NOT met'}`);
  } finally {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
