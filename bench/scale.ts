import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { argv } from 'node:process';
import { fileURLToPath } from 'node:url';
import { jetstream, jetstreamManager, StorageType } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import pg from 'pg';
import WebSocket from 'ws';
import { appendEvents } from '../platform/outbox.js';
import { NATS_SERVER, TestNats } from '../test/support/nats.js';
import { PG_BIN, TestPostgres } from '../test/support/postgres.js';
import { cpuMs, freePort, sleep, startServer, stopServer, type ServerProcess } from './gateway/processes.js';
import { quantile, round } from './support/stats.js';
import { rssKiB, subscriber } from './subscriptions.js';

/*
 * npm run bench -- scale [N ...]
 *
 * The distributed event side under load, on servers of the benchmark's own: a PostgreSQL cluster (initdb on
 * a free port), a nats-server with JetStream, and three gateway processes (`npm start` with DATABASE_URL and
 * EVENT_BUS_URL: each relays the outbox, one leads, and each serves subscriptions from the stream).
 *
 * 1. JetStream alone: messages the size of a fleet event published one at a time (each awaiting its ack),
 *    published pipelined (acks awaited per window), and read back by an ordered consumer.
 * 2. Events into the log: a block of outbox events committed at once; the time until the relay has put
 *    all of them in the stream.
 * 3. The target rate: 100 events/s for 10 s to 1 and to 100 subscribers per gateway: each gateway's CPU
 *    per second idle and under that rate, and commit-to-receipt latency; the per-event and per-delivery
 *    costs of the capacity model (docs/scaling.md) come from these.
 *    The same rate on machineStatusChanged to 50 subscribers per gateway that each filter on three machines
 *    of their own (no upstream stream shared): the cost of a delivery when nothing is shared.
 * 4. Fan-out, for each N (default 1,000 and 10,000): N graphql-transport-ws subscribers to
 *    fleetSummaryChanged spread over the three gateways, live; a burst of events,
 *    each its own commit; every event timed at every subscriber, and each gateway's deliveries per second
 *    and CPU per delivery. Side by side, the bare `ws` floor (bench/ws-floor.ts) with N/3 subscribers: one
 *    process fanning the same messages out with no GraphQL, no log and no database.
 * 5. Then the third gateway is killed with SIGKILL, more events are committed, and its subscribers resume
 *    on the other two from their last cursor: the time until all of them have caught up, and every
 *    subscriber's events checked, by cursor, to be the same, once each, in order.
 *
 * Traffic only to 127.0.0.1; every phase is bounded in count and time.
 */

const root = fileURLToPath(new URL('..', import.meta.url));
const STREAM = 'OPS_EVENTS';
const BURST = 12;
const AFTER_KILL = 4;
/** The benchmark's fleet events carry `reserved` counts from here up, which no real fleet of 15 machines reaches. */
const OWN = 1000;
const RAW_MESSAGES = 20_000;
const RELAY_EVENTS = 20_000;
const PHASE_TIMEOUT_MS = 120_000;
const FLEET_QUERY = 'subscription($after: ID) { fleetSummaryChanged(after: $after) { cursor reserved utilization surgeMultiplier } }';

interface FanOutRow {
  subscribers: number;
  perGateway: number;
  deliveries: number;
  p50: number;
  p99: number;
  /** Deliveries per second of each gateway over the burst (first event committed to its last delivery). */
  gatewayRates: number[];
  /** Gateway CPU per 1,000 deliveries, summed over the three. */
  cpuMsPerThousand: number;
  kibPerSubscriber: number;
  floorRate: number;
  floorP50: number;
  floorP99: number;
  floorCpuMsPerThousand: number;
  resumed: number;
  resumeSeconds: number;
  checked: boolean;
}

