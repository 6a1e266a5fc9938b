import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApolloClient, gql as parseQuery, HttpLink, InMemoryCache } from '@apollo/client';
import { Defer20220824Handler } from '@apollo/client/incremental';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gql, hoursFromNow } from '../../support/http.js';
import { withPredictionUnreachable } from '../../support/prediction.js';
import { startTestServer } from '../../support/server.js';
import { Collector, wsClient } from '../../support/ws.js';

/*
 * `@defer` through the gateway: over HTTP as multipart/mixed (deferSpec=20220824) for a client that takes
 * it, one whole answer for one that does not; over graphql-ws as several `next` messages, then `complete`.
 * Deferred fragments are planned as fetches of their own and sent as their fetches return; a deferred
 * fragment whose subgraph fails carries its error in its own payload; limits judge the whole operation,
 * and a principal's denied fields are answered as everywhere (then in one answer).
 */

const OPERATOR = 'defer-operator-key-000001';
const PARTNER = 'defer-partner-key-0000001';
const MULTIPART = 'multipart/mixed;deferSpec=20220824, application/json';

type Json = Record<string, any>;

/** The payloads of a multipart/mixed answer, in order (boundary "-", as Apollo Server writes them). */
function partsOf(body: string): Json[] {
  expect(body.startsWith('\r\n---\r\n')).toBe(true);
  expect(body.endsWith('\r\n-----\r\n')).toBe(true);
  return body
    .slice('\r\n---\r\n'.length, -'\r\n-----\r\n'.length)
    .split('\r\n---\r\n')
    .map((part) => {
      const [head, json] = part.split('\r\n\r\n');
      expect(head).toBe('content-type: application/json; charset=utf-8');
      return JSON.parse(json!) as Json;
    });
}

/** The initial payload's data with every incremental item's data merged in at its path. */
function merged(payloads: Json[]): Json {
  const data = structuredClone(payloads[0]!['data']) as Json;
  for (const payload of payloads.slice(1)) {
    for (const item of payload['incremental'] ?? []) {
      let target: any = data;
      for (const key of item.path) target = target[key];
      Object.assign(target, item.data);
    }
  }
  return data;
}

