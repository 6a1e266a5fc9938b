import autocannon from 'autocannon';
import { COMPLETE_MUTATION, CONFIRM_MUTATION, QUOTE_MUTATION, type LoadPlan, type RequestSpec } from './workloads.js';

/*
 * The load generator of `npm run bench -- gateway`: a process of its own (forked by bench/gateway.ts, which
 * sends it one run at a time over IPC), so autocannon's work is not counted in any measured process.
 * Every response is classified: 2xx without GraphQL `errors` is a success; a 2xx with `errors` and any
 * other status are errors, and so are autocannon's connection errors and timeouts.
 */

export interface RunRequest {
  type: 'run';
  id: number;
  url: string;
  connections: number;
  /** Run for this long, or until `amount` responses. */
  seconds?: number;
  amount?: number;
  timeoutSeconds: number;
  plan: LoadPlan;
}

export interface CleanupRequest {
  type: 'cleanup';
  id: number;
  url: string;
  poolKey: string;
}

export interface LoadResult {
  seconds: number;
  /** Requests sent; those still unanswered when the run stopped are finished by the server afterwards. */
  sent: number;
  responses: number;
  ok: number;
  non2xx: number;
  graphqlErrors: number;
  /** Connection errors and timeouts (autocannon's `errors`, timeouts included). */
  errors: number;
  timeouts: number;
  /** Latency of each 2xx response, in ms. */
  latencies: number[];
  /** Rows read (paging). */
  rows: number;
  /** The first few error bodies, to say what went wrong. */
  samples: string[];
}

export type LoadMessage = { id: number; result: LoadResult } | { id: number; cleaned: { freed: number; lost: number } } | { id: number; error: string };

const JSON_HEADERS = { 'content-type': 'application/json' };

interface Counters {
  ok: number;
  non2xx: number;
  graphqlErrors: number;
  rows: number;
  samples: string[];
}

function classify(counters: Counters, status: number, body: string): boolean {
  const ok = status >= 200 && status < 300 && !body.includes('"errors"');
  if (ok) counters.ok++;
  else {
    if (status >= 200 && status < 300) counters.graphqlErrors++;
    else counters.non2xx++;
    if (counters.samples.length < 5) counters.samples.push(`${status} ${body.slice(0, 300)}`);
  }
  return ok;
}

type Request = autocannon.Request;
/** autocannon's per-connection context: reset when its list of requests starts over. */
type Context = Record<string, unknown>;

function cycleRequests(plan: Extract<LoadPlan, { kind: 'cycle' }>, counters: Counters): Request[] {
  const onResponse = (status: number, body: string) => void classify(counters, status, body);
  const only = plan.requests.length === 1 ? plan.requests[0] : undefined;
  if (only) return [{ ...toRequest(only), onResponse }];
  let next = 0;
  return [
    {
      ...toRequest(plan.requests[0]!),
      setupRequest: (req) => ({ ...req, ...toRequest(plan.requests[next++ % plan.requests.length]!) }),
      onResponse,
    },
  ];
}

function toRequest(spec: RequestSpec): autocannon.Request {
  return spec.body === undefined
    ? { method: spec.method, path: spec.path, headers: {} }
    : { method: spec.method, path: spec.path, headers: JSON_HEADERS, body: spec.body };
}

/** Walkers follow the ledger's cursors; a walker is held by one connection for one request at a time. */
function pagingRequests(plan: Extract<LoadPlan, { kind: 'paging' }>, counters: Counters): Request[] {
  const ready: { after: string | null }[] = plan.starts.map((after) => ({ after }));
  return [
    {
      method: 'POST',
      path: '/graphql',
      headers: JSON_HEADERS,
      setupRequest: (req, context) => {
        const walker = ready.pop() ?? { after: null };
        (context as Context)['walker'] = walker;
        return { ...req, body: JSON.stringify({ query: plan.query, variables: { after: walker.after } }) };
      },
      onResponse: (status, body, context) => {
        const walker = ((context as Context)['walker'] as { after: string | null } | undefined) ?? { after: null };
        walker.after = null;
        if (classify(counters, status, body)) {
          const page = (JSON.parse(body) as { data: { bookings: { edges: unknown[]; pageInfo: { hasNextPage: boolean; endCursor: string | null } } } }).data
            .bookings;
          counters.rows += page.edges.length;
          if (page.pageInfo.hasNextPage) walker.after = page.pageInfo.endCursor;
        }
        ready.push(walker);
      },
    },
  ];
}

