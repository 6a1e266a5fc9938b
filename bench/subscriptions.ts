import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request, type ClientRequest } from 'node:http';
import { argv } from 'node:process';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';
import { freePort } from '../test/support/port.js';
import { quantile, round } from './support/stats.js';

/*
 * npm run bench -- subscriptions [N ...]
 *
 * One gateway process (npm start, embedded PGlite in memory) and, in this process, N graphql-transport-ws
 * subscribers, each on its own socket, all subscribed to fleetSummaryChanged (the dashboard case: one
 * shared upstream stream fanned out to N sockets). Then a burst of state changes (quotes, one machine
 * each, sent back to back); every fleet event is timed at every subscriber.
 *
 * Latency is receipt time minus the time the mutation that caused the event was sent: an upper bound on
 * commit-to-receipt (it also holds the mutation's own round trip, reported alongside). Memory per
 * subscriber is the gateway's resident-set growth while the N subscriptions open, divided by N.
 * Everything runs on 127.0.0.1 and is bounded: N sockets, BURST mutations, 60 s per phase at most.
 *
 * Each N runs three times, side by side: against the gateway over graphql-ws, against the gateway over
 * Server-Sent Events (each subscriber its own HTTP stream, graphql-sse's distinct connections), and against
 * bench/ws-floor.ts, a bare `ws` server that sends one pre-serialized message to every socket when poked
 * over HTTP. The same burst measures all three; the gateway's CPU per delivery is its process's user+system
 * time (from /proc) over the burst, divided by the deliveries.
 */

const root = fileURLToPath(new URL('..', import.meta.url));
const BURST = 12;
const PHASE_TIMEOUT_MS = 60_000;

type Target = 'gateway' | 'gateway SSE' | 'bare ws';

interface Row {
  target: Target;
  subscribers: number;
  events: number;
  deliveries: number;
  p50: number;
  p99: number;
  max: number;
  mutationRtt: number;
  /** The first event of the burst alone (no earlier event queued ahead of it). */
  firstP99: number;
  eventsPerSecond: number;
  kibPerSubscriber: number;
  connectSeconds: number;
  /** The server process's CPU (user + system) over the burst, per delivery, in microseconds. */
  cpuUsPerDelivery: number;
}

export default async function bench(): Promise<void> {
  const sizes = argv
    .slice(3)
    .map(Number)
    .filter((n) => Number.isInteger(n) && n > 0);
  const rows: Row[] = [];
  for (const n of sizes.length > 0 ? sizes : [1000, 10_000]) {
    rows.push(await runOnce(n, 'gateway'));
    rows.push(await runOnce(n, 'gateway SSE'));
    rows.push(await runOnce(n, 'bare ws'));
  }
  console.log('\nsubscriptions: fleetSummaryChanged to N subscribers, one server process, 2-core machine');
  console.table(
    rows.map((r) => ({
      server: r.target,
      subscribers: r.subscribers,
      'events x subscribers': `${r.events} x ${r.subscribers} = ${r.deliveries}`,
      'p50 ms': r.p50,
      'p99 ms': r.p99,
      'max ms': r.max,
      'first event p99 ms': r.firstP99,
      'mutation rtt p50 ms': r.mutationRtt,
      'deliveries/s': r.eventsPerSecond,
      'server CPU us/delivery': r.cpuUsPerDelivery,
      'KiB/subscriber': r.kibPerSubscriber,
      'connect s': r.connectSeconds,
    })),
  );
  console.log('SSE / graphql-ws, same gateway, same N:');
  console.table(
    rows
      .filter((r) => r.target === 'gateway SSE')
      .map((sse) => {
        const ws = rows.find((r) => r.target === 'gateway' && r.subscribers === sse.subscribers)!;
        return {
          subscribers: sse.subscribers,
          'CPU per delivery x': round(sse.cpuUsPerDelivery / ws.cpuUsPerDelivery),
          'first event p99 x': round(sse.firstP99 / ws.firstP99),
          'p99 x': round(sse.p99 / ws.p99),
          'KiB/subscriber x': round(sse.kibPerSubscriber / ws.kibPerSubscriber),
        };
      }),
  );
  console.log('gateway / bare ws, same N:');
  console.table(
    rows
      .filter((r) => r.target === 'gateway')
      .map((g) => {
        const floor = rows.find((r) => r.target === 'bare ws' && r.subscribers === g.subscribers)!;
        return {
          subscribers: g.subscribers,
          'p50 x': round(g.p50 / floor.p50),
          'p99 x': round(g.p99 / floor.p99),
          'first event p99 x': round(g.firstP99 / floor.firstP99),
          'deliveries/s x': round(g.eventsPerSecond / floor.eventsPerSecond),
        };
      }),
  );
}