export default async function bench(): Promise<void> {
  if (!NATS_SERVER || !PG_BIN) {
    console.error('scale needs a nats-server (Debian package nats-server) and PostgreSQL server binaries (initdb, pg_ctl)');
    process.exitCode = 2;
    return;
  }
  const sizes = argv
    .slice(3)
    .map(Number)
    .filter((n) => Number.isInteger(n) && n >= 3);
  const logDir = mkdtempSync(join(tmpdir(), 'bench-scale-'));
  const [nats, postgres] = await Promise.all([TestNats.start(), TestPostgres.start()]);
  const gateways: ServerProcess[] = [];
  const env = (port: number) => ({
    ...process.env,
    PORT: String(port),
    HOST: '127.0.0.1',
    DATABASE_URL: postgres.url,
    DATA_DIR: '',
    EVENT_BUS_URL: nats.url,
    EVENT_STREAM: STREAM,
    LOG_LEVEL: 'warn',
    API_KEYS: '',
  });
  const startGateway = async (i: number) => {
    const port = await freePort();
    return startServer({
      name: `gateway-${i + 1}`,
      args: ['--import', 'tsx', 'gateway/main.ts'],
      env: env(port),
      port,
      cwd: root,
      logDir,
      startTimeoutMs: PHASE_TIMEOUT_MS,
    });
  };
  try {
    const raw = await jetstreamAlone(nats.url);
    // One after the other: the first applies the migrations and leads the relay.
    for (let i = 0; i < 3; i++) gateways.push(await startGateway(i));
    await sleep(2000);
    const startRssMiB = gateways.map((g) => Math.round(rssKiB(g.child.pid!) / 1024));
    const db = new pg.Client({ connectionString: postgres.url });
    await db.connect();
    try {
      const fleetPayload = await realFleetPayload(gateways[0]!.url, db);
      const relay = await eventsIntoLog(db, nats.url);
      // Every gateway's event hub has read the block too before the fan-out is measured.
      await waitFor(async () => (await Promise.all(gateways.map(hubLag))).every((lag) => lag === 0), 'the gateways to read the block');
      const steady: SteadyRow[] = [];
      for (const perGateway of [1, 100]) steady.push(await steadyRate(perGateway, gateways, db, fleetPayload));
      const filtered = await filteredRate(FILTERED_PER_GATEWAY, gateways, db);
      const rows: FanOutRow[] = [];
      for (const n of sizes.length > 0 ? sizes : [1000, 10_000]) {
        rows.push(await fanOut(n, gateways, db, fleetPayload, logDir));
        // The killed gateway comes back for the next size.
        gateways[2] = await startGateway(2);
      }
      report(raw, relay, steady, filtered, rows);
      console.log(`\ngateway resident set after start, before any subscriber: ${startRssMiB.join(' / ')} MiB`);
    } finally {
      await db.end();
    }
  } finally {
    await Promise.all(gateways.map((g) => stopServer(g)));
    await nats.close();
    await postgres.close();
  }
  console.log(`server logs: ${logDir}`);
}

interface RawFigures {
  payloadBytes: number;
  serialPerSecond: number;
  pipelinedPerSecond: number;
  consumedPerSecond: number;
}

/** JetStream's own rates on this machine: the same file-stored stream settings as the event log. */
async function jetstreamAlone(url: string): Promise<RawFigures> {
  const nc = await connect({ servers: url });
  try {
    const jsm = await jetstreamManager(nc);
    const js = jetstream(nc);
    await jsm.streams.add({ name: 'BENCH_RAW', subjects: ['BENCH_RAW.>'], storage: StorageType.File });
    const payload = new TextEncoder().encode(
      JSON.stringify({
        total: 15,
        available: 3,
        reserved: 12,
        booked: 0,
        inTransit: 0,
        maintenance: 0,
        utilization: 0.8,
        surgeMultiplier: 1.35,
        at: new Date().toISOString(),
      }),
    );
    const serialCount = RAW_MESSAGES / 4;
    let started = performance.now();
    for (let i = 0; i < serialCount; i++) await js.publish('BENCH_RAW.serial', payload, { msgID: `s${i}` });
    const serialPerSecond = serialCount / ((performance.now() - started) / 1000);
    started = performance.now();
    for (let i = 0; i < RAW_MESSAGES; i += 500) {
      const window = [];
      for (let k = i; k < Math.min(RAW_MESSAGES, i + 500); k++) window.push(js.publish('BENCH_RAW.pipelined', payload, { msgID: `p${k}` }));
      await Promise.all(window);
    }
    const pipelinedPerSecond = RAW_MESSAGES / ((performance.now() - started) / 1000);
    started = performance.now();
    const consumer = await js.consumers.get('BENCH_RAW', { filter_subjects: 'BENCH_RAW.pipelined' });
    const messages = await consumer.consume();
    let read = 0;
    for await (const m of messages) {
      void m;
      if (++read === RAW_MESSAGES) break;
    }
    const consumedPerSecond = RAW_MESSAGES / ((performance.now() - started) / 1000);
    await jsm.streams.delete('BENCH_RAW');
    return { payloadBytes: payload.length, serialPerSecond, pipelinedPerSecond, consumedPerSecond };
  } finally {
    await nc.close();
  }
}

