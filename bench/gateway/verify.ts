import { createHash } from 'node:crypto';
import type { Target } from './measure.js';
import { wanted, type Options } from './options.js';
import { log } from './run-context.js';
import {
  BATCH_SIZE,
  batchOf,
  COMPLETE_MUTATION,
  CONFIRM_MUTATION,
  FEDERATED_QUERY,
  graphql,
  PAGING_QUERY,
  QUOTE_MUTATION,
  SHALLOW_QUERY,
  type RequestSpec,
  type RestPair,
} from './workloads.js';

/*
 * Before anything is measured, every gateway is asked each workload's operations and must answer the same
 * `data`, without errors (compared as canonical JSON: object keys sorted, list order kept, since every
 * list these operations read has a defined order). A difference stops the benchmark, naming the
 * operation, the gateways and the first path where they differ.
 */

export interface Endpoint {
  name: string;
  url: string;
}

async function send(url: string, spec: RequestSpec): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`${url}${spec.path}`, {
    method: spec.method,
    headers: spec.body === undefined ? {} : { 'content-type': 'application/json' },
    ...(spec.body === undefined ? {} : { body: spec.body }),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  try {
    return { status: res.status, body: JSON.parse(text) as unknown };
  } catch {
    return { status: res.status, body: text };
  }
}

/** The `data` of a GraphQL answer that has no errors, or an exception naming what came back. */
async function graphqlData(endpoint: Endpoint, spec: RequestSpec): Promise<unknown> {
  const { status, body } = await send(endpoint.url, spec);
  const answer = body as { data?: unknown; errors?: unknown[] };
  if (status !== 200 || answer.errors || answer.data === undefined) {
    throw new Error(`${endpoint.name} answered ${operationName(spec)} with ${status}: ${JSON.stringify(body).slice(0, 600)}`);
  }
  return answer.data;
}

function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : v,
  );
}

function firstDifference(a: unknown, b: unknown, path = '$'): string {
  if (canonical(a) === canonical(b)) return '';
  if (a && b && typeof a === 'object' && typeof b === 'object') {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    for (const key of keys) {
      const diff = firstDifference((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key], `${path}.${key}`);
      if (diff) return diff;
    }
  }
  return `${path}: ${JSON.stringify(a)?.slice(0, 200)} vs ${JSON.stringify(b)?.slice(0, 200)}`;
}

function assertSame(what: string, answers: { name: string; value: unknown }[]): void {
  const [first, ...rest] = answers;
  for (const other of rest) {
    const diff = firstDifference(first!.value, other.value);
    if (diff) throw new Error(`${what}: ${first!.name} and ${other.name} answer differently at ${diff}`);
  }
}

function operationName(spec: RequestSpec): string {
  if (spec.body === undefined) return `${spec.method} ${spec.path}`;
  const { query } = JSON.parse(spec.body) as { query: string };
  return /^\s*(?:query|mutation)\s+(\w+)/.exec(query)?.[1] ?? 'operation';
}

/** Each request answered with the same data by every endpoint; returns how many requests were compared. */
async function verifySameData(endpoints: Endpoint[], specs: RequestSpec[]): Promise<number> {
  for (const spec of specs) {
    const answers = await Promise.all(endpoints.map(async (endpoint) => ({ name: endpoint.name, value: await graphqlData(endpoint, spec) })));
    assertSame(`${operationName(spec)} ${spec.body?.slice(0, 120) ?? ''}`, answers);
  }
  return specs.length;
}

/** A batch's entries, each the data its operation answers alone, on every endpoint; returns the entries compared. */
async function verifyBatch(endpoints: Endpoint[], specs: RequestSpec[]): Promise<number> {
  for (const endpoint of endpoints) {
    const { status, body } = await send(endpoint.url, batchOf(specs));
    if (status !== 200 || !Array.isArray(body) || body.length !== specs.length) {
      throw new Error(`${endpoint.name} answered a batch of ${specs.length} with ${status}: ${JSON.stringify(body).slice(0, 400)}`);
    }
    for (const [i, spec] of specs.entries()) {
      const entry = body[i] as { data?: unknown; errors?: unknown };
      if (entry.errors || entry.data === undefined)
        throw new Error(`${endpoint.name}: batch entry ${i} (${operationName(spec)}) answered ${JSON.stringify(entry).slice(0, 300)}`);
      assertSame(`batch entry ${i} (${operationName(spec)})`, [
        { name: `${endpoint.name} batched`, value: entry.data },
        { name: `${endpoint.name} alone`, value: await graphqlData(endpoint, spec) },
      ]);
    }
  }
  return specs.length * endpoints.length;
}

/** REST bodies equal across endpoints, and equal to the REST mapping of the same operation's GraphQL data. */
async function verifyRest(endpoints: Endpoint[], pairs: RestPair[]): Promise<number> {
  for (const pair of pairs) {
    const answers = [];
    for (const endpoint of endpoints) {
      const rest = await send(endpoint.url, pair.rest);
      if (rest.status !== 200)
        throw new Error(`${endpoint.name} answered GET ${pair.rest.path} with ${rest.status}: ${JSON.stringify(rest.body).slice(0, 400)}`);
      const mapped = pair.result(await graphqlData(endpoint, pair.graphql));
      assertSame(`GET ${pair.rest.path} against its operation over GraphQL`, [
        { name: `${endpoint.name} REST`, value: rest.body },
        { name: `${endpoint.name} GraphQL`, value: mapped },
      ]);
      answers.push({ name: endpoint.name, value: rest.body });
    }
    assertSame(`GET ${pair.rest.path}`, answers);
  }
  return pairs.length * endpoints.length * 2;
}