interface Chain {
  quoteId?: string;
  bookingId?: string;
}

/** Machines of one target's pool: free, in a chain (quote, confirm, complete), or of unknown state. */
interface Pool {
  free: string[];
  chains: Map<string, Chain>;
  unknown: Set<string>;
}

const pools = new Map<string, Pool>();

function mutationRequests(plan: Extract<LoadPlan, { kind: 'mutations' }>, counters: Counters): Request[] {
  let pool = pools.get(plan.poolKey);
  if (!pool) {
    pool = { free: [...plan.pool], chains: new Map(), unknown: new Set() };
    pools.set(plan.poolKey, pool);
  }
  const p = pool;
  const machineOf = (context: object) => (context as Context)['machine'] as string | undefined;
  const data = (status: number, body: string) =>
    classify(counters, status, body) ? (JSON.parse(body) as { data: Record<string, { id: string }> }).data : null;
  return [
    {
      method: 'POST',
      path: '/graphql',
      headers: JSON_HEADERS,
      setupRequest: (req, context) => {
        // An empty pool sends a machine that does not exist, counted as an error (and said in the samples).
        const machine = p.free.shift() ?? 'EQ-099';
        (context as Context)['machine'] = machine;
        if (machine !== 'EQ-099') p.unknown.add(machine);
        const startTime = new Date(Math.ceil(Date.now() / 3_600_000) * 3_600_000 + 48 * 3_600_000).toISOString();
        const input = { machineIds: [machine], locationId: `LOC-00${1 + (Number(machine.slice(3)) % 6)}`, startTime, durationHours: 4 };
        return { ...req, body: JSON.stringify({ query: QUOTE_MUTATION, variables: { input } }) };
      },
      onResponse: (status, body, context) => {
        const machine = machineOf(context)!;
        const quote = data(status, body)?.['createQuote'];
        if (quote) {
          p.unknown.delete(machine);
          p.chains.set(machine, { quoteId: quote.id });
        }
      },
    },
    {
      method: 'POST',
      path: '/graphql',
      headers: JSON_HEADERS,
      setupRequest: (req, context) => {
        const quoteId = p.chains.get(machineOf(context) ?? '')?.quoteId;
        // No quote (its request failed): nothing to confirm, and a falsy request makes autocannon start over.
        if (!quoteId) return undefined as unknown as autocannon.Request;
        return { ...req, body: JSON.stringify({ query: CONFIRM_MUTATION, variables: { input: { quoteId, customerName: 'Benchmark customer' } } }) };
      },
      onResponse: (status, body, context) => {
        const booking = data(status, body)?.['confirmBooking'];
        const chain = p.chains.get(machineOf(context) ?? '');
        if (booking && chain) chain.bookingId = booking.id;
      },
    },
    {
      method: 'POST',
      path: '/graphql',
      headers: JSON_HEADERS,
      setupRequest: (req, context) => {
        const bookingId = p.chains.get(machineOf(context) ?? '')?.bookingId;
        // The confirm failed: the chain starts over with another machine (this one is tidied after the round).
        if (!bookingId) return undefined as unknown as autocannon.Request;
        return { ...req, body: JSON.stringify({ query: COMPLETE_MUTATION, variables: { id: bookingId } }) };
      },
      onResponse: (status, body, context) => {
        const machine = machineOf(context)!;
        if (data(status, body)?.['completeBooking']) {
          p.chains.delete(machine);
          p.free.push(machine);
        }
      },
    },
  ];
}

/**
 * After a round, finishes what the round left half done (outside the measurement): a quote is confirmed
 * and completed, a booking completed; a machine whose quote answer was lost returns to the pool once it
 * reads as available (its quote expired).
 */