/** The payload of a fleet event made by a real quote, so the events the benchmark commits resolve as real ones. */
async function realFleetPayload(url: string, db: pg.Client): Promise<Record<string, unknown>> {
  const res = await fetch(`${url}/rental/pricing/quote`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      machine_ids: ['EQ-001'],
      location_id: 'LOC-001',
      start_time: new Date(Date.now() + 3 * 3_600_000).toISOString(),
      duration_hours: 4,
    }),
  });
  if (res.status !== 200) throw new Error(`quote: ${res.status} ${await res.text()}`);
  const row = await db.query<{ payload: Record<string, unknown> }>("SELECT payload FROM outbox WHERE topic = 'rental.fleet_summary' ORDER BY id DESC LIMIT 1");
  if (!row.rows[0]) throw new Error('the quote made no fleet event');
  return row.rows[0].payload;
}

interface RelayFigures {
  events: number;
  seconds: number;
  perSecond: number;
}

/** A block of events committed at once; the time until the stream holds all of them. */
async function eventsIntoLog(db: pg.Client, url: string): Promise<RelayFigures> {
  const nc = await connect({ servers: url });
  try {
    const jsm = await jetstreamManager(nc);
    await waitFor(async () => (await relayLag(db)) === 0, 'the relay to catch up before the block');
    const before = (await jsm.streams.info(STREAM)).state.messages;
    const events = Array.from({ length: RELAY_EVENTS }, (_, i) => ({
      audience: 'everyone' as const,
      tags: [],
      topic: 'bench.relay',
      key: `K-${i % 100}`,
      payload: { n: i, at: new Date().toISOString() },
    }));
    await db.query('BEGIN');
    await appendEvents(db, events);
    await db.query('COMMIT');
    const started = performance.now();
    await waitFor(async () => (await jsm.streams.info(STREAM)).state.messages >= before + RELAY_EVENTS, 'the relay to publish the block');
    const seconds = (performance.now() - started) / 1000;
    return { events: RELAY_EVENTS, seconds, perSecond: RELAY_EVENTS / seconds };
  } finally {
    await nc.close();
  }
}

/** A gateway's consumer lag on the log: events committed that its hub has not yet handed to its streams. */
async function hubLag(gateway: ServerProcess): Promise<number> {
  const text = await (await fetch(`${gateway.url}/metrics`)).text();
  const lag = /^outbox_lag_events (\d+)/m.exec(text);
  if (!lag) throw new Error(`no outbox_lag_events in ${gateway.name}'s /metrics`);
  return Number(lag[1]);
}

async function relayLag(db: pg.Client): Promise<number> {
  const res = await db.query<{ lag: string }>(`SELECT (SELECT coalesce(max(id), 0) FROM outbox) - (SELECT position FROM outbox_relay WHERE name = $1) AS lag`, [
    STREAM,
  ]);
  return Number(res.rows[0]?.lag ?? 0);
}

interface Subscriber {
  socket: WebSocket;
  gateway: number;
  /** Cursors in the order received, over every connection. */
  cursors: string[];
}

/** Receipt times by `reserved` value (the event's number in the burst), over every subscriber. */
type Receipts = Map<number, { at: number; gateway: number }[]>;

