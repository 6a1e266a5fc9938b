import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';

/*
 * The worst requests a client can build under the body limit, and a flood of them from a worker thread while
 * the server's own event loop is measured. Shared by `test/gateway/security/flood.test.ts` (which asserts the bounds) and
 * `npm run bench -- flood` (which prints the figures). Traffic goes to the given loopback URL only, bounded
 * in count and time.
 */

export interface HostileRequest {
  name: string;
  path: string;
  body: string;
  /** The statuses a correct server answers with. */
  expect: readonly number[];
}

const TRAVEL = {
  origin_density: 0.6,
  destination_density: 0.8,
  distance_km: 42,
  road_type: 2,
  weather: 1,
  traffic: 2,
  public_holiday: 0,
  peak_hour: 1,
  hour_sin: 0.866,
  hour_cos: -0.5,
  day_sin: 0.782,
  day_cos: 0.623,
};

/** A body of JSON text of about `bytes` built by repeating `unit` inside `wrap`. */
function fill(bytes: number, wrap: (inner: string) => string, unit: string): string {
  const overhead = wrap('').length;
  return wrap(unit.repeat(Math.max(1, Math.floor((bytes - overhead) / unit.length))));
}

const graphql = (query: string, variables?: Record<string, unknown>) => JSON.stringify({ query, ...(variables ? { variables } : {}) });

/** Each hostile request, sized to just under `bodyLimit` where size is the weapon. */
export function hostileRequests(bodyLimit: number): HostileRequest[] {
  const size = Math.floor(bodyLimit * 0.9);
  const bomb = Array.from({ length: 60 }, (_, i) =>
    i === 59 ? `fragment F${i} on Machine { id }` : `fragment F${i} on Machine { ...F${i + 1} ...F${i + 1} }`,
  ).join(' ');
  return [
    // Tens of thousands of repeated fields: the parser stops at the token limit.
    { name: 'repeated fields', path: '/graphql', body: fill(size, (inner) => graphql(`{ machines { ${inner}} }`), 'id '), expect: [400] },
    // Selections nested as deep as the body allows.
    { name: 'deep nesting', path: '/graphql', body: fill(size, (inner) => graphql(`{ ${inner} }`), 'a { '), expect: [400] },
    // Fragments that double at every level: 2^59 fields if expanded.
    {
      name: 'fragment bomb',
      path: '/graphql',
      body: graphql(`
        {
          machines {
            ...F0
          }
        }
        ${bomb}
      `),
      expect: [400],
    },
    // Same-named selections at the field limit: what validation compares in pairs, accepted and run.
    { name: 'same-named fields at the limit', path: '/graphql', body: graphql(`{ machines { ${'depot { id } '.repeat(99)}} }`), expect: [200] },
    // The most expensive accepted cross-subgraph fan-out: aliased ledgers with their delivery forecasts.
    {
      name: 'aliased federated fan-out',
      path: '/graphql',
      body: graphql(
        `{ ${Array.from({ length: 7 }, (_, i) => `l${i}: bookings(first: 100) { edges { node { id deliveryForecast { q50Minutes } } } }`).join(' ')} }`,
      ),
      expect: [200],
    },
    // Too many aliases of a cross-subgraph field.
    {
      name: 'hundreds of aliases',
      path: '/graphql',
      body: graphql(
        `{ ${Array.from({ length: 500 }, (_, i) => `b${i}: bookings(first: 100) { edges { node { deliveryForecast { q50Minutes } } } }`).join(' ')} }`,
      ),
      expect: [400],
    },
    // A batch far over its maximum, as variables: refused before any item is coerced.
    {
      name: 'oversized batch (GraphQL variables)',
      path: '/graphql',
      body: fill(
        size,
        (inner) => `{"query":"query ($i: [TravelInput!]!) { predictTravelTimeBatch(inputs: $i) { q50Minutes } }","variables":{"i":[${inner}{}]}}`,
        `${JSON.stringify(TRAVEL)},`,
      ),
      expect: [400],
    },
    // The same through REST.
    {
      name: 'oversized batch (REST)',
      path: '/prediction/predict/travel_time/batch',
      body: fill(size, (inner) => `{"instances":[${inner}{}]}`, `${JSON.stringify(TRAVEL)},`),
      expect: [400],
    },
    // A full batch of valid inputs: accepted, the largest legitimate piece of work.
    {
      name: 'full batch (REST)',
      path: '/prediction/predict/travel_time/batch',
      body: JSON.stringify({ instances: Array.from({ length: 1000 }, () => TRAVEL) }),
      expect: [200],
    },
    // One string literal as long as the body allows.
    { name: 'huge string literal', path: '/graphql', body: graphql(`{ machine(id: "${'x'.repeat(size - 60)}") { id } }`), expect: [200, 400] },
    // Directives piled on one field.
    { name: 'directive pile', path: '/graphql', body: fill(size, (inner) => graphql(`{ machines { id ${inner}} }`), '@include(if: true) '), expect: [400] },
  ];
}

