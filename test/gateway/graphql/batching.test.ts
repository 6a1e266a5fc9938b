import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApolloClient, ApolloLink, gql as parseQuery, InMemoryCache } from '@apollo/client';
import { BatchHttpLink } from '@apollo/client/link/batch-http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditEntry } from '../../../gateway/security/audit.js';
import { safelistEnv } from '../../support/credentials.js';
import { hoursFromNow } from '../../support/http.js';
import { startTestServer, type TestServer } from '../../support/server.js';

/*
 * HTTP batching: an array of operations in one POST, as Apollo Client's BatchHttpLink sends it, answered as an
 * array in the same order (Apollo Router's convention: 200 for the batch, each entry the answer its operation
 * gets alone). Every entry is a whole operation for every check of the pipeline; what concerns the batch as a
 * whole refuses it whole, before anything runs.
 */

const OPERATOR = 'batch-operator-key-000001';
/**
 * Partners: read the fleet and book; no prediction, no free text (the safelist applies). One per test, each
 * with its own bucket of four tokens.
 */
const partner = (test: number) => `batch-partner-${test}-key-000001`;
const PARTNERS = 10;

const FLEET = 'query BatchFleet { fleetSummary { total available } }';
const MACHINES = 'query BatchMachines { machines { id } }';
const MODELS = 'query BatchModels { predictionModels { ready } }';
const DEEP = 'query BatchDeep { bookings(first: 1) { edges { node { location { id } } } } }';
const QUOTE = 'mutation BatchQuote($input: CreateQuoteInput!) { createQuote(input: $input) { id } }';
const CHANGES = 'subscription BatchChanges { fleetSummaryChanged { cursor } }';
const DEFERRED = 'query BatchDeferred { fleetSummary { total ... @defer { available } } }';

/** A quote of a machine no other quote of this suite holds (a quote reserves its machines). */
let quoted = 0;
const quoteInput = () => ({ machineIds: [`EQ-${String(++quoted).padStart(3, '0')}`], locationId: 'LOC-001', startTime: hoursFromNow(40), durationHours: 4 });

interface Entry {
  data?: Record<string, any> | null;
  errors?: { message: string; extensions?: { code?: string } }[];
}

