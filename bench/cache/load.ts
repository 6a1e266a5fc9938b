import { Pool } from 'undici';
import { StaleChecker, type WriteKind, type WriteRecord } from './stale.js';
import { MAX_ACTIVE, READ_KINDS, readAnswer, readCall, writeCalls, writtenId, type Call, type ReadKind } from './workload.js';

/*
 * The load generator of `npm run bench -- cache`: a process of its own (forked by bench/cache/rounds.ts, one
 * round at a time over IPC), so its work is not counted in any measured process. Its clients are a dashboard's
 * users: each holds one tenant's API key and one of the target's gateways (round-robin), and sends one request
 * at a time. The writers among them keep the share of writes at WRITE_SHARE of all requests: quote a machine
 * of their own, confirm the quote, and complete their oldest booking once they hold MAX_ACTIVE, so the machines
 * in use stay bounded. A writer's reads carry the state position of its last write where the target gave one.
 * Every write and every read is told to the stale-read check (bench/cache/stale.ts), which lives as long as
 * the process, across rounds and targets: they share one database.
 */

/** The header a mutation's answer carries and a later request sends back. */
const POSITION_HEADER = 'state-position';

export interface Setup {
  type: 'setup';
  tenants: { name: string; key: string }[];
  concurrency: number;
  /** Clients 0 .. writers - 1 write; writer i quotes only machines[i]. */
  writers: number;
  machines: string[][];
  /** Writes as a share of all requests. */
  writeShare: number;
  lagMs: number;
  timeoutMs: number;
}

export interface RoundRequest {
  type: 'round';
  id: number;
  /** The target's gateways: client i sends to urls[i % urls.length]. */
  urls: string[];
  /** Half of the writes over the REST paths (else all over GraphQL). */
  rest: boolean;
  seconds: number;
}

export interface Tally {
  sent: number;
  ok: number;
  errors: number;
  timeouts: number;
  /** Latency of each success, ms. */
  latencies: number[];
}

export interface StaleTally {
  /** Reads with at least one fact to check. */
  checked: number;
  facts: number;
  /** Reads that broke a fact with the LAG horizon. */
  stale: number;
  /** Writers' reads after a write of their own, judged at LAG 0 against what their last write covers. */
  ownReads: number;
  staleOwn: number;
  /** Of those, the reads that carried a state position (the target gave one). */
  withPosition: number;
  /** The first few broken facts. */
  examples: string[];
}

export interface RoundResult {
  seconds: number;
  reads: Tally;
  writes: Tally;
  restWrites: number;
  stale: StaleTally;
  /** The first few error answers. */
  samples: string[];
}

export type LoadMessage = { id: number; result: RoundResult } | { id: number; error: string };

interface Writer {
  /** Its machines not held by a quote or a booking, next first. */
  free: string[];
  quote: { id: string; machine: string } | null;
  active: { bookingId: string; machine: string }[];
  writes: number;
}

interface Client {
  index: number;
  tenant: { name: string; key: string };
  writer: Writer | null;
  reads: number;
  /** Its last acknowledged write, and the state position its answer gave (if any). */
  last: { write: WriteRecord; position: string | null } | null;
}

/** A round in progress: its deadline, counters and tallies. */
interface Round {
  request: RoundRequest;
  deadline: number;
  started: number;
  lastAnswer: number;
  requests: number;
  result: RoundResult;
}

type Answer = { status: number; body: string; position: string | null } | { failed: string; timeout: boolean };

const emptyTally = (): Tally => ({ sent: 0, ok: 0, errors: 0, timeouts: 0, latencies: [] });

let setup: Setup;
let checker: StaleChecker;
let clients: Client[] = [];
/** Each tenant's acknowledged bookings, oldest first: what its deliveries read. */
const bookingsOf = new Map<string, string[]>();
const pools = new Map<string, Pool>();

function configure(s: Setup): void {
  setup = s;
  checker = new StaleChecker(s.lagMs, s.timeoutMs);
  clients = Array.from({ length: s.concurrency }, (_, index) => ({
    index,
    tenant: s.tenants[index % s.tenants.length]!,
    writer: index < s.writers ? { free: [...s.machines[index]!], quote: null, active: [], writes: 0 } : null,
    reads: 0,
    last: null,
  }));
}

