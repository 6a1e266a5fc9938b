import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { directCounts } from '../../../gateway/pipeline/direct-execution.js';
import { hoursFromNow } from '../../support/http.js';
import { modes, startTestServer, type TestServer } from '../../support/server.js';

/*
 * GraphQL over POST runs without Apollo Server's pipeline (gateway/pipeline/direct-execution.ts), and must
 * answer exactly as Apollo Server does. Every request of the corpus is sent twice to the same server: as
 * clients send it (the direct path), and with an empty `extensions` object, which the direct path leaves
 * to Apollo Server. Status, media type, cache-control, the rate limit's and outage headers, and the body
 * byte for byte must be the same; the direct path's counter says which door each took.
 */

/** Each case acts with a key of its own: the rate limit's bucket is per principal. */
const keyOfCase = (index: number) => `direct-case-key-${String(index).padStart(4, '0')}`;
const OPERATOR = 'direct-operator-key-00001';
const PARTNER = 'direct-partner-key-000001';
const RUNNER = 'direct-runner-key-0000001';
const KEYMAKER = 'direct-keymaker-key-00001';

interface Case {
  name: string;
  body: { query: string; variables?: Record<string, unknown>; operationName?: string };
  key?: string;
  accept?: string | null;
  /** The direct path takes it (otherwise Apollo Server answers both). */
  direct: boolean;
  /** Sent first, before each door's request. */
  before?: (url: string, key: string) => Promise<void>;
}

/**
 * Spends the principal's bucket down to 3 tokens or fewer with cheap reads: the heavy request after it
 * passes the edge (one token) and finds too few for the rest of its cost (429 from the rate charge).
 */