async function cleanup(url: string, poolKey: string): Promise<{ freed: number; lost: number }> {
  const pool = pools.get(poolKey);
  if (!pool) return { freed: 0, lost: 0 };
  const post = async (query: string, variables: Record<string, unknown>) => {
    const res = await fetch(`${url}/graphql`, {
      method: 'POST',
      headers: JSON_HEADERS,
      body: JSON.stringify({ query, variables }),
      signal: AbortSignal.timeout(10_000),
    });
    return ((await res.json()) as { data?: Record<string, Record<string, unknown> | null> }).data ?? {};
  };
  let freed = 0;
  for (const [machine, chain] of [...pool.chains]) {
    try {
      let bookingId = chain.bookingId;
      if (!bookingId && chain.quoteId) {
        const quote = (await post('query Q($id: ID!) { quote(id: $id) { status booking { id } } }', { id: chain.quoteId }))['quote'] as {
          status: string;
          booking: { id: string } | null;
        } | null;
        if (quote?.status === 'ACTIVE') {
          const made = await post(CONFIRM_MUTATION, { input: { quoteId: chain.quoteId, customerName: 'Benchmark customer' } });
          bookingId = (made['confirmBooking'] as { id: string } | null)?.id;
        } else bookingId = quote?.booking?.id;
      }
      if (bookingId) await post(COMPLETE_MUTATION, { id: bookingId });
    } catch {
      // Left to the availability probe below.
    }
    pool.chains.delete(machine);
    pool.unknown.add(machine);
  }
  for (const machine of [...pool.unknown]) {
    const answer: Record<string, unknown> = await post('query M($id: ID!) { machine(id: $id) { status } }', { id: machine }).catch(() => ({}));
    const found = answer['machine'] as { status: string } | null | undefined;
    if (found?.status === 'AVAILABLE') {
      pool.unknown.delete(machine);
      pool.free.push(machine);
      freed++;
    }
  }
  return { freed, lost: pool.unknown.size };
}

async function run(request: RunRequest): Promise<LoadResult> {
  const counters: Counters = { ok: 0, non2xx: 0, graphqlErrors: 0, rows: 0, samples: [] };
  const { plan } = request;
  const requests =
    plan.kind === 'cycle' ? cycleRequests(plan, counters) : plan.kind === 'paging' ? pagingRequests(plan, counters) : mutationRequests(plan, counters);
  const latencies: number[] = [];
  const started = performance.now();
  let lastResponseAt = started;
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url: request.url,
        connections: request.connections,
        timeout: request.timeoutSeconds,
        // autocannon notices the end of a run (its duration, or the last of \`amount\`) on this tick.
        sampleInt: 100,
        requests,
        ...(request.amount ? { amount: request.amount } : { duration: request.seconds ?? 10 }),
      },
      (error: unknown, done: autocannon.Result) =>
        error ? reject(error instanceof Error ? error : new Error(`autocannon failed: ${JSON.stringify(error)}`)) : resolve(done),
    );
    instance.on('response', (_client, statusCode, _bytes, responseTime) => {
      lastResponseAt = performance.now();
      if (statusCode >= 200 && statusCode < 300) latencies.push(Math.round(responseTime * 100) / 100);
    });
  });
  return {
    // From the start to the last answer: the run's own length, whatever autocannon's bookkeeping adds.
    seconds: (lastResponseAt > started ? lastResponseAt - started : performance.now() - started) / 1000,
    sent: result.requests.sent,
    responses: counters.ok + counters.non2xx + counters.graphqlErrors,
    ok: counters.ok,
    non2xx: counters.non2xx,
    graphqlErrors: counters.graphqlErrors,
    errors: result.errors,
    timeouts: result.timeouts,
    latencies,
    rows: counters.rows,
    samples: counters.samples,
  };
}

process.on('message', (message: RunRequest | CleanupRequest | { type: 'exit' }) => {
  if (message.type === 'exit') process.exit(0);
  const reply = (m: LoadMessage) => process.send!(m);
  const work =
    message.type === 'run'
      ? run(message).then((result) => ({ id: message.id, result }))
      : cleanup(message.url, message.poolKey).then((cleaned) => ({ id: message.id, cleaned }));
  work.then(reply, (error: unknown) => reply({ id: message.id, error: String((error as Error)?.stack ?? error) }));
});