async function fanOut(n: number, gateways: ServerProcess[], db: pg.Client, fleetPayload: Record<string, unknown>, logDir: string): Promise<FanOutRow> {
  const receipts: Receipts = new Map();
  const subscribers: Subscriber[] = [];
  const rssBefore = gateways.map((g) => rssKiB(g.child.pid!));
  try {
    for (let i = 0; i < n; i += 300) {
      const batch = Array.from({ length: Math.min(300, n - i) }, (_, k) => subscribe(gateways, (i + k) % 3, null, receipts));
      subscribers.push(...(await within(Promise.all(batch), 'connecting subscribers')));
    }
    await sleep(1000);
    const rssAfter = gateways.map((g) => rssKiB(g.child.pid!));
    const cpuBefore = gateways.map((g) => cpuMs(g.child.pid!));
    const sent = await commitBurst(db, fleetPayload, OWN + 1, BURST);
    await waitFor(() => subscribers.every((s) => s.cursors.length >= BURST), `${n} subscribers to receive ${BURST} events`);
    const cpuUsed = gateways.reduce((sum, g, i) => sum + cpuMs(g.child.pid!) - cpuBefore[i]!, 0);
    const burstStart = sent.get(OWN + 1)!;
    const latencies: number[] = [];
    const lastAt = [0, 0, 0];
    for (const [k, list] of receipts) {
      for (const r of list) {
        latencies.push(r.at - sent.get(k)!);
        lastAt[r.gateway] = Math.max(lastAt[r.gateway]!, r.at);
      }
    }
    latencies.sort((a, b) => a - b);
    const perGateway = subscribers.filter((s) => s.gateway === 0).length;
    const gatewayRates = [0, 1, 2].map((g) => (subscribers.filter((s) => s.gateway === g).length * BURST) / ((lastAt[g]! - burstStart) / 1000));

    // The third gateway killed; its subscribers resume on the other two from their last cursor.
    await killServer(gateways[2]!);
    await commitBurst(db, fleetPayload, OWN + BURST + 1, AFTER_KILL);
    const orphans = subscribers.filter((s) => s.gateway === 2);
    const resumeStarted = performance.now();
    await within(
      Promise.all(
        orphans.map(async (s, i) => {
          s.socket.terminate();
          const moved = await subscribe(gateways, i % 2, s.cursors.at(-1)!, receipts, s.cursors);
          s.socket = moved.socket;
          s.gateway = moved.gateway;
        }),
      ),
      'resubscribing',
    );
    await waitFor(() => subscribers.every((s) => s.cursors.length >= BURST + AFTER_KILL), 'every subscriber to catch up after the kill');
    const resumeSeconds = (performance.now() - resumeStarted) / 1000;
    const reference = subscribers[0]!.cursors;
    const ordered = reference.every((c, i) => i === 0 || BigInt(c) > BigInt(reference[i - 1]!));
    const checked =
      ordered &&
      reference.length === BURST + AFTER_KILL &&
      subscribers.every((s) => s.cursors.length === reference.length && s.cursors.every((c, i) => c === reference[i]));
    if (!checked) throw new Error('a subscriber missed an event, got one twice or out of order');

    const floor = await floorRun(perGateway, logDir);
    return {
      subscribers: n,
      perGateway,
      deliveries: latencies.length,
      p50: round(quantile(latencies, 0.5)),
      p99: round(quantile(latencies, 0.99)),
      gatewayRates: gatewayRates.map(Math.round),
      cpuMsPerThousand: round((cpuUsed / (n * BURST)) * 1000),
      kibPerSubscriber: round(rssAfter.reduce((s, r, i) => s + r - rssBefore[i]!, 0) / n),
      floorRate: floor.rate,
      floorP50: floor.p50,
      floorP99: floor.p99,
      floorCpuMsPerThousand: floor.cpuMsPerThousand,
      resumed: orphans.length,
      resumeSeconds: round(resumeSeconds),
      checked,
    };
  } finally {
    for (const s of subscribers) s.socket.terminate();
  }
}

interface SteadyRow {
  perGateway: number;
  events: number;
  seconds: number;
  /** Each gateway's CPU, milliseconds per second, with no event and under the rate. */
  idleCpuMsPerSecond: number[];
  busyCpuMsPerSecond: number[];
  p50: number;
  p99: number;
}

const STEADY_RATE = 100;
const STEADY_SECONDS = 10;

