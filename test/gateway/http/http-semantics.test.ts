import { createRemoteJWKSet, jwtVerify } from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import { travelFeatures, travelInput } from '../../support/prediction.js';
import { gql, hoursFromNow, rest } from '../../support/http.js';
import { startTestServer, TEST_DATABASE_URL } from '../../support/server.js';

/** zod's own wording, which must never reach a caller. */
const ZOD_WORDING = /Invalid input: expected|Too (big|small)|received (string|number|undefined|object)|expected (string|number|array)|Invalid (string|option)/;

const QUOTE = 'mutation($input: CreateQuoteInput!) { createQuote(input: $input) { id } }';
const CONFIRM = 'mutation($input: ConfirmBookingInput!) { confirmBooking(input: $input) { id customerName } }';

describe('HTTP semantics', () => {
  let url: string;
  let machine = 0;
  /** A fresh quote on the next free machine (each test takes its own). */
  const quote = async () => {
    machine += 1;
    const id = `EQ-${String(machine).padStart(3, '0')}`;
    const q = await rest(url, 'POST', '/rental/pricing/quote', { machine_ids: [id], location_id: 'LOC-001', start_time: hoursFromNow(48), duration_hours: 4 });
    expect(q.status).toBe(200);
    return q.body['quote_id'] as string;
  };
  beforeAll(async () => {
    // The explorer off: a browser at /graphql gets 406, as any Accept without a GraphQL type does
    // (test/gateway/dashboard/explorer.test.ts holds it on).
    ({ url } = await startTestServer({ env: { GRAPHQL_EXPLORER: 'off' } }));
  });

  it('a wrong method on a known path is 405 with Allow, on REST, /graphql and /health alike; an unknown path stays 404', async () => {
    const cases: [method: string, path: string, allow: string][] = [
      ['PUT', '/graphql', 'GET, POST, OPTIONS'],
      ['HEAD', '/graphql', 'GET, POST, OPTIONS'],
      ['DELETE', '/rental/pricing/quote', 'POST, OPTIONS'],
      ['GET', '/rental/booking/confirm', 'POST, OPTIONS'],
      ['POST', '/rental/booking/BK-000000000000/track', 'GET, HEAD, OPTIONS'],
      ['POST', '/health', 'GET, HEAD, OPTIONS'],
      ['POST', '/health?probe=1', 'GET, HEAD, OPTIONS'],
      ['PATCH', '/prediction/predict/travel_time', 'POST, OPTIONS'],
      ['DELETE', '/rental/pricing/keys', 'GET, HEAD, OPTIONS'],
    ];
    for (const [method, path, allow] of cases) {
      const res = await fetch(`${url}${path}`, { method });
      expect(res.status, `${method} ${path}`).toBe(405);
      expect(res.headers.get('allow'), `${method} ${path}`).toBe(allow);
      expect(res.headers.get('content-type')).toContain('application/problem+json');
      if (method === 'HEAD') continue;
      const body = (await res.json()) as Record<string, unknown>;
      expect(body).toMatchObject({ status: 405, code: 'METHOD_NOT_ALLOWED' });
      expect(body['detail']).toContain(allow);
      if (path === '/graphql') expect(body['errors']).toEqual([{ message: body['detail'], extensions: { code: 'METHOD_NOT_ALLOWED' } }]);
    }
    const unknown = await fetch(`${url}/rental/no-such-path`, { method: 'DELETE' });
    expect(unknown.status).toBe(404);
    expect(unknown.headers.get('allow')).toBeNull();
    // Nothing was reserved by any of it.
    expect((await rest(url, 'GET', '/rental/fleet/summary')).body).toMatchObject({ reserved: 0, in_use: 0 });
  });

  it('OPTIONS on a known path is 204 with Allow; HEAD on a GET path is its headers without a body', async () => {
    for (const [path, allow] of [
      ['/graphql', 'GET, POST, OPTIONS'],
      ['/rental/booking/confirm', 'POST, OPTIONS'],
      ['/health', 'GET, HEAD, OPTIONS'],
    ] as const) {
      const res = await fetch(`${url}${path}`, { method: 'OPTIONS' });
      expect(res.status, path).toBe(204);
      expect(res.headers.get('allow'), path).toBe(allow);
      expect(await res.text()).toBe('');
    }
    expect((await fetch(`${url}/rental/no-such-path`, { method: 'OPTIONS' })).status).toBe(404);
    const head = await fetch(`${url}/rental/fleet/summary`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-type')).toContain('application/json');
    expect(await head.text()).toBe('');
  });

  it('with the explorer off, a browser asking /graphql for a page gets 406 and nothing that loads from another host', async () => {
    const browser = 'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8';
    for (const accept of ['text/html', 'text/html,application/xhtml+xml,application/xml;q=0.9', 'application/json;q=0']) {
      const res = await fetch(`${url}/graphql`, { headers: { accept } });
      const text = await res.text();
      expect(res.status, accept).toBe(406);
      expect(res.headers.get('content-type')).toContain('application/problem+json');
      expect(JSON.parse(text)).toMatchObject({ code: 'NOT_ACCEPTABLE', errors: [{ extensions: { code: 'NOT_ACCEPTABLE' } }] });
      expect(text).not.toMatch(/https?:\/\//);
    }
    // A browser's full Accept header (with */*) asks for anything: no page is served, a GraphQL answer is.
    const plain = await fetch(`${url}/graphql`, { headers: { accept: browser } });
    expect(plain.headers.get('content-type')).not.toContain('text/html');
    expect(await plain.text()).not.toMatch(/<html|<script|https?:\/\//i);
    const query = await fetch(`${url}/graphql?query=${encodeURIComponent('{ fleetSummary { total } }')}`, {
      headers: { accept: 'application/graphql-response+json', 'apollo-require-preflight': '1' },
    });
    expect(await query.json()).toEqual({ data: { fleetSummary: { total: 15 } } });
  });

  it('a malformed id is 400 BAD_USER_INPUT naming it, on REST and GraphQL; a well-formed unknown id is 404 or null', async () => {
    const restCases: [method: string, path: string, body: unknown, field: string][] = [
      ['GET', '/rental/booking/nope/track', undefined, 'booking_id'],
      ['GET', '/rental/booking/00000000-0000-4000-8000-000000000000/track', undefined, 'booking_id'],
      ['POST', '/rental/booking/BK-XYZ/complete', undefined, 'booking_id'],
      ['POST', '/rental/booking/confirm', { quote_id: 'Q-1', customer_name: 'Acme' }, 'quote_id'],
      [
        'POST',
        '/rental/pricing/quote',
        { machine_ids: ['excavator'], location_id: 'LOC-001', start_time: hoursFromNow(5), duration_hours: 2 },
        'machine_ids[0]',
      ],
      ['POST', '/rental/pricing/quote', { machine_ids: ['EQ-001'], location_id: 'Rotterdam', start_time: hoursFromNow(5), duration_hours: 2 }, 'location_id'],
    ];
    for (const [method, path, body, field] of restCases) {
      const res = await rest(url, method, path, body);
      expect(res.status, path).toBe(400);
      expect(res.body, path).toMatchObject({ code: 'BAD_USER_INPUT', errors: [{ field }] });
    }
    const gqlCases: [query: string, field: string][] = [
      ['{ booking(id: "nope") { id } }', 'id'],
      ['{ quote(id: "not-a-uuid") { id } }', 'id'],
      ['{ machine(id: "excavator") { id } }', 'id'],
      ['{ tracking(bookingId: "BK-1") { status } }', 'bookingId'],
      ['mutation { completeBooking(bookingId: "x") { id } }', 'bookingId'],
    ];
    for (const [query, field] of gqlCases) {
      const res = await gql(url, query);
      expect(res.errors?.[0]?.extensions, query).toMatchObject({ code: 'BAD_USER_INPUT', fields: [{ field }] });
    }
    expect((await rest(url, 'GET', '/rental/booking/BK-0000000000AB/track')).status).toBe(404);
    expect((await rest(url, 'POST', '/rental/booking/confirm', { quote_id: '00000000-0000-4000-8000-000000000000', customer_name: 'Acme' })).status).toBe(404);
    const known = await gql(
      url,
      '{ machine(id: "EQ-999") { id } quote(id: "00000000-0000-4000-8000-000000000000") { id } booking(id: "BK-0000000000AB") { id } }',
    );
    expect(known).toMatchObject({ status: 200, data: { machine: null, quote: null, booking: null } });
    expect(known.errors).toBeUndefined();
  });

  it("the same mistake reads the same on every path, in our words, never zod's", async () => {
    const q = await quote();
    const long = 'x'.repeat(201);
    const key = 'k'.repeat(201);
    type Seen = { field: string; message: string };
    const restField = async (path: string, body: unknown, headers: Record<string, string> = {}): Promise<Seen[]> => {
      const res = await rest(url, 'POST', path, body, headers);
      expect(res.status, path).toBe(400);
      return res.body['errors'];
    };
    const gqlField = async (query: string, variables: Record<string, unknown>, headers: Record<string, string> = {}): Promise<Seen[]> => {
      const res = await gql(url, query, variables, headers);
      expect(res.errors?.[0]?.extensions?.['code'], query).toBe('BAD_USER_INPUT');
      return res.errors![0]!.extensions!['fields'];
    };
    const table: [mistake: string, restSeen: Seen[], gqlSeen: Seen[], message: string][] = [
      [
        'customer name too long',
        await restField('/rental/booking/confirm', { quote_id: q, customer_name: long }),
        await gqlField(CONFIRM, { input: { quoteId: q, customerName: long } }),
        'must be at most 200 characters',
      ],
      [
        'empty machine list',
        await restField('/rental/pricing/quote', { machine_ids: [], location_id: 'LOC-001', start_time: hoursFromNow(5), duration_hours: 2 }),
        await gqlField(QUOTE, { input: { machineIds: [], locationId: 'LOC-001', startTime: hoursFromNow(5), durationHours: 2 } }),
        'must not be empty',
      ],
      [
        'Idempotency-Key too long',
        await restField('/rental/booking/confirm', { quote_id: q, customer_name: 'Acme' }, { 'idempotency-key': key }),
        await gqlField(CONFIRM, { input: { quoteId: q, customerName: 'Acme' } }, { 'idempotency-key': key }),
        'must be at most 200 characters',
      ],
      [
        'Idempotency-Key blank',
        await restField('/rental/booking/confirm', { quote_id: q, customer_name: 'Acme' }, { 'idempotency-key': ' ' }),
        await gqlField(CONFIRM, { input: { quoteId: q, customerName: 'Acme' } }, { 'idempotency-key': ' ' }),
        'must not be empty',
      ],
      [
        'feature out of range',
        await restField('/prediction/predict/travel_time', { ...travelFeatures, distance_km: 5000 }),
        await gqlField('query($i: TravelInput!) { predictTravelTime(input: $i) { q50Minutes } }', { i: { ...travelInput, distanceKm: 5000 } }),
        'must be at most 1500',
      ],
      [
        'batch item out of range',
        await restField('/prediction/predict/travel_time/batch', { instances: [travelFeatures, { ...travelFeatures, distance_km: 5000 }] }),
        await gqlField('query($i: [TravelInput!]!) { predictTravelTimeBatch(inputs: $i) { q50Minutes } }', {
          i: [travelInput, { ...travelInput, distanceKm: 5000 }],
        }),
        'must be at most 1500',
      ],
    ];
    for (const [mistake, restSeen, gqlSeen, message] of table) {
      expect(
        restSeen.map((f) => f.message),
        mistake,
      ).toEqual([message]);
      expect(
        gqlSeen.map((f) => f.message),
        mistake,
      ).toEqual([message]);
      expect(JSON.stringify([restSeen, gqlSeen]), mistake).not.toMatch(ZOD_WORDING);
    }
    // Nothing was confirmed by any of it.
    expect((await rest(url, 'GET', '/rental/bookings')).body['total']).toBe(0);
  });

  it('an error answer stays proportional: 25 field problems and a count, a one-sentence detail', async () => {
    const bad = { ...travelFeatures, distance_km: -1, weather: 9 };
    const thousand = await rest(url, 'POST', '/prediction/predict/travel_time/batch', { instances: Array.from({ length: 1000 }, () => bad) });
    expect(thousand.status).toBe(400);
    expect(thousand.body['errors']).toHaveLength(25);
    expect(thousand.body['errors_truncated']).toBe(1975);
    expect(thousand.body['detail']).toBe('2,000 fields are invalid; the first 25 are listed in errors');
    expect(thousand.body['errors'][0]).toEqual({ field: 'instances[0].distance_km', message: 'must be at least 0.1' });

    // 50,000 invalid items: refused on the count alone, in a small answer.
    const many = JSON.stringify({ instances: Array.from({ length: 50_000 }, () => ({ x: 1 })) });
    const big = await rest(url, 'POST', '/prediction/predict/travel_time/batch', many);
    expect(big.status).toBe(400);
    expect(JSON.stringify(big.body).length).toBeLessThan(1000);
    expect(big.body['errors']).toEqual([{ field: 'instances', message: 'at most 1000 inputs per call' }]);

    // The same through GraphQL: 50,000 items are refused on the count (LIST_LIMIT_EXCEEDED, before any is
    // coerced); a full batch of 1,000 bad items stops after 25 errors...
    const over = await gql(url, 'query($i: [TravelInput!]!) { predictTravelTimeBatch(inputs: $i) { q50Minutes } }', {
      i: Array.from({ length: 50_000 }, () => ({ x: 1 })),
    });
    expect(over.status).toBe(400);
    expect(over.errors).toHaveLength(1);
    expect(over.errors?.[0]?.extensions?.['code']).toBe('LIST_LIMIT_EXCEEDED');
    const started = Date.now();
    const variables = await fetch(`${url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        query: 'query($i: [TravelInput!]!) { predictTravelTimeBatch(inputs: $i) { q50Minutes } }',
        variables: { i: Array.from({ length: 1000 }, () => ({ x: 1 })) },
      }),
    });
    const varText = await variables.text();
    expect(variables.status).toBe(400);
    expect(Date.now() - started).toBeLessThan(15_000);
    const varErrors = (JSON.parse(varText) as { errors: { message: string; extensions: { code: string } }[] }).errors;
    expect(varErrors).toHaveLength(26);
    expect(varErrors.every((e) => e.extensions.code === 'BAD_USER_INPUT')).toBe(true);
    expect(varErrors[25]!.message).toBe('More variable values are invalid; the first 25 are listed');
    expect(varText.length).toBeLessThan(10_000);
    // ... and the resolvers' own checks list 25 fields and count the rest.
    const gqlBad = { ...travelInput, distanceKm: -1, hourSin: 3 };
    const checked = await gql(url, 'query($i: [TravelInput!]!) { predictTravelTimeBatch(inputs: $i) { q50Minutes } }', {
      i: Array.from({ length: 1000 }, () => gqlBad),
    });
    expect(checked.errors?.[0]?.message).toBe('Invalid input: 2,000 fields are invalid; the first 25 are listed in errors');
    expect(checked.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', fieldsTruncated: 1975 });
    expect(checked.errors?.[0]?.extensions?.['fields']).toHaveLength(25);

    // A long value is not echoed back whole.
    const startTime = 'x'.repeat(200_000);
    const echo = await fetch(`${url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: QUOTE, variables: { input: { machineIds: ['EQ-001'], locationId: 'LOC-001', startTime, durationHours: 2 } } }),
    });
    expect(echo.status).toBe(400);
    expect((await echo.text()).length).toBeLessThan(2000);
  });

  it('deep nesting never answers with a stack overflow or a 500', async () => {
    const depth = 100_000;
    const nestedArray = `${'['.repeat(depth)}1${']'.repeat(depth)}`;
    const nestedObject = `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
    const bodies: [path: string, body: string][] = [
      ['/rental/pricing/quote', `{"machine_ids":${nestedArray},"location_id":"LOC-001","start_time":"${hoursFromNow(5)}","duration_hours":2}`],
      ['/rental/pricing/quote', `{"machine_ids":["EQ-001"],"location_id":${nestedObject},"start_time":"${hoursFromNow(5)}","duration_hours":2}`],
      ['/prediction/predict/travel_time/batch', `{"instances":${nestedArray}}`],
      ['/rental/booking/confirm', `{"quote_id":${nestedObject},"customer_name":${nestedArray}}`],
      ['/graphql', JSON.stringify({ query: `{${'machines {'.repeat(20_000)} id ${'}'.repeat(20_001)}` })],
      ['/graphql', JSON.stringify({ query: `{ machine(id: ${'['.repeat(50_000)}"x"${']'.repeat(50_000)}) { id } }` })],
      ['/graphql', `{"query":"query($i: [TravelInput!]!) { predictTravelTimeBatch(inputs: $i) { q50Minutes } }","variables":{"i":${nestedArray}}}`],
    ];
    for (const [path, body] of bodies) {
      const res = await fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      const text = await res.text();
      expect(res.status, `${path} ${body.slice(0, 40)}`).toBe(400);
      expect(text).not.toMatch(/call stack|RangeError|Internal server error/i);
      expect(text.length).toBeLessThan(2000);
    }
    expect((await rest(url, 'GET', '/health')).status).toBe(200);
  });

  it('an Idempotency-Key answers its first request again, and refuses a different one with 422', async () => {
    const q = await quote();
    const other = await quote();
    const headers = { 'idempotency-key': `key-${q}` };
    const first = await rest(url, 'POST', '/rental/booking/confirm', { quote_id: q, customer_name: 'Acme BV' }, headers);
    expect(first.status).toBe(200);
    const again = await rest(url, 'POST', '/rental/booking/confirm', { quote_id: q.toUpperCase(), customer_name: 'Acme BV' }, headers);
    expect(again.status).toBe(200);
    expect(again.body['booking_id']).toBe(first.body['booking_id']);
    for (const body of [
      { quote_id: q, customer_name: 'Other BV' },
      { quote_id: other, customer_name: 'Acme BV' },
    ]) {
      const reused = await rest(url, 'POST', '/rental/booking/confirm', body, headers);
      expect(reused.status).toBe(422);
      expect(reused.body).toMatchObject({ code: 'IDEMPOTENCY_KEY_REUSED', status: 422, title: 'Idempotency-Key reused' });
    }
    const viaGraphQL = await gql(url, CONFIRM, { input: { quoteId: q, customerName: 'Third BV' } }, headers);
    expect(viaGraphQL.errors?.[0]?.extensions?.['code']).toBe('IDEMPOTENCY_KEY_REUSED');
    const replayGraphQL = await gql(url, CONFIRM, { input: { quoteId: q, customerName: 'Acme BV' } }, headers);
    expect(replayGraphQL.data?.['confirmBooking']).toEqual({ id: first.body['booking_id'], customerName: 'Acme BV' });
    // The refused request changed nothing: the other quote is still there to confirm, under a new key.
    const fresh = await rest(url, 'POST', '/rental/booking/confirm', { quote_id: other, customer_name: 'Acme BV' }, { 'idempotency-key': `key-${other}` });
    expect(fresh.status).toBe(200);
  });
});

describe('public documents with API_KEYS set', () => {
  let url: string;
  const KEY = 'partner-key-0001';
  beforeAll(async () => {
    ({ url } = await startTestServer({ env: { API_KEYS: KEY } }));
  });

  it('the JWKS and /health answer without a key; everything else still wants one', async () => {
    const q = await rest(
      url,
      'POST',
      '/rental/pricing/quote',
      { machine_ids: ['EQ-004'], location_id: 'LOC-002', start_time: hoursFromNow(30), duration_hours: 3 },
      { 'x-api-key': KEY },
    );
    expect(q.status).toBe(200);
    // docs/rental.md's own example: createRemoteJWKSet sends no key.
    const { payload } = await jwtVerify(q.body['signature'], createRemoteJWKSet(new URL(`${url}/rental/pricing/keys`)), { issuer: 'ops-supergraph/rental' });
    expect(payload['quote_id']).toBe(q.body['quote_id']);
    expect((await rest(url, 'GET', '/health')).status).toBe(200);
    // A wrong method on a public path is told what it serves; on any other path a key comes first.
    const post = await fetch(`${url}/rental/pricing/keys`, { method: 'POST' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD, OPTIONS');
    for (const [method, path] of [
      ['GET', '/rental/fleet/summary'],
      ['GET', '/rental/health'],
      ['PUT', '/rental/pricing/quote'],
      ['GET', '/prediction/health'],
    ] as const) {
      expect((await rest(url, method, path)).status, `${method} ${path}`).toBe(401);
    }
    expect((await gql(url, '{ quoteSigningKeys { kid } }')).status).toBe(401);
  });
});

describe.runIf(TEST_DATABASE_URL)('Idempotency-Key under concurrency (PostgreSQL)', () => {
  let url: string;
  beforeAll(async () => {
    ({ url } = await startTestServer({ backend: 'postgres' }));
  });
  const quote = async (machine: string) => {
    const q = await rest(url, 'POST', '/rental/pricing/quote', {
      machine_ids: [machine],
      location_id: 'LOC-003',
      start_time: hoursFromNow(24),
      duration_hours: 2,
    });
    expect(q.status).toBe(200);
    return q.body['quote_id'] as string;
  };

  it('concurrent confirms with one key and different bodies: one booking; same body replays it, any other is 422', async () => {
    for (const [round, machines] of [
      [1, ['EQ-001', 'EQ-002']],
      [2, ['EQ-003', 'EQ-004']],
    ] as const) {
      const [a, b] = await Promise.all(machines.map(quote));
      const key = `race-${round}-${a}`;
      // Round 1: one quote, two customer names; round 2: two quotes, one name.
      const bodies = Array.from({ length: 12 }, (_, i) =>
        round === 1 ? { quote_id: a!, customer_name: i % 2 === 0 ? 'Even BV' : 'Odd BV' } : { quote_id: i % 2 === 0 ? a! : b!, customer_name: 'Same BV' },
      );
      const results = await Promise.all(bodies.map((body) => rest(url, 'POST', '/rental/booking/confirm', body, { 'idempotency-key': key })));
      const won = results.filter((r) => r.status === 200);
      const refused = results.filter((r) => r.status === 422);
      expect(won.length + refused.length).toBe(12);
      expect(new Set(won.map((r) => r.body['booking_id'])).size).toBe(1);
      const winner = won[0]!.body;
      // Every request with the winner's body got the booking; every other one was refused.
      bodies.forEach((body, i) => {
        const same = body.quote_id === winner['quote_id'] && body.customer_name === winner['customer_name'];
        expect(results[i]!.status, JSON.stringify(body)).toBe(same ? 200 : 422);
        if (!same) expect(results[i]!.body['code']).toBe('IDEMPOTENCY_KEY_REUSED');
      });
      expect(won).toHaveLength(6);
      const ledger = await rest(url, 'GET', '/rental/bookings?limit=100');
      expect(ledger.body['bookings'].filter((x: { quote_id: string }) => x.quote_id === a || x.quote_id === b)).toHaveLength(1);
      if (round === 2) {
        // The losing quote was left as it was: still active, its machine still reserved.
        const loser = winner['quote_id'] === a ? b! : a!;
        const res = await gql(url, 'query($q: ID!) { quote(id: $q) { status machines { status } } }', { q: loser });
        expect(res.data?.['quote']).toEqual({ status: 'ACTIVE', machines: [{ status: 'RESERVED' }] });
      }
    }
  });
});