export interface FloodResult {
  requests: number;
  seconds: number;
  /** Answers by request name and status ("repeated fields 400": 12). */
  answers: Record<string, number>;
  /** Event-loop delay of this process while the flood ran, in ms. */
  loopDelay: { p50: number; p99: number; max: number };
  /** /health, asked every `healthEveryMs` during the flood: answered count, failures and the slowest answer. */
  health: { asked: number; ok: number; maxMs: number };
}

/** The flood client: plain JavaScript run in a worker thread, so it does not share the measured event loop. */
const FLOOD_WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const { url, requests, concurrency, seconds, maxRequests } = workerData;
const deadline = Date.now() + seconds * 1000;
const answers = {};
let sent = 0;
async function loop() {
  while (Date.now() < deadline && sent < maxRequests) {
    const r = requests[sent++ % requests.length];
    let key;
    try {
      const res = await fetch(url + r.path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: r.body });
      await res.arrayBuffer();
      key = r.name + ' ' + res.status;
    } catch (e) {
      key = r.name + ' failed: ' + ((e && e.cause && e.cause.code) || (e && e.message));
    }
    answers[key] = (answers[key] || 0) + 1;
  }
}
Promise.all(Array.from({ length: concurrency }, loop)).then(() => parentPort.postMessage({ sent, answers }));
`;

/**
 * Floods `url` with `requests` from `concurrency` connections in a worker thread for at most `seconds` and
 * `maxRequests`, while this thread's event loop delay is sampled and /health is asked every `healthEveryMs`.
 * The server must run in this thread for the loop delay to be its own.
 */
export async function floodWhileMeasuring(
  url: string,
  requests: readonly HostileRequest[],
  options: { concurrency?: number; seconds?: number; maxRequests?: number; healthEveryMs?: number } = {},
): Promise<FloodResult> {
  const { concurrency = 8, seconds = 5, maxRequests = 2000, healthEveryMs = 100 } = options;
  const histogram = monitorEventLoopDelay({ resolution: 10 });
  const health = { asked: 0, ok: 0, maxMs: 0 };
  let flooding = true;
  const healthLoop = (async () => {
    while (flooding) {
      const started = performance.now();
      health.asked++;
      try {
        const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(5000) });
        await res.arrayBuffer();
        if (res.status === 200) health.ok++;
      } catch {
        // counted as not ok
      }
      health.maxMs = Math.max(health.maxMs, performance.now() - started);
      await new Promise((resolve) => setTimeout(resolve, healthEveryMs));
    }
  })();
  const started = performance.now();
  histogram.enable();
  const worker = new Worker(FLOOD_WORKER, { eval: true, workerData: { url, requests, concurrency, seconds, maxRequests } });
  const done = await new Promise<{ sent: number; answers: Record<string, number> }>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  histogram.disable();
  flooding = false;
  await healthLoop;
  await worker.terminate();
  const ms = (ns: number) => Math.round((ns / 1e6) * 10) / 10;
  return {
    requests: done.sent,
    seconds: Math.round((performance.now() - started) / 100) / 10,
    answers: done.answers,
    loopDelay: { p50: ms(histogram.percentile(50)), p99: ms(histogram.percentile(99)), max: ms(histogram.max) },
    health,
  };
}