async function send(url: string, call: Call, headers: Record<string, string>): Promise<Answer> {
  let pool = pools.get(url);
  if (!pool) pools.set(url, (pool = new Pool(url, { connections: setup.concurrency, keepAliveTimeout: 60_000 })));
  try {
    const res = await pool.request({
      method: call.method,
      path: call.path,
      headers: call.body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
      ...(call.body === undefined ? {} : { body: call.body }),
      headersTimeout: setup.timeoutMs,
      bodyTimeout: setup.timeoutMs,
    });
    const position = res.headers[POSITION_HEADER];
    return { status: res.statusCode, body: await res.body.text(), position: typeof position === 'string' ? position : null };
  } catch (error) {
    const code = (error as { code?: string }).code ?? '';
    return { failed: `${code} ${String(error)}`, timeout: code.includes('TIMEOUT') };
  }
}

/** A success: 200, and over GraphQL no `errors`; its body parsed. */
function succeeded(answer: Answer, graphql: boolean): any {
  if ('failed' in answer || answer.status !== 200) return null;
  try {
    const body = JSON.parse(answer.body);
    return graphql && body.errors !== undefined ? null : body;
  } catch {
    return null;
  }
}

function failure(round: Round, tally: Tally, answer: Answer): void {
  tally.errors++;
  if ('failed' in answer && answer.timeout) tally.timeouts++;
  const sample = 'failed' in answer ? answer.failed : `${answer.status} ${answer.body.slice(0, 300)}`;
  if (round.result.samples.length < 5) round.result.samples.push(sample);
}

async function read(round: Round, client: Client): Promise<void> {
  const known = bookingsOf.get(client.tenant.name) ?? [];
  let kind: ReadKind = READ_KINDS[(client.index + client.reads++) % READ_KINDS.length]!;
  // A tenant without a booking yet reads its ledger instead of a delivery.
  if (kind === 'delivery' && known.length === 0) kind = 'bookings';
  const bookingId = kind === 'delivery' ? known[known.length - 1 - (client.reads % Math.min(8, known.length))] : undefined;
  const headers: Record<string, string> = { 'x-api-key': client.tenant.key };
  if (client.last?.position) headers[POSITION_HEADER] = client.last.position;
  const tally = round.result.reads;
  tally.sent++;
  round.requests++;
  const startedAt = performance.now();
  const answer = await send(round.request.urls[client.index % round.request.urls.length]!, readCall(kind, bookingId), headers);
  const endedAt = performance.now();
  round.lastAnswer = endedAt;
  const body = succeeded(answer, true);
  if (!body) return failure(round, tally, answer);
  tally.ok++;
  tally.latencies.push(endedAt - startedAt);
  const verdict = checker.check({
    client: client.index,
    tenant: client.tenant.name,
    startedAt,
    endedAt,
    token: client.last?.write ?? null,
    answer: readAnswer(kind, body, bookingId),
  });
  tallyVerdict(round.result.stale, verdict, client.last?.position != null);
}

function tallyVerdict(stale: StaleTally, verdict: ReturnType<StaleChecker['check']>, withPosition: boolean): void {
  if (verdict.facts > 0) stale.checked++;
  stale.facts += verdict.facts;
  if (verdict.violations.length > 0) stale.stale++;
  if (verdict.tokenViolations) {
    stale.ownReads++;
    if (withPosition) stale.withPosition++;
    if (verdict.tokenViolations.length > 0) stale.staleOwn++;
  }
  for (const v of [...verdict.violations, ...(verdict.tokenViolations ?? []).map((t) => `${t} (own write, LAG 0)`)]) {
    if (stale.examples.length < 8) stale.examples.push(v);
  }
}

/** The writer's next step: confirm its quote, complete its oldest booking, or quote a free machine. */
function nextWrite(w: Writer): { kind: WriteKind; machine: string; subject: string } {
  if (w.quote) return { kind: 'confirm', machine: w.quote.machine, subject: w.quote.id };
  const oldest = w.active[0];
  if (oldest && (w.active.length >= MAX_ACTIVE || w.free.length === 0)) return { kind: 'complete', machine: oldest.machine, subject: oldest.bookingId };
  const machine = w.free[0]!;
  return { kind: 'quote', machine, subject: machine };
}

