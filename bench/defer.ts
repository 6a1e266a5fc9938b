import { argv } from 'node:process';
import { Worker } from 'node:worker_threads';
import { startServer } from '../gateway/server.js';
import { loadConfig } from '../gateway/config.js';
import { median } from './support/stats.js';

/*
 * `npm run bench -- defer [rounds]`: what `@defer` buys a page. For each slow field (a delivery forecast
 * with the gateway's fetch cache off, so every forecast is fetched; a leakage audit; the feature
 * importances), three requests in turn, `rounds` times (default 30): the query without the slow field, the
 * same query with the slow field deferred (multipart/mixed: the time to its first payload, and to its
 * last), and the query with the slow field not deferred. The goal: the first payload within 1.2x of the
 * query without the slow field. The server runs in this process as `npm start` does (PGlite in memory);
 * the client runs in a worker thread, with its own event loop, as a client elsewhere would. Traffic only
 * to 127.0.0.1, bounded by the rounds.
 */

const LEDGER_FIELDS = 'id status customerName startTime durationHours location { id name } machines { id name category }';

interface Case {
  name: string;
  fast: string;
  deferred: string;
  whole: string;
}

const CASES: Case[] = [
  {
    name: 'delivery forecasts (20 bookings, fetch cache off)',
    fast: `{ bookings(first: 20) { edges { node { ${LEDGER_FIELDS} } } } }`,
    deferred: `{ bookings(first: 20) { edges { node { ${LEDGER_FIELDS} ... @defer { deliveryForecast { q10Minutes q50Minutes q90Minutes } } } } } }`,
    whole: `{ bookings(first: 20) { edges { node { ${LEDGER_FIELDS} deliveryForecast { q10Minutes q50Minutes q90Minutes } } } } }`,
  },
  {
    name: 'leakage audit (underwriting)',
    fast: `{ fleetSummary { available reserved inUse total } bookings(first: 20) { edges { node { ${LEDGER_FIELDS} } } } }`,
    deferred: `{ fleetSummary { available reserved inUse total } bookings(first: 20) { edges { node { ${LEDGER_FIELDS} } } }
      ... @defer { leakageAudit(input: { labelSet: UNDERWRITING }) { labelRows rowsWithFindings } } }`,
    whole: `{ fleetSummary { available reserved inUse total } bookings(first: 20) { edges { node { ${LEDGER_FIELDS} } } }
      leakageAudit(input: { labelSet: UNDERWRITING }) { labelRows rowsWithFindings } }`,
  },
  {
    name: 'feature importances',
    fast: `{ fleetSummary { available reserved inUse total } bookings(first: 20) { edges { node { ${LEDGER_FIELDS} } } } }`,
    deferred: `{ fleetSummary { available reserved inUse total } bookings(first: 20) { edges { node { ${LEDGER_FIELDS} } } }
      ... @defer { featureImportance { model metric heldOut } } }`,
    whole: `{ fleetSummary { available reserved inUse total } bookings(first: 20) { edges { node { ${LEDGER_FIELDS} } } }
      featureImportance { model metric heldOut } }`,
  },
];

/** The client: sends one request, answers the time to the first payload and to the end (ms). */
const CLIENT = `
const { parentPort, workerData } = require('node:worker_threads');
parentPort.on('message', async ({ query, multipart }) => {
  try {
    const t0 = performance.now();
    const res = await fetch(workerData.url + '/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: multipart ? 'multipart/mixed;deferSpec=20220824, application/json' : 'application/json' },
      body: JSON.stringify({ query }),
    });
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let text = '';
    let first = null;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
      // The first payload is complete when its closing boundary has arrived (or, for JSON, at the end).
      if (first === null && multipart && text.indexOf('\\r\\n---', 5) > 0) first = performance.now() - t0;
    }
    const total = performance.now() - t0;
    const type = res.headers.get('content-type') || '';
    const errors = (text.match(/"errors"/g) || []).length;
    parentPort.postMessage({ status: res.status, type, first: first ?? total, total, errors, bytes: text.length });
  } catch (e) {
    parentPort.postMessage({ error: String(e) });
  }
});
`;

interface Timing {
  status: number;
  type: string;
  first: number;
  total: number;
  errors: number;
}

type Send = (query: string, multipart: boolean) => Promise<Timing>;