/** 100 events/s for 10 s, each its own commit on schedule, to `perGateway` live subscribers on each gateway. */
async function steadyRate(perGateway: number, gateways: ServerProcess[], db: pg.Client, fleetPayload: Record<string, unknown>): Promise<SteadyRow> {
  const receipts: Receipts = new Map();
  const subscribers: Subscriber[] = [];
  try {
    for (let g = 0; g < 3; g++) {
      subscribers.push(
        ...(await within(Promise.all(Array.from({ length: perGateway }, () => subscribe(gateways, g, null, receipts))), 'connecting subscribers')),
      );
    }
    await sleep(1000);
    const cpuOf = () => gateways.map((g) => cpuMs(g.child.pid!));
    const idleStart = cpuOf();
    const idleStarted = performance.now();
    await sleep(5000);
    const idleEnd = cpuOf();
    const idleSeconds = (performance.now() - idleStarted) / 1000;

    const events = STEADY_RATE * STEADY_SECONDS;
    const sent = new Map<number, number>();
    const started = performance.now();
    for (let k = 0; k < events; k++) {
      const due = started + (k * 1000) / STEADY_RATE;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      const number = 100_000 + k;
      sent.set(number, performance.now());
      await db.query('BEGIN');
      await appendEvents(db, [
        {
          audience: 'everyone' as const,
          tags: [],
          topic: 'rental.fleet_summary',
          payload: { ...fleetPayload, reserved: number, at: new Date().toISOString() },
        },
      ]);
      await db.query('COMMIT');
    }
    await waitFor(() => subscribers.every((s) => s.cursors.length >= events), 'the steady events to arrive');
    const busyEnd = cpuOf();
    const seconds = (performance.now() - started) / 1000;
    const latencies: number[] = [];
    for (const [k, list] of receipts) for (const r of list) latencies.push(r.at - sent.get(k)!);
    latencies.sort((a, b) => a - b);
    return {
      perGateway,
      events,
      seconds: round(seconds),
      idleCpuMsPerSecond: idleEnd.map((c, i) => round((c - idleStart[i]!) / idleSeconds)),
      busyCpuMsPerSecond: busyEnd.map((c, i) => round((c - idleEnd[i]!) / seconds)),
      p50: round(quantile(latencies, 0.5)),
      p99: round(quantile(latencies, 0.99)),
    };
  } finally {
    for (const s of subscribers) s.socket.terminate();
  }
}

interface FilteredRow {
  perGateway: number;
  deliveries: number;
  deliveriesPerSecondPerGateway: number;
  busyCpuMsPerSecond: number[];
  p50: number;
  p99: number;
}

const FILTERED_PER_GATEWAY = 50;
const MACHINES = Array.from({ length: 15 }, (_, i) => `EQ-${String(i + 1).padStart(3, '0')}`);

/**
 * Dashboards that each watch a few machines of their own: `perGateway` subscribers per gateway to
 * machineStatusChanged, each with its own ordered triple of machine ids (so none shares an upstream
 * stream), and 100 machine events/s for 10 s, each on one machine in turn.
 */