describe('HTTP batching (keys file, TRUSTED_DOCUMENTS=safelist, GRAPHQL_MAX_BATCH=6)', () => {
  let server: TestServer;
  const audits: AuditEntry[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'batching-'));

  beforeAll(async () => {
    const partnerScopes = ['fleet:read', 'rental:read', 'rental:book'];
    const registered = [FLEET, MACHINES, MODELS, DEEP, QUOTE, CHANGES, DEFERRED];
    const credentials = safelistEnv(
      dir,
      Array.from({ length: PARTNERS }, (_, i) => ({ key: partner(i), principal: `batch-partner-${i}`, tenant: 'batchers', scopes: partnerScopes })),
      [{ client: 'batch-app', principals: ['batchers/*'], documents: Object.fromEntries(registered.map((text, i) => [`batch-doc-${i}`, text])) }],
    );
    server = await startTestServer({
      env: {
        ...credentials,
        API_KEYS: OPERATOR,
        GRAPHQL_MAX_DEPTH: '4',
        GRAPHQL_MAX_BATCH: '6',
        RATE_LIMIT_BURST: '4',
        RATE_LIMIT_PER_S: '1',
      },
      audit: (entry) => audits.push(entry),
    });
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  async function batch(key: string, body: unknown): Promise<{ status: number; headers: Headers; body: any }> {
    const res = await fetch(`${server.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json, application/json;q=0.9', 'x-api-key': key },
      body: JSON.stringify(body),
    });
    return { status: res.status, headers: res.headers, body: await res.json() };
  }

  const quotes = async () => audits.filter((a) => a.operation === 'createQuote').length;

  it("Apollo Client's BatchHttpLink: three operations in one POST, each answered in its place", async () => {
    const posts: unknown[] = [];
    const client = new ApolloClient({
      link: ApolloLink.from([
        new BatchHttpLink({
          uri: `${server.url}/graphql`,
          // Apollo Client adds __typename to what it sends: text no client registered, so an operator's key.
          headers: { 'x-api-key': OPERATOR },
          batchMax: 10,
          batchInterval: 20,
          fetch: (input, init) => {
            posts.push(JSON.parse(init?.body as string));
            return fetch(input, init);
          },
        }),
      ]),
      cache: new InMemoryCache(),
    });
    const [fleet, machines, quote] = await Promise.all([
      client.query({ query: parseQuery(FLEET), fetchPolicy: 'network-only' }),
      client.query({ query: parseQuery(MACHINES), fetchPolicy: 'network-only' }),
      client.mutate({ mutation: parseQuery(QUOTE), variables: { input: quoteInput() } }),
    ]);
    expect(posts).toHaveLength(1);
    expect(Array.isArray(posts[0]) && (posts[0] as unknown[]).length).toBe(3);
    expect((fleet.data as { fleetSummary: { total: number } }).fleetSummary.total).toBeGreaterThan(0);
    expect((machines.data as { machines: { id: string }[] }).machines.length).toBeGreaterThan(0);
    expect((quote.data as { createQuote: { id: string } }).createQuote.id).toMatch(/\S/);
    expect(audits.some((a) => a.operation === 'createQuote' && a.outcome === 'ok')).toBe(true);
  });

  it("one entry's refusal is that entry's error: out of scope, over a limit, free text; the others run; 200 and in order", async () => {
    // Four entries: the bucket's four tokens pay each its door.
    const answer = await batch(partner(2), [{ query: MODELS }, { query: DEEP }, { query: '{ fleetSummary { total } }' }, { query: MACHINES }]);
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toMatch(/^application\/graphql-response\+json/);
    const entries = answer.body as Entry[];
    expect(entries).toHaveLength(4);
    expect(entries[0]!.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    expect(entries[1]!.errors?.[0]?.extensions?.code).toBe('DEPTH_LIMIT_EXCEEDED');
    expect(entries[1]!.data).toBeUndefined();
    expect(entries[2]!.errors?.[0]?.extensions?.code).toBe('PERSISTED_QUERY_NOT_IN_LIST');
    expect(entries[3]!.data?.['machines'].length).toBeGreaterThan(0);
  });

  it('each entry pays its own rate charge: a batch larger than the bucket has its last entries refused', async () => {
    const answer = await batch(
      partner(3),
      Array.from({ length: 6 }, () => ({ query: FLEET })),
    );
    expect(answer.status).toBe(200);
    const codes = (answer.body as Entry[]).map((e) => e.errors?.[0]?.extensions?.code ?? 'ok');
    // Four tokens (one a second back): each entry pays one at the door (the edge's token is the first's), so
    // the first four run and the last two are refused there, unless a token came back meanwhile.
    expect(codes.slice(0, 4)).toEqual(['ok', 'ok', 'ok', 'ok']);
    expect(codes.slice(4).filter((c) => c === 'RATE_LIMITED').length).toBeGreaterThanOrEqual(1);
    expect(codes.every((c) => c === 'ok' || c === 'RATE_LIMITED')).toBe(true);
  });

  it('a mutation in a batch answers the log position of its write, in the header as alone', async () => {
    const answer = await batch(partner(4), [{ query: FLEET }, { query: QUOTE, variables: { input: quoteInput() } }]);
    expect(answer.status).toBe(200);
    const entries = answer.body as Entry[];
    expect(entries[1]!.data?.['createQuote'].id).toMatch(/\S/);
    const position = answer.headers.get('state-position');
    expect(position).toMatch(/^\d+$/);
    expect((entries[1] as { extensions?: { statePosition?: string } }).extensions?.statePosition).toBe(position);
  });

  it('over GRAPHQL_MAX_BATCH: 422 BATCH_LIMIT_EXCEEDED, and nothing runs', async () => {
    const before = await quotes();
    const answer = await batch(partner(5), [...Array.from({ length: 6 }, () => ({ query: FLEET })), { query: QUOTE, variables: { input: quoteInput() } }]);
    expect(answer.status).toBe(422);
    expect(answer.body.errors[0].extensions.code).toBe('BATCH_LIMIT_EXCEEDED');
    expect(answer.body.errors[0].message).toMatch(/7 operations.*at most 6/);
    expect(await quotes()).toBe(before);
  });

  it('a batch holding a subscription or @defer is refused whole, naming the entry, and nothing runs', async () => {
    const before = await quotes();
    const subscription = await batch(partner(6), [{ query: QUOTE, variables: { input: quoteInput() } }, { query: CHANGES }]);
    expect(subscription.status).toBe(400);
    expect(subscription.body.errors[0].message).toMatch(/entry 1 holds a subscription/);
    const deferred = await batch(partner(6), [{ query: QUOTE, variables: { input: quoteInput() } }, { query: DEFERRED }]);
    expect(deferred.status).toBe(400);
    expect(deferred.body.errors[0].message).toMatch(/entry 1 holds a deferred fragment/);
    expect(await quotes()).toBe(before);
  });

  it('bad input: an empty batch, an entry that is not an operation; each a clear 400, nothing run', async () => {
    const before = await quotes();
    const empty = await batch(partner(7), []);
    expect(empty.status).toBe(400);
    expect(empty.body.errors[0].message).toMatch(/at least one operation/);
    const mixed = await batch(partner(7), [{ query: QUOTE, variables: { input: quoteInput() } }, 42]);
    expect(mixed.status).toBe(400);
    expect(mixed.body.errors[0].message).toMatch(/entry 1 is not an operation/);
    const nested = await batch(partner(7), [[{ query: FLEET }]]);
    expect(nested.status).toBe(400);
    expect(await quotes()).toBe(before);
  });

  it("an entry whose variables are not an object is that entry's error", async () => {
    const before = await quotes();
    const badVariables = await batch(partner(9), [{ query: FLEET }, { query: QUOTE, variables: [1] }]);
    expect(badVariables.status).toBe(200);
    expect((badVariables.body as Entry[])[0]!.data?.['fleetSummary'].total).toBeGreaterThan(0);
    expect((badVariables.body as Entry[])[1]!.errors?.[0]?.extensions?.code).toBe('BAD_REQUEST');
    expect(await quotes()).toBe(before);
  });

  it('an Idempotency-Key names one operation: a batch of several carrying one is refused whole, nothing run', async () => {
    const before = await quotes();
    const res = await fetch(`${server.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': partner(8), 'idempotency-key': 'batch-key-1' },
      body: JSON.stringify([
        { query: QUOTE, variables: { input: quoteInput() } },
        { query: QUOTE, variables: { input: quoteInput() } },
      ]),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { errors: { message: string }[] }).errors[0]!.message).toMatch(/Idempotency-Key names one operation/);
    expect(await quotes()).toBe(before);
  });

  it('without a credential the batch is refused whole (401), as any request', async () => {
    const res = await fetch(`${server.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify([{ query: FLEET }]),
    });
    expect(res.status).toBe(401);
  });
});

describe('HTTP batching off (GRAPHQL_MAX_BATCH=0)', () => {
  it('an array is a clear 400 that says how batching is turned on', async () => {
    const server = await startTestServer({ env: { GRAPHQL_MAX_BATCH: '0' } });
    const res = await fetch(`${server.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify([{ query: '{ fleetSummary { total } }' }]),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { errors: { message: string }[] }).errors[0]!.message).toMatch(/GRAPHQL_MAX_BATCH/);
    await server.close();
  });
});