async function runOnce(n: number, target: Target): Promise<Row> {
  const gateway = await startServer(target === 'bare ws' ? 'bench/ws-floor.ts' : 'gateway/main.ts');
  const sockets: Array<{ terminate(): void }> = [];
  try {
    await sleep(500);
    const rssBefore = rssKiB(gateway.child.pid!);
    const wsUrl = `${gateway.url.replace(/^http/, 'ws')}/graphql`;
    // Receipt times per subscriber, by the `reserved` count that identifies the mutation.
    const receipts: number[][] = Array.from({ length: BURST + 1 }, () => []);
    const connectStarted = Date.now();
    for (let i = 0; i < n; i += 250) {
      const batch = Array.from({ length: Math.min(250, n - i) }, () =>
        target === 'gateway SSE' ? sseSubscriber(`${gateway.url}/graphql`, receipts) : subscriber(wsUrl, receipts),
      );
      sockets.push(...(await withTimeout(Promise.all(batch), PHASE_TIMEOUT_MS, 'connecting subscribers')));
    }
    const connectSeconds = (Date.now() - connectStarted) / 1000;
    await sleep(1000);
    const rssAfter = rssKiB(gateway.child.pid!);

    const sent: number[] = [];
    const rtts: number[] = [];
    const cpuBefore = cpuMs(gateway.child.pid!);
    const burstStarted = performance.now();
    for (let k = 1; k <= BURST; k++) {
      const machine = `EQ-${String(k).padStart(3, '0')}`;
      sent[k] = performance.now();
      const res =
        target !== 'bare ws'
          ? await fetch(`${gateway.url}/rental/pricing/quote`, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify({
                machine_ids: [machine],
                location_id: 'LOC-001',
                start_time: new Date(Date.now() + 3 * 3_600_000).toISOString(),
                duration_hours: 4,
              }),
            })
          : await fetch(`${gateway.url}/emit?reserved=${k}`, { method: 'POST' });
      if (res.status !== 200) throw new Error(`quote ${machine}: ${res.status} ${await res.text()}`);
      rtts.push(performance.now() - sent[k]!);
    }
    await withTimeout(
      (async () => {
        while (receipts.slice(1).some((r) => r.length < n)) await sleep(20);
      })(),
      PHASE_TIMEOUT_MS,
      'deliveries',
    );
    const cpuUsed = cpuMs(gateway.child.pid!) - cpuBefore;
    const lastReceipt = Math.max(...receipts.slice(1).flat());
    const latencies = receipts.slice(1).flatMap((times, i) => times.map((t) => t - sent[i + 1]!));
    latencies.sort((a, b) => a - b);
    const first = receipts[1]!.map((t) => t - sent[1]!).sort((a, b) => a - b);
    const deliveries = latencies.length;
    return {
      target,
      subscribers: n,
      events: BURST,
      deliveries,
      p50: round(quantile(latencies, 0.5)),
      p99: round(quantile(latencies, 0.99)),
      max: round(latencies[latencies.length - 1]!),
      mutationRtt: round(
        quantile(
          [...rtts].sort((a, b) => a - b),
          0.5,
        ),
      ),
      firstP99: round(quantile(first, 0.99)),
      eventsPerSecond: Math.round(deliveries / ((lastReceipt - burstStarted) / 1000)),
      kibPerSubscriber: round((rssAfter - rssBefore) / n),
      connectSeconds: round(connectSeconds),
      cpuUsPerDelivery: round((cpuUsed * 1000) / deliveries),
    };
  } finally {
    for (const s of sockets) s.terminate();
    await stopGateway(gateway.child);
  }
}