/**
 * A whole walk of the ledger on each endpoint: the same rows in the same order (cursors included); returns
 * the rows of one walk and the cursor that starts each page (null for the first).
 */
async function verifyPaging(endpoints: Endpoint[]): Promise<{ rows: number; pageStarts: (string | null)[] }> {
  const walk = async (endpoint: Endpoint) => {
    const hash = createHash('sha256');
    let after: string | null = null;
    let rows = 0;
    const pageStarts: (string | null)[] = [];
    for (let page = 0; page < 100_000; page++) {
      pageStarts.push(after);
      const data = (await graphqlData(endpoint, graphql(PAGING_QUERY, { after }))) as {
        bookings: { edges: unknown[]; pageInfo: { hasNextPage: boolean; endCursor: string | null } };
      };
      hash.update(canonical(data));
      rows += data.bookings.edges.length;
      if (!data.bookings.pageInfo.hasNextPage) break;
      after = data.bookings.pageInfo.endCursor;
    }
    return { name: endpoint.name, value: { rows, digest: hash.digest('hex') }, pageStarts };
  };
  const walks = await Promise.all(endpoints.map(walk));
  assertSame('a walk of the whole ledger', walks);
  return { rows: walks[0]!.value.rows, pageStarts: walks[0]!.pageStarts };
}

/**
 * One quote, confirm and complete on each endpoint (each with its own machine): the same answers, once ids,
 * generated per call, are left out.
 */
export async function verifyMutations(endpoints: (Endpoint & { machine: string })[]): Promise<void> {
  const answers = [];
  const startTime = new Date(Math.ceil(Date.now() / 3_600_000) * 3_600_000 + 48 * 3_600_000).toISOString();
  for (const endpoint of endpoints) {
    const input = { machineIds: [endpoint.machine], locationId: 'LOC-002', startTime, durationHours: 4 };
    const quote = ((await graphqlData(endpoint, graphql(QUOTE_MUTATION, { input }))) as { createQuote: Record<string, unknown> & { id: string } }).createQuote;
    const booking = (
      (await graphqlData(endpoint, graphql(CONFIRM_MUTATION, { input: { quoteId: quote.id, customerName: 'Benchmark customer' } }))) as {
        confirmBooking: Record<string, unknown> & { id: string };
      }
    ).confirmBooking;
    const completed = ((await graphqlData(endpoint, graphql(COMPLETE_MUTATION, { id: booking.id }))) as { completeBooking: Record<string, unknown> })
      .completeBooking;
    const withoutId = ({ id: _id, ...rest }: Record<string, unknown>) => rest;
    const machineless = (value: Record<string, unknown>) => ({ ...withoutId(value), machines: (value['machines'] as unknown[]).length });
    answers.push({ name: endpoint.name, value: [machineless(quote), machineless(booking), machineless(completed)] });
  }
  assertSame('quote, confirm, complete', answers);
}

/** What the checks before measuring found: what each workload's check compared, and where paging walks start. */
export interface Checked {
  verified: Record<string, string>;
  pageStarts: (string | null)[];
}

/**
 * Checks that every target answers the operations of each workload the run measures (the mutations are
 * checked just before they are measured): the same data everywhere, the nothing-shared targets included.
 */
export async function verifyWorkloads(options: Options, targets: readonly Target[], mix: RequestSpec[], pairs: RestPair[]): Promise<Checked> {
  log('checking that every gateway answers the same data');
  const endpoints: Endpoint[] = targets.map((t) => ({ name: t.label, url: t.server.url }));
  const projectEndpoints = endpoints.filter((_, i) => targets[i]!.project);
  const verified: Record<string, string> = {};
  if (wanted(options, 'federated') || wanted(options, 'federated-unshared')) {
    verified['federated'] = verified['federated-unshared'] = `${await verifySameData(endpoints, [graphql(FEDERATED_QUERY)])} operation`;
  }
  if (wanted(options, 'shallow') || wanted(options, 'shallow-unshared')) {
    verified['shallow'] = verified['shallow-unshared'] = `${await verifySameData(endpoints, [graphql(SHALLOW_QUERY)])} operation`;
  }
  if (wanted(options, 'mix')) verified['mix'] = `${await verifySameData(endpoints, mix)} operations`;
  if (wanted(options, 'batched'))
    verified['batched'] = `${await verifyBatch(projectEndpoints, mix.slice(0, BATCH_SIZE))} entries, each equal to its operation sent alone`;
  if (wanted(options, 'rest')) {
    verified['rest'] = `${await verifyRest(projectEndpoints, pairs)} answers, each REST body equal to its operation's GraphQL data mapped`;
  }
  let pageStarts: (string | null)[] = [null];
  if (wanted(options, 'paging')) {
    const walk = await verifyPaging(endpoints);
    verified['paging'] = `a whole walk of ${walk.rows.toLocaleString('en-US')} rows`;
    pageStarts = walk.pageStarts;
  }
  return { verified, pageStarts };
}