async function filteredRate(perGateway: number, gateways: ServerProcess[], db: pg.Client): Promise<FilteredRow> {
  const triples: string[][] = [];
  for (const a of MACHINES) for (const b of MACHINES) for (const c of MACHINES) if (a !== b && b !== c && a !== c) triples.push([a, b, c]);
  const sent = new Map<string, number>();
  const latencies: number[] = [];
  const sockets: WebSocket[] = [];
  const watched: string[][] = [];
  try {
    for (let i = 0; i < 3 * perGateway; i++) {
      // Distinct triples (37 and the 2,730 ordered triples have no common factor).
      const ids = triples[(i * 37) % triples.length]!;
      watched.push(ids);
      sockets.push(await within(watchMachines(gateways[i % 3]!, ids, sent, latencies), 'connecting filtered subscribers'));
    }
    await sleep(1000);
    const cpuBefore = gateways.map((g) => cpuMs(g.child.pid!));
    const events = STEADY_RATE * STEADY_SECONDS;
    const started = performance.now();
    await commitMachineEvents(db, events, started, sent);
    // Each subscriber gets the events of its three machines.
    const perMachine = MACHINES.map((_, m) => Array.from({ length: events }, (_, k) => k % MACHINES.length).filter((x) => x === m).length);
    const expected = watched.reduce((sum, ids) => sum + ids.reduce((n, id) => n + perMachine[MACHINES.indexOf(id)]!, 0), 0);
    await waitFor(() => latencies.length >= expected, 'the filtered events to arrive');
    if (latencies.length !== expected) throw new Error(`${latencies.length} filtered deliveries, ${expected} expected`);
    const seconds = (performance.now() - started) / 1000;
    const busy = gateways.map((g, i) => round((cpuMs(g.child.pid!) - cpuBefore[i]!) / seconds));
    latencies.sort((a, b) => a - b);
    return {
      perGateway,
      deliveries: latencies.length,
      deliveriesPerSecondPerGateway: Math.round(latencies.length / 3 / seconds),
      busyCpuMsPerSecond: busy,
      p50: round(quantile(latencies, 0.5)),
      p99: round(quantile(latencies, 0.99)),
    };
  } finally {
    for (const s of sockets) s.terminate();
  }
}

/**
 * A subscriber on its own socket to machineStatusChanged for `ids`, adding the latency of each of the
 * benchmark's events (by its cursor in `sent`) to `latencies`; resolves once the gateway has read its
 * subscription (a ping's pong).
 */
function watchMachines(gateway: ServerProcess, ids: string[], sent: Map<string, number>, latencies: number[]): Promise<WebSocket> {
  return new Promise<WebSocket>((resolve, reject) => {
    const ws = new WebSocket(`${gateway.url.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws');
    ws.once('error', reject);
    ws.once('open', () => ws.send(JSON.stringify({ type: 'connection_init' })));
    ws.on('message', (raw: Buffer) => {
      const at = performance.now();
      const message = JSON.parse(raw.toString()) as {
        type: string;
        payload?: { data?: { machineStatusChanged?: { cursor: string } }; errors?: unknown };
      };
      if (message.type === 'connection_ack') {
        ws.send(
          JSON.stringify({
            id: '1',
            type: 'subscribe',
            payload: { query: 'subscription($ids: [ID!]) { machineStatusChanged(machineIds: $ids) { cursor status } }', variables: { ids } },
          }),
        );
        ws.send(JSON.stringify({ type: 'ping' }));
      } else if (message.type === 'pong') resolve(ws);
      else if (message.type === 'next' && message.payload?.data?.machineStatusChanged) {
        // Only the benchmark's events (the service's own, a quote expiring, are not timed).
        const at0 = sent.get(message.payload.data.machineStatusChanged.cursor);
        if (at0 === undefined) return;
        latencies.push(at - at0);
      } else if (message.type !== 'ping') console.error(`unexpected: ${raw.toString()}`);
    });
  });
}

/**
 * `events` machine status events at STEADY_RATE from `started`, each on the next machine in turn and
 * committed on its own; the time each was sent is kept in `sent` under its cursor.
 */
async function commitMachineEvents(db: pg.Client, events: number, started: number, sent: Map<string, number>): Promise<void> {
  for (let k = 0; k < events; k++) {
    const wait = started + (k * 1000) / STEADY_RATE - performance.now();
    if (wait > 0) await sleep(wait);
    const machine = MACHINES[k % MACHINES.length]!;
    const at = performance.now();
    await db.query('BEGIN');
    const [id] = await appendEvents(db, [
      {
        audience: 'everyone' as const,
        tags: [],
        topic: 'rental.machine_status',
        key: machine,
        payload: { machineId: machine, previousStatus: 'available', status: 'reserved', reason: 'quote', at: new Date().toISOString() },
      },
    ]);
    sent.set(id!, at);
    await db.query('COMMIT');
  }
}

/** Events numbered first..first+count-1 (as `reserved`), each committed on its own; the time each was committed. */
async function commitBurst(db: pg.Client, fleetPayload: Record<string, unknown>, first: number, count: number): Promise<Map<number, number>> {
  const sent = new Map<number, number>();
  for (let k = first; k < first + count; k++) {
    sent.set(k, performance.now());
    await db.query('BEGIN');
    await appendEvents(db, [
      { audience: 'everyone' as const, tags: [], topic: 'rental.fleet_summary', payload: { ...fleetPayload, reserved: k, at: new Date().toISOString() } },
    ]);
    await db.query('COMMIT');
  }
  return sent;
}

/**
 * A subscriber on its own socket to gateway `g`, live (the dashboard case: one shared upstream per gateway)
 * or from `after` (a resume: a stream of its own), adding to `cursors`; resolves once the gateway has read
 * its subscription (a ping's pong). Events are taken from the first message on: a replay from the cursor
 * may arrive before the pong.
 */
function subscribe(gateways: ServerProcess[], g: number, after: string | null, receipts: Receipts, cursors: string[] = []): Promise<Subscriber> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(`${gateways[g]!.url.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws');
    const s: Subscriber = { socket, gateway: g, cursors };
    socket.once('error', reject);
    socket.once('open', () => socket.send(JSON.stringify({ type: 'connection_init' })));
    socket.on('message', (raw: Buffer) => {
      const at = performance.now();
      const message = JSON.parse(raw.toString()) as { type: string; payload?: { data?: { fleetSummaryChanged?: { cursor: string; reserved: number } } } };
      const event = message.payload?.data?.fleetSummaryChanged;
      if (message.type === 'connection_ack') {
        socket.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query: FLEET_QUERY, variables: after ? { after } : {} } }));
        socket.send(JSON.stringify({ type: 'ping' }));
      } else if (message.type === 'pong') {
        resolve(s);
      } else if (message.type === 'next' && event) {
        // Only the benchmark's own events (the service's, a quote expiring, carry a real count below OWN).
        if (event.reserved < OWN) return;
        s.cursors.push(event.cursor);
        let list = receipts.get(event.reserved);
        if (!list) receipts.set(event.reserved, (list = []));
        list.push({ at, gateway: s.gateway });
      } else if (message.type !== 'ping') {
        console.error(`unexpected message on gateway ${g + 1}: ${raw.toString()}`);
      }
    });
  });
}