export default async function bench(): Promise<void> {
  const rounds = Number(argv.slice(3).find((a) => /^\d+$/.test(a)) ?? 30);
  process.env['NODE_ENV'] ??= 'production';
  const server = await startServer({
    config: loadConfig({ PORT: '0', DATA_DIR: ':memory:', FEATURES_DATA_DIR: ':memory:', LOG_LEVEL: 'silent', GATEWAY_FETCH_CACHE_MB: '0' }),
  });
  const worker = new Worker(CLIENT, { eval: true, workerData: { url: server.url } });
  const send: Send = (query, multipart) =>
    new Promise<Timing>((resolve, reject) => {
      worker.once('message', (m: Timing | { error: string }) => ('error' in m ? reject(new Error(m.error)) : resolve(m)));
      worker.postMessage({ query, multipart });
    });
  try {
    await seedBookings(server.url);
    console.log(
      `\n@defer: time to the first payload (${rounds} rounds per case after 3 warm-up rounds; server in process on PGlite, client in a worker thread; NODE_ENV=${process.env['NODE_ENV']})\n`,
    );
    console.log(
      '| slow field | without it, ms | deferred: first payload, ms | deferred: last payload, ms | not deferred, ms | first payload / without | met (<= 1.2x) |',
    );
    console.log('|---|---:|---:|---:|---:|---:|---|');
    for (const c of CASES) await measureCase(c, rounds, send);
    console.log('\nmedians over the rounds; each round sends the three requests one after another.');
  } finally {
    await worker.terminate();
    await server.close();
  }
}

/**
 * Twenty bookings for the ledger page, each with its delivery run: quoted, confirmed and completed (which
 * frees the machine for the next one).
 */
async function seedBookings(url: string): Promise<void> {
  const machines = (await graphql(url, '{ machines { id status } }', {}))['machines'] as { id: string; status: string }[];
  const available = machines.filter((m) => m.status === 'AVAILABLE').map((m) => m.id);
  if (available.length === 0) throw new Error('no machine available to book');
  for (let i = 0; i < 20; i++) {
    const start = new Date(Date.now() + (30 + i * 12) * 3_600_000).toISOString();
    const quote = await graphql(
      url,
      `
        mutation ($i: CreateQuoteInput!) {
          createQuote(input: $i) {
            id
          }
        }
      `,
      {
        i: { machineIds: [available[i % available.length]], locationId: `LOC-00${1 + (i % 3)}`, startTime: start, durationHours: 4 },
      },
    );
    const id = (quote['createQuote'] as { id: string }).id;
    const booked = await graphql(url, `mutation($q: ID!) { confirmBooking(input: { quoteId: $q, customerName: "Bench ${i}" }) { id } }`, { q: id });
    await graphql(
      url,
      `
        mutation ($b: ID!) {
          completeBooking(bookingId: $b) {
            id
          }
        }
      `,
      { b: (booked['confirmBooking'] as { id: string }).id },
    );
  }
}

/** One case's row: the three requests in turn, `rounds` times after 3 warm-up rounds, as medians. */
async function measureCase(c: Case, rounds: number, send: Send): Promise<void> {
  const fast: number[] = [];
  const first: number[] = [];
  const last: number[] = [];
  const whole: number[] = [];
  for (let r = 0; r < rounds + 3; r++) {
    const a = await send(c.fast, true);
    const b = await send(c.deferred, true);
    const w = await send(c.whole, true);
    for (const t of [a, b, w]) {
      if (t.status !== 200 || t.errors > 0) throw new Error(`${c.name}: status ${t.status}, ${t.errors} errors`);
    }
    if (!b.type.startsWith('multipart/mixed')) throw new Error(`${c.name}: the deferred query was answered ${b.type}`);
    if (r < 3) continue;
    fast.push(a.total);
    first.push(b.first);
    last.push(b.total);
    whole.push(w.total);
  }
  const ratio = median(first) / median(fast);
  console.log(
    `| ${c.name} | ${median(fast).toFixed(2)} | ${median(first).toFixed(2)} | ${median(last).toFixed(2)} | ${median(whole).toFixed(2)} | ${ratio.toFixed(2)}x | ${ratio <= 1.2 ? 'yes' : 'no'} |`,
  );
}

async function graphql(url: string, query: string, variables: Record<string, unknown>): Promise<Record<string, unknown>> {
  const res = await fetch(`${url}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query, variables }) });
  const body = (await res.json()) as { data?: Record<string, unknown>; errors?: unknown[] };
  if (body.errors || !body.data) throw new Error(`seeding failed: ${JSON.stringify(body.errors)}`);
  return body.data;
}