async function write(round: Round, client: Client, w: Writer): Promise<void> {
  const step = nextWrite(w);
  const rest = round.request.rest && w.writes++ % 2 === 1;
  if (rest) round.result.restWrites++;
  const tally = round.result.writes;
  tally.sent++;
  round.requests++;
  const record = checker.sent(
    {
      client: client.index,
      tenant: client.tenant.name,
      kind: step.kind,
      machines: [step.machine],
      ...(step.kind === 'complete' ? { bookingId: step.subject } : {}),
    },
    performance.now(),
  );
  const answer = await send(round.request.urls[client.index % round.request.urls.length]!, writeCalls[step.kind](step.subject, rest), {
    'x-api-key': client.tenant.key,
  });
  const endedAt = performance.now();
  round.lastAnswer = endedAt;
  const body = succeeded(answer, !rest);
  const id = body ? writtenId(step.kind, rest, body) : undefined;
  if (body && id) {
    checker.finished(record, endedAt, true, step.kind === 'confirm' ? id : undefined);
    tally.ok++;
    tally.latencies.push(endedAt - record.sentAt);
    client.last = { write: record, position: 'failed' in answer ? null : answer.position };
    if (step.kind === 'confirm') (bookingsOf.get(client.tenant.name) ?? bookingsOf.set(client.tenant.name, []).get(client.tenant.name)!).push(id);
  } else {
    if ('failed' in answer) checker.gaveUp(record, endedAt);
    else checker.finished(record, endedAt, false);
    failure(round, tally, answer);
  }
  advance(w, step, id ?? null, 'failed' in answer ? null : answer.status);
}

/**
 * The writer's machines after a step: a quote holds its machine until confirmed, a booking until completed.
 * A failed quote or confirm puts the machine last in line (a lost quote lapses); a completion refused (already
 * completed, say) lets the booking go, one that did not answer is tried again.
 */
function advance(w: Writer, step: { kind: WriteKind; machine: string }, id: string | null, status: number | null): void {
  if (step.kind === 'quote') {
    w.free.shift();
    if (id) w.quote = { id, machine: step.machine };
    else w.free.push(step.machine);
  } else if (step.kind === 'confirm') {
    w.quote = null;
    if (id) w.active.push({ bookingId: id, machine: step.machine });
    else w.free.push(step.machine);
  } else if (id || (status !== null && status >= 400 && status < 500)) {
    w.active.shift();
    w.free.push(step.machine);
  }
}

async function clientLoop(round: Round, client: Client): Promise<void> {
  while (performance.now() < round.deadline) {
    const w = client.writer;
    // A writer writes whenever the writes have fallen below their share of the round's requests.
    const writes = round.result.writes.sent;
    if (w && writes < setup.writeShare * (round.requests + 1)) await write(round, client, w);
    else await read(round, client);
  }
}

async function runRound(request: RoundRequest): Promise<RoundResult> {
  const started = performance.now();
  const round: Round = {
    request,
    started,
    deadline: started + request.seconds * 1000,
    lastAnswer: started,
    requests: 0,
    result: {
      seconds: 0,
      reads: emptyTally(),
      writes: emptyTally(),
      restWrites: 0,
      stale: { checked: 0, facts: 0, stale: 0, ownReads: 0, staleOwn: 0, withPosition: 0, examples: [] },
      samples: [],
    },
  };
  await Promise.all(clients.map((c) => clientLoop(round, c)));
  round.result.seconds = (round.lastAnswer - started) / 1000;
  return round.result;
}

process.on('message', (message: Setup | RoundRequest | { type: 'exit' }) => {
  if (message.type === 'exit') {
    void Promise.all([...pools.values()].map((p) => p.close())).finally(() => process.exit(0));
    return;
  }
  if (message.type === 'setup') return configure(message);
  const reply = (m: LoadMessage) => process.send!(m);
  runRound(message).then(
    (result) => reply({ id: message.id, result }),
    (error: unknown) => reply({ id: message.id, error: String((error as Error)?.stack ?? error) }),
  );
});