interface FloorFigures {
  rate: number;
  p50: number;
  p99: number;
  cpuMsPerThousand: number;
}

/** The bare `ws` floor with `n` subscribers: the same burst, poked over HTTP. */
async function floorRun(n: number, logDir: string): Promise<FloorFigures> {
  const port = await freePort();
  const floor = await startFloor(port, logDir);
  const sockets: WebSocket[] = [];
  try {
    const receipts: number[][] = Array.from({ length: BURST + 1 }, () => []);
    for (let i = 0; i < n; i += 300) {
      const batch = Array.from({ length: Math.min(300, n - i) }, () => subscriber(`ws://127.0.0.1:${port}/graphql`, receipts));
      sockets.push(...(await within(Promise.all(batch), 'connecting floor subscribers')));
    }
    await sleep(1000);
    const cpuBefore = cpuMs(floor.child.pid!);
    const sent: number[] = [];
    for (let k = 1; k <= BURST; k++) {
      sent[k] = performance.now();
      const res = await fetch(`${floor.url}/emit?reserved=${k}`, { method: 'POST' });
      await res.arrayBuffer();
    }
    await waitFor(() => receipts.slice(1).every((r) => r.length >= n), 'floor deliveries');
    const cpu = cpuMs(floor.child.pid!) - cpuBefore;
    const last = Math.max(...receipts.slice(1).flat());
    const latencies = receipts
      .slice(1)
      .flatMap((times, i) => times.map((t) => t - sent[i + 1]!))
      .sort((a, b) => a - b);
    return {
      rate: Math.round((n * BURST) / ((last - sent[1]!) / 1000)),
      p50: round(quantile(latencies, 0.5)),
      p99: round(quantile(latencies, 0.99)),
      cpuMsPerThousand: round((cpu / (n * BURST)) * 1000),
    };
  } finally {
    for (const s of sockets) s.terminate();
    await stopServer(floor);
  }
}