/**
 * One subscriber on its own socket, speaking graphql-transport-ws, timing each fleet event by its `reserved`
 * count; resolves once subscribed. Shared with bench/scale.ts's floor runs.
 */
export function subscriber(url: string, receipts: number[][]): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, 'graphql-transport-ws');
    ws.once('error', reject);
    ws.once('open', () => ws.send(JSON.stringify({ type: 'connection_init' })));
    ws.on('message', (raw: Buffer) => {
      const at = performance.now();
      const text = raw.toString();
      if (text.includes('"connection_ack"')) {
        ws.send(
          JSON.stringify({
            id: '1',
            type: 'subscribe',
            payload: { query: 'subscription { fleetSummaryChanged { cursor reserved utilization surgeMultiplier } }' },
          }),
        );
        // The subscription is registered when the server has read it; a ping round trip proves that.
        ws.send(JSON.stringify({ type: 'ping' }));
        return;
      }
      if (text.includes('"pong"')) {
        resolve(ws);
        return;
      }
      const reserved = /"reserved":(\d+)/.exec(text);
      if (reserved) receipts[Number(reserved[1])]?.push(at);
    });
  });
}

/**
 * One subscriber as its own HTTP stream (GraphQL over SSE, distinct connections), timing each fleet event by
 * its `reserved` count; resolves once the gateway has opened the stream (its first comment line arrived).
 */
function sseSubscriber(url: string, receipts: number[][]): Promise<{ terminate(): void }> {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ query: 'subscription { fleetSummaryChanged { cursor reserved utilization surgeMultiplier } }' });
    const req: ClientRequest = request(
      url,
      { method: 'POST', agent: false, headers: { 'content-type': 'application/json', accept: 'text/event-stream', 'content-length': Buffer.byteLength(body) } },
      (res) => {
        if (res.statusCode !== 200) return reject(new Error(`SSE subscribe: ${res.statusCode}`));
        res.setEncoding('utf8');
        let opened = false;
        res.on('data', (chunk: string) => {
          const at = performance.now();
          if (!opened) {
            opened = true;
            resolve({ terminate: () => req.destroy() });
          }
          for (const match of chunk.matchAll(/"reserved":(\d+)/g)) receipts[Number(match[1])]?.push(at);
        });
      },
    );
    req.once('error', reject);
    req.end(body);
  });
}

/** User + system CPU of a process so far, ms, from /proc (clock ticks of 10 ms). */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

interface Gateway {
  url: string;
  child: ChildProcess;
}

async function startServer(entry: string): Promise<Gateway> {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [...(process.env.BENCH_PROF ? ['--cpu-prof', '--cpu-prof-dir=' + process.env.BENCH_PROF] : []), '--import', 'tsx', entry],
    {
      cwd: root,
      env: {
        ...process.env,
        PORT: String(port),
        HOST: '127.0.0.1',
        DATA_DIR: ':memory:',
        LOG_LEVEL: 'warn',
        API_KEYS: '',
        DATABASE_URL: '',
        // Every subscriber here is the one demo principal.
        HTTP_MAX_STREAMS_PER_PRINCIPAL: '100000',
      },
      stdio: ['ignore', 'inherit', 'inherit'],
    },
  );
  const url = `http://127.0.0.1:${port}`;
  await withTimeout(
    (async () => {
      for (;;) {
        if (child.exitCode !== null) throw new Error(`gateway exited with ${child.exitCode}`);
        const ok = await fetch(`${url}/health`).then(
          (r) => r.ok,
          () => false,
        );
        if (ok) return;
        await sleep(100);
      }
    })(),
    PHASE_TIMEOUT_MS,
    'gateway start',
  );
  return { url, child };
}

function stopGateway(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
    setTimeout(() => child.kill('SIGKILL'), 10_000).unref();
  });
}

/** Resident set of a process, KiB, from /proc. */
export function rssKiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms);
    }),
  ]);
}