async function post(url: string, query: string, variables: Json, headers: Record<string, string>) {
  const res = await fetch(`${url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ query, variables }),
  });
  return { status: res.status, type: res.headers.get('content-type') ?? '', body: await res.text() };
}

const LEDGER = `query Ledger($n: Int!) { bookings(first: $n) { edges { node { id status customerName
  ... @defer(label: "forecast") { deliveryForecast { q50Minutes modelVersion } }
  ...Parts @defer } } } }
  fragment Parts on Booking { bill { currency quotedAmount } machines { id name } }`;
const LEDGER_PLAIN = `query Ledger($n: Int!) { bookings(first: $n) { edges { node { id status customerName
  deliveryForecast { q50Minutes modelVersion } bill { currency quotedAmount } machines { id name } } } } }`;

describe('@defer', () => {
  const dir = mkdtempSync(join(tmpdir(), 'defer-'));
  const keys = join(dir, 'keys.json');
  writeFileSync(keys, JSON.stringify([{ key: PARTNER, principal: 'defer-partner', tenant: 'partner', scopes: ['rental:read', 'rental:book'] }]));
  const env = { API_KEYS_FILE: keys, API_KEYS: OPERATOR, PRINCIPAL_SECRET: 'defer-principal-secret-0123456789abcdef' };
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const as = (key: string, more: Record<string, string> = {}) => ({ 'x-api-key': key, ...more });

  async function book(url: string, machine: string, key = OPERATOR): Promise<string> {
    const q = await gql(
      url,
      `mutation($input: CreateQuoteInput!) { createQuote(input: $input) { id } }`,
      {
        input: { machineIds: [machine], locationId: 'LOC-002', startTime: hoursFromNow(30), durationHours: 8 },
      },
      as(key),
    );
    expect(q.errors).toBeUndefined();
    const b = await gql(
      url,
      `mutation($q: ID!) { confirmBooking(input: { quoteId: $q, customerName: "Defer BV" }) { id } }`,
      { q: q.data!['createQuote'].id },
      as(key),
    );
    expect(b.errors).toBeUndefined();
    return b.data!['confirmBooking'].id;
  }

  for (const mode of ['one-process', 'distributed'] as const)
    describe(`with every subgraph up (${mode})`, () => {
      let url: string;
      beforeAll(async () => {
        ({ url } = await startTestServer({ env, mode }));
        await book(url, 'EQ-004');
        await book(url, 'EQ-006');
      });

      it('over HTTP: the initial payload without the deferred fragments, then each as its own payload, at its path with its label', async () => {
        const whole = await gql(url, LEDGER_PLAIN, { n: 2 }, as(OPERATOR));
        expect(whole.errors).toBeUndefined();
        const res = await post(url, LEDGER, { n: 2 }, as(OPERATOR, { accept: MULTIPART }));
        expect(res.status).toBe(200);
        expect(res.type).toBe('multipart/mixed; boundary="-"; deferSpec=20220824');
        const payloads = partsOf(res.body);
        const [initial, ...rest] = payloads;
        expect(initial!['hasNext']).toBe(true);
        expect(initial!['errors']).toBeUndefined();
        for (const edge of initial!['data'].bookings.edges) expect(Object.keys(edge.node)).toEqual(['id', 'status', 'customerName']);
        expect(rest.length).toBeGreaterThanOrEqual(2);
        expect(rest.at(-1)!['hasNext']).toBe(false);
        for (const p of rest.slice(0, -1)) expect(p['hasNext']).toBe(true);
        const items = rest.flatMap((p) => p['incremental'] as Json[]);
        // One item per booking and fragment: the labelled one with its label, the other without.
        expect(items.filter((i) => i['label'] === 'forecast').map((i) => i['path'])).toEqual([
          ['bookings', 'edges', 0, 'node'],
          ['bookings', 'edges', 1, 'node'],
        ]);
        expect(items.filter((i) => !('label' in i))).toHaveLength(2);
        for (const item of items) expect(item['errors']).toBeUndefined();
        // Put together, the answer is the one the same query without @defer gets.
        const data = merged(payloads);
        const key = (d: Json) => JSON.stringify(d['bookings'].edges.map((e: Json) => Object.fromEntries(Object.entries(e['node']).sort())));
        expect(key(data)).toBe(key(whole.data!));
      });

      it('Apollo Client (its @defer support, over HTTP) shows the fast part first, then the whole answer', async () => {
        const client = new ApolloClient({
          link: new HttpLink({ uri: `${url}/graphql`, headers: { 'x-api-key': OPERATOR } }),
          cache: new InMemoryCache(),
          incrementalHandler: new Defer20220824Handler(),
        });
        const seen: { dataState: string; data: Json | undefined }[] = [];
        await new Promise<void>((resolve, reject) => {
          const subscription = client.watchQuery({ query: parseQuery(LEDGER), variables: { n: 2 }, fetchPolicy: 'network-only' }).subscribe({
            next: (result) => {
              seen.push({ dataState: result.dataState, data: result.data as Json | undefined });
              if (result.dataState === 'complete') {
                subscription.unsubscribe();
                resolve();
              }
            },
            error: reject,
          });
        });
        const streaming = seen.filter((r) => r.dataState === 'streaming');
        expect(streaming.length).toBeGreaterThanOrEqual(1);
        const first = streaming[0]!.data!['bookings'].edges as Json[];
        expect(first).toHaveLength(2);
        for (const edge of first) {
          expect(edge['node'].status).toBe('CONFIRMED');
          expect(edge['node'].deliveryForecast).toBeUndefined();
        }
        const complete = seen.at(-1)!.data!['bookings'].edges as Json[];
        const whole = await gql(url, LEDGER_PLAIN, { n: 2 }, as(OPERATOR));
        expect(complete.map((e) => e['node'].deliveryForecast.q50Minutes)).toEqual(
          whole.data!['bookings'].edges.map((e: Json) => e['node'].deliveryForecast.q50Minutes),
        );
        expect(complete.map((e) => e['node'].machines.map((m: Json) => m['id']))).toEqual(
          whole.data!['bookings'].edges.map((e: Json) => e['node'].machines.map((m: Json) => m['id'])),
        );
        client.stop();
      });

      it('nested deferred fragments come after the payload that holds them; a fragment deferred at the root leaves an empty first payload', async () => {
        const nested = `{ bookings(first: 2) { edges { node { id ... @defer(label: "outer") { status machines { id ... @defer(label: "inner") { name category } } } } } } }`;
        const plain = `{ bookings(first: 2) { edges { node { id status machines { id name category } } } } }`;
        const payloads = partsOf((await post(url, nested, {}, as(OPERATOR, { accept: MULTIPART }))).body);
        const items: Json[] = payloads.slice(1).flatMap((p) => (p['incremental'] as Json[]).map((item): Json => ({ ...item, at: payloads.indexOf(p) })));
        const outer = items.filter((i) => i['label'] === 'outer');
        const inner = items.filter((i) => i['label'] === 'inner');
        expect(outer).toHaveLength(2);
        for (const o of outer) expect(Object.keys(o['data'])).toEqual(['status', 'machines']);
        expect(inner.map((i) => i['path'])).toEqual([
          ['bookings', 'edges', 0, 'node', 'machines', 0],
          ['bookings', 'edges', 1, 'node', 'machines', 0],
        ]);
        // Each inner item comes no earlier than the outer one at its booking.
        for (const i of inner) expect(i['at']).toBeGreaterThanOrEqual(outer.find((o) => o['path'][2] === i['path'][2])!['at']);
        const whole = await gql(url, plain, {}, as(OPERATOR));
        expect(merged(payloads)).toEqual(whole.data);

        const rootOnly = partsOf((await post(url, `{ ... @defer(label: "all") { fleetSummary { total } } }`, {}, as(OPERATOR, { accept: MULTIPART }))).body);
        expect(rootOnly[0]).toEqual({ data: {}, hasNext: true });
        expect(rootOnly[1]).toEqual({ incremental: [{ data: { fleetSummary: { total: expect.any(Number) } }, path: [], label: 'all' }], hasNext: false });
      });

      it('without multipart/mixed in Accept, or with @defer(if: false), one whole answer', async () => {
        const whole = await gql(url, LEDGER_PLAIN, { n: 2 }, as(OPERATOR));
        const json = await post(url, LEDGER, { n: 2 }, as(OPERATOR, { accept: 'application/json' }));
        expect(json.type).toMatch(/^application\/json/);
        const body = JSON.parse(json.body) as Json;
        expect(body['errors']).toBeUndefined();
        expect(body['hasNext']).toBeUndefined();
        const key = (d: Json) => JSON.stringify(d['bookings'].edges.map((e: Json) => Object.fromEntries(Object.entries(e['node']).sort())));
        expect(key(body['data'])).toBe(key(whole.data!));

        const off = await post(
          url,
          `query($d: Boolean!) { fleetSummary { total ... @defer(if: $d) { available } } }`,
          { d: false },
          as(OPERATOR, { accept: MULTIPART }),
        );
        expect(off.type).toMatch(/^application\/json/);
        expect(Object.keys((JSON.parse(off.body) as Json)['data'].fleetSummary)).toEqual(['total', 'available']);
      });

      it('over graphql-ws: the initial payload and each deferred fragment as `next` messages, then complete', async () => {
        const client = wsClient(url, { 'x-api-key': OPERATOR });
        const c = new Collector(client.client, LEDGER, { n: 2 });
        await c.until((x) => x.completed);
        const results = c.results as unknown as Json[];
        expect(results[0]!['hasNext']).toBe(true);
        expect(results.at(-1)!['hasNext']).toBe(false);
        expect(results.length).toBeGreaterThanOrEqual(3);
        const http = partsOf((await post(url, LEDGER, { n: 2 }, as(OPERATOR, { accept: MULTIPART }))).body);
        expect(merged(results)).toEqual(merged(http));
        await client.dispose();
      });

      it('a denied field inside a deferred fragment is answered as everywhere: null with FORBIDDEN, in one answer', async () => {
        await book(url, 'EQ-005', PARTNER);
        const res = await post(url, LEDGER, { n: 1 }, as(PARTNER, { accept: MULTIPART }));
        expect(res.type).toMatch(/^application\/json/);
        const body = JSON.parse(res.body) as Json;
        expect(body['data'].bookings.edges[0].node.deliveryForecast).toBeNull();
        expect(body['errors'].map((e: Json) => [e.path, e.extensions.code])).toEqual([[['bookings', 'edges', 0, 'node', 'deliveryForecast'], 'FORBIDDEN']]);
      });

      it('limits judge the whole operation, deferred fragments included, before anything runs', async () => {
        const aliases = Array.from({ length: 16 }, (_, i) => `a${i}: total`).join(' ');
        const res = await post(url, `{ fleetSummary { total ... @defer { ${aliases} } } }`, {}, as(OPERATOR, { accept: MULTIPART }));
        expect(res.status).toBe(400);
        expect(res.body).toContain('ALIAS');
      });

      it('is refused where the specification does not allow it, with its own validation error', async () => {
        const res = await gql(url, `{ fleetSummary @defer { total } }`, {}, as(OPERATOR));
        expect(res.status).toBe(400);
        expect(res.errors?.[0]?.message).toMatch(/Directive "@defer" may not be used on FIELD/);
        expect(res.errors?.[0]?.extensions?.['code']).toBe('GRAPHQL_VALIDATION_FAILED');
      });
    });

  describe("when the deferred fragment's subgraph cannot answer", () => {
    it('its error comes in its own payload, at its path; the initial payload is whole', async () => {
      const { url } = await startTestServer({ env, subgraphs: withPredictionUnreachable() });
      await book(url, 'EQ-004');
      const res = await post(url, LEDGER, { n: 1 }, as(OPERATOR, { accept: MULTIPART }));
      const payloads = partsOf(res.body);
      expect(payloads[0]!['errors']).toBeUndefined();
      expect(payloads[0]!['data'].bookings.edges[0].node.status).toBe('CONFIRMED');
      const items = payloads.slice(1).flatMap((p) => p['incremental'] as Json[]);
      const forecast = items.find((i) => i['label'] === 'forecast')!;
      expect(forecast['data']).toEqual({ deliveryForecast: null });
      expect(forecast['errors'].map((e: Json) => [e.path, e.extensions.code])).toEqual([
        [['bookings', 'edges', 0, 'node', 'deliveryForecast'], 'UPSTREAM_UNAVAILABLE'],
      ]);
      const other = items.find((i) => !('label' in i))!;
      expect(other['errors']).toBeUndefined();
      expect(other['data'].machines).toEqual([{ id: 'EQ-004', name: expect.any(String) }]);
    });
  });
});