async function startFloor(port: number, logDir: string): Promise<ServerProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'bench/ws-floor.ts'], { cwd: root, env: { ...process.env, PORT: String(port) }, stdio: 'ignore' });
  const url = `http://127.0.0.1:${port}`;
  await waitFor(
    () =>
      fetch(`${url}/health`).then(
        (r) => r.ok,
        () => false,
      ),
    'the ws floor to start',
  );
  return { name: 'ws-floor', url, child, log: join(logDir, 'ws-floor.log') };
}

function killServer(server: ServerProcess): Promise<void> {
  return new Promise((resolve) => {
    if (server.child.exitCode !== null || server.child.signalCode !== null) return resolve();
    server.child.once('exit', () => resolve());
    server.child.kill('SIGKILL');
  });
}

function report(raw: RawFigures, relay: RelayFigures, steady: SteadyRow[], filtered: FilteredRow, rows: FanOutRow[]): void {
  console.log("\nscale: three gateway processes, PostgreSQL and NATS JetStream of the benchmark's own, one machine");
  console.log(`\nJetStream alone (file storage, ${raw.payloadBytes}-byte messages):`);
  console.table([
    { what: 'publish, each awaiting its ack', 'msgs/s': Math.round(raw.serialPerSecond) },
    { what: 'publish, pipelined (acks per 500)', 'msgs/s': Math.round(raw.pipelinedPerSecond) },
    { what: 'ordered read (consumer)', 'msgs/s': Math.round(raw.consumedPerSecond) },
  ]);
  console.log('\nevents into the log (a block committed at once, until all are in the stream):');
  console.table([{ events: relay.events, seconds: round(relay.seconds), 'events/s': Math.round(relay.perSecond) }]);
  console.log(`\n${STEADY_RATE} events/s for ${STEADY_SECONDS} s (each its own commit), live subscribers on each of the three gateways:`);
  console.table(
    steady.map((r) => ({
      'subscribers per gateway': r.perGateway,
      events: r.events,
      seconds: r.seconds,
      'idle CPU ms/s per gateway': r.idleCpuMsPerSecond.join(' / '),
      'CPU ms/s per gateway at the rate': r.busyCpuMsPerSecond.join(' / '),
      'p50 ms': r.p50,
      'p99 ms': r.p99,
    })),
  );
  console.log(
    `\n${STEADY_RATE} events/s for ${STEADY_SECONDS} s on machineStatusChanged, ${filtered.perGateway} subscribers per gateway each filtering on its own three machines (no two alike: a stream of its own each):`,
  );
  console.table([
    {
      deliveries: filtered.deliveries,
      'deliveries/s per gateway': filtered.deliveriesPerSecondPerGateway,
      'CPU ms/s per gateway': filtered.busyCpuMsPerSecond.join(' / '),
      'p50 ms': filtered.p50,
      'p99 ms': filtered.p99,
    },
  ]);
  console.log(`\nfan-out: fleetSummaryChanged, ${BURST} events, subscribers spread over three gateways; the bare ws floor with one gateway's share:`);
  console.table(
    rows.map((r) => ({
      subscribers: r.subscribers,
      'per gateway': r.perGateway,
      deliveries: r.deliveries,
      'p50 ms': r.p50,
      'p99 ms': r.p99,
      'deliveries/s per gateway': r.gatewayRates.join(' / '),
      'floor deliveries/s': r.floorRate,
      'floor p50 / p99 ms': `${r.floorP50} / ${r.floorP99}`,
      'gateway CPU ms per 1k deliveries': r.cpuMsPerThousand,
      'floor CPU ms per 1k': r.floorCpuMsPerThousand,
      'KiB/subscriber': r.kibPerSubscriber,
    })),
  );
  console.log('\none gateway killed (SIGKILL), its subscribers resumed on the other two from their cursor:');
  console.table(
    rows.map((r) => ({ subscribers: r.subscribers, resumed: r.resumed, 'caught up in s': r.resumeSeconds, 'every event once, in order': r.checked })),
  );
}

async function waitFor(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + PHASE_TIMEOUT_MS;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${PHASE_TIMEOUT_MS} ms`);
    await sleep(10);
  }
}

async function within<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what}: not within ${PHASE_TIMEOUT_MS} ms`)), PHASE_TIMEOUT_MS);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