async function drainTo3(url: string, key: string): Promise<void> {
  for (let i = 0; i < 40; i++) {
    const res = await fetch(`${url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': key },
      body: '{"query":"{ __typename }"}',
    });
    await res.text();
    const remaining = Number(res.headers.get('ratelimit-remaining'));
    if (res.status === 200 && remaining >= 1 && remaining <= 3) return;
    // An empty bucket refills at RATE_LIMIT_PER_S: the refusal says when.
    if (res.status === 429) await new Promise((resolve) => setTimeout(resolve, Number(res.headers.get('retry-after')) * 1000));
  }
  throw new Error('the bucket did not drain to 1-3 tokens');
}

const LEDGER = `query Ledger($first: Int!) { bookings(first: $first) { totalCount pageInfo { hasNextPage }
  edges { node { id status customerName location { id name } machines { id name } bill { quotedAmount closed }
  deliveryForecast { q10Minutes q50Minutes q90Minutes } } } } }`;

const CASES: Case[] = [
  { name: 'a query without variables', body: { query: '{ fleetSummary { total available reserved inUse } }' }, direct: true },
  { name: 'a federated query with variables', body: { query: LEDGER, variables: { first: 5 } }, direct: true },
  {
    name: 'one operation of several, by name (a field with a cache hint)',
    body: { query: 'query A { fleetSummary { total } } query B { predictionModels { ready seed } }', operationName: 'B' },
    direct: true,
  },
  { name: 'a public field with a cache hint', body: { query: '{ quoteSigningKeys { kid kty crv } }' }, direct: true },
  { name: 'only __typename', body: { query: '{ __typename }' }, direct: true },
  {
    name: 'a booking that does not exist',
    body: { query: 'query One($id: ID!) { booking(id: $id) { id status } }', variables: { id: 'BK-nope' } },
    direct: true,
  },
  {
    name: 'variables that do not coerce',
    body: { query: 'query Page($first: Int!) { bookings(first: $first) { totalCount } }', variables: { first: 'ten' } },
    direct: true,
  },
  { name: 'a required variable missing', body: { query: 'query Page($first: Int!) { bookings(first: $first) { totalCount } }' }, direct: true },
  {
    name: 'a mutation the subgraph refuses (no change made)',
    body: {
      query: 'mutation Quote($input: CreateQuoteInput!) { createQuote(input: $input) { id } }',
      variables: { input: { machineIds: ['EQ-001'], locationId: 'LOC-nowhere', startTime: hoursFromNow(2), durationHours: -3 } },
    },
    direct: true,
  },
  { name: "a field outside the principal's scopes", body: { query: '{ predictionModels { ready } }' }, key: PARTNER, direct: true },
  {
    name: 'an operation that costs more than the whole bucket (refused at once, never capped)',
    body: { query: 'mutation Run { startQuantumRun(input: { problem: REGULAR3_MAXCUT, size: 4 }) { id } }' },
    key: RUNNER,
    direct: true,
  },
  {
    name: 'an operation over the rate limit (a heavy one the bucket holds too little for now)',
    body: { query: 'mutation Key { generateQuantumKey(input: { sessionId: "BS-none", bits: 64 }) { keyId } }' },
    key: KEYMAKER,
    before: drainTo3,
    direct: true,
  },
  { name: 'Accept: application/json', body: { query: '{ fleetSummary { total } }' }, accept: 'application/json', direct: true },
  { name: 'no Accept header', body: { query: '{ fleetSummary { total } }' }, accept: null, direct: true },
  { name: 'Accept: */*', body: { query: '{ fleetSummary { total } }' }, accept: '*/*', direct: true },
  { name: 'Accept: the callback spec', body: { query: '{ fleetSummary { total } }' }, accept: 'application/json; callbackSpec=1.0', direct: true },
  // Apollo Server's on both doors:
  { name: 'an operationName that selects nothing', body: { query: 'query A { fleetSummary { total } }', operationName: 'B' }, direct: false },
  { name: 'an invalid document', body: { query: '{ fleetSummary { nope } }' }, direct: false },
  { name: 'introspection', body: { query: '{ __schema { queryType { name } } }' }, direct: false },
  { name: 'a deferred fragment', body: { query: '{ fleetSummary { total ... @defer { available } } }' }, direct: false },
];

/** What must be alike: the rate limit's counters move with every request, so only their presence counts. */
const HEADERS = ['content-type', 'cache-control', 'retry-after', 'ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'vary'];
const PRESENCE_ONLY = new Set(['ratelimit-remaining', 'ratelimit-reset', 'retry-after']);

async function send(url: string, c: Case, viaApollo: boolean) {
  const headers: Record<string, string> = { 'content-type': 'application/json', 'x-api-key': c.key ?? keyOfCase(CASES.indexOf(c)) };
  if (c.accept !== null) headers['accept'] = c.accept ?? 'application/graphql-response+json, application/json';
  const body = viaApollo ? { ...c.body, extensions: {} } : c.body;
  await c.before?.(url, headers['x-api-key']!);
  const before = directCounts.http;
  const res = await fetch(`${url}/graphql`, { method: 'POST', headers, body: JSON.stringify(body) });
  // The wait a refusal names moves with the bucket, which each request drains by a token.
  const text = (await res.text()).replace(/retry in \d+ s/g, 'retry in N s').replace(/"retryAfter":\d+/g, '"retryAfter":N');
  const seen = Object.fromEntries(HEADERS.filter((h) => res.headers.has(h)).map((h) => [h, PRESENCE_ONLY.has(h) ? 'present' : res.headers.get(h)]));
  return { status: res.status, headers: seen, text, direct: directCounts.http > before };
}

describe.each(modes)("GraphQL over POST without Apollo Server's pipeline answers as Apollo Server does (%s)", (mode) => {
  let server: TestServer;
  const dir = mkdtempSync(join(tmpdir(), 'direct-graphql-'));
  beforeAll(async () => {
    const file = join(dir, 'keys.json');
    writeFileSync(
      file,
      JSON.stringify([
        ...CASES.map((_, i) => ({ key: keyOfCase(i), principal: `direct-case-${i}`, tenant: 'corpus', scopes: ['ops:admin'] })),
        { key: PARTNER, principal: 'direct-partner', tenant: 'partner', scopes: ['rental:read'] },
        { key: RUNNER, principal: 'direct-runner', tenant: 'runners', scopes: ['optimization:run'] },
        { key: KEYMAKER, principal: 'direct-keymaker', tenant: 'runners', scopes: ['bonding:use'] },
      ]),
    );
    server = await startTestServer({
      mode,
      env: {
        API_KEYS_FILE: file,
        API_KEYS: OPERATOR,
        PRINCIPAL_SECRET: 'direct-principal-secret-0123456789abcdef',
        // Three requests of a case fit in a principal's bucket; a heavy operation costs more than it holds.
        RATE_LIMIT_BURST: '10',
        RATE_LIMIT_PER_S: '1',
        // Every read reaches its subgraph on both doors.
        GATEWAY_FETCH_CACHE_MB: '0',
      },
    });
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  for (const c of CASES) {
    it(c.name, async () => {
      const direct = await send(server.url, c, false);
      const apollo = await send(server.url, c, true);
      expect(apollo.direct).toBe(false);
      expect(direct.direct).toBe(c.direct);
      expect({ ...direct, direct: undefined }).toEqual({ ...apollo, direct: undefined });
    });
  }

  it('the corpus covers what it says: answers with data, refusals, request errors', async () => {
    // One after another: the rate-limit cases drain their principal's bucket to a known level first.
    const answers = [];
    for (const c of CASES.filter((c) => c.direct)) answers.push(await send(server.url, c, false));
    const statuses = new Set(answers.map((a) => a.status));
    expect([...statuses].sort()).toEqual([200, 400, 403, 429]);
    // Only a registered query sent by GET is ever cacheable (docs/operations.md, "Caching"), in either mode.
    expect(answers.filter((a) => a.headers['cache-control'] !== 'no-store').map((a) => [a.status, a.text])).toEqual([]);
    expect(answers.some((a) => a.headers['content-type'] === 'application/json; callbackSpec=1.0; charset=utf-8')).toBe(true);
  });
});

describe('GRAPHQL_DIRECT_EXECUTION=false', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ env: { GRAPHQL_DIRECT_EXECUTION: 'false' } });
  });

  it('sends every /graphql request through Apollo Server, with the same answer', async () => {
    const before = directCounts.http;
    const res = await fetch(`${server.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json' },
      body: JSON.stringify({ query: '{ fleetSummary { total } }' }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(((await res.json()) as { data: { fleetSummary: { total: number } } }).data.fleetSummary.total).toBeGreaterThan(0);
    expect(directCounts.http).toBe(before);
  });
});
