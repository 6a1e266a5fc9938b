import pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { OffsetClock } from '../../../platform/clock.js';
import { gql, hoursFromNow, rest } from '../../support/http.js';
import { TEST_DATABASE_URL, backends, startTestServer } from '../../support/server.js';
import { until } from '../../support/wait.js';

/** The largest amount an int4 column of cents can hold, in euros. */
const INT4_MAX_EUROS = 2_147_483_647 / 100;
const YEAR_MS = 365 * 86_400_000;

describe.each(backends)('edge cases at the input edge and in storage (%s)', (backend) => {
  let url: string;
  let server: Awaited<ReturnType<typeof startTestServer>>;
  const clock = new OffsetClock();

  beforeAll(async () => {
    server = await startTestServer({ backend, clock });
    url = server.url;
  });

  const quote = (machineIds: string[], extra: Record<string, unknown> = {}) =>
    rest(url, 'POST', '/rental/pricing/quote', {
      machine_ids: machineIds,
      location_id: 'LOC-004',
      start_time: hoursFromNow(4, clock.now().getTime()),
      duration_hours: 8,
      ...extra,
    });

  describe('money beyond 32 bits', () => {
    it('a booking completed decades late closes its bill (bigint cents) and releases its machines', async () => {
      const late = new OffsetClock();
      const own = await startTestServer({ backend, clock: late });
      const q = await rest(own.url, 'POST', '/rental/pricing/quote', {
        machine_ids: ['EQ-009', 'EQ-008'],
        location_id: 'LOC-004',
        start_time: hoursFromNow(4, late.now().getTime()),
        duration_hours: 8,
      });
      expect(q.status).toBe(200);
      const b = await rest(own.url, 'POST', '/rental/booking/confirm', { quote_id: q.body['quote_id'], customer_name: 'Forgetful BV' });
      expect(b.status).toBe(200);

      late.advance(30 * YEAR_MS);
      const done = await rest(own.url, 'POST', `/rental/booking/${b.body['booking_id']}/complete`);
      expect(done.status).toBe(200);
      const bill = done.body['bill'];
      expect(bill['final_amount']).toBeGreaterThan(INT4_MAX_EUROS);
      expect(bill['final_amount']).toBeCloseTo(q.body['total'] + bill['overtime_amount'], 2);
      // Overtime: the quote's effective hourly rate (subtotal / hours) * 1.25 for every hour beyond the quote.
      const expectedOvertime = (q.body['subtotal'] / 8) * (bill['billable_hours'] - 8) * 1.25;
      expect(bill['overtime_amount']).toBeCloseTo(expectedOvertime, 0);

      const machines = await rest(own.url, 'GET', '/rental/fleet/machines');
      const status = (id: string) => machines.body['machines'].find((m: { id: string }) => m.id === id).status;
      expect([status('EQ-008'), status('EQ-009')]).toEqual(['available', 'available']);

      // Read back from storage: the ledger shows the same amounts.
      const ledger = await rest(own.url, 'GET', '/rental/bookings?limit=1');
      expect(ledger.body['bookings'][0]['bill']).toEqual(bill);
      await own.close();
    });

    it('int8 values read as JS numbers on both drivers, and a value beyond 2^53 is refused', async () => {
      const res = await server.db.query<{ n: unknown; big: unknown }>('SELECT count(*) AS n, 9007199254740991::int8 AS big FROM rental_machines');
      expect(res.rows[0]).toEqual({ n: 15, big: Number.MAX_SAFE_INTEGER });
      await expect(server.db.query('SELECT 9007199254740993::int8 AS x')).rejects.toThrow(/safe integer/);
      // The connection stays usable after the refusal.
      expect((await server.db.query<{ one: number }>('SELECT 1::int8 AS one')).rows[0]!.one).toBe(1);
    });
  });

  it('every line item recomputes to the cent from the figures the quote shows (13 of 15 machines out)', async () => {
    const own = await startTestServer({ backend });
    const twelve = Array.from({ length: 12 }, (_, i) => `EQ-${String(i + 1).padStart(3, '0')}`);
    const body = (ids: string[]) => ({ machine_ids: ids, location_id: 'LOC-006', start_time: hoursFromNow(30 * 24), duration_hours: 2160 });
    expect((await rest(own.url, 'POST', '/rental/pricing/quote', body(twelve))).status).toBe(200);
    const q = await rest(own.url, 'POST', '/rental/pricing/quote', body(['EQ-013']));
    expect(q.status).toBe(200);
    const u = q.body['utilization'] as number;
    expect(u).toBe(0.8667);
    const round4 = (x: number) => Math.round(x * 10_000) / 10_000;
    const item = q.body['line_items'][0];
    expect(item['surge_multiplier']).toBe(round4(1 + 1.5 * ((u - 0.6) / 0.4) ** 2));
    expect(item['amount']).toBe(Math.round(item['hourly_rate'] * item['hours'] * item['surge_multiplier'] * item['lead_time_factor'] * 100) / 100);
  });

  describe('input rules', () => {
    it('a rental shorter than 0.25 hours is refused, over REST and GraphQL', async () => {
      const tiny = await quote(['EQ-001'], { duration_hours: 0.0001 });
      expect(tiny.status).toBe(400);
      expect(tiny.body).toMatchObject({ code: 'BAD_USER_INPUT', errors: [{ field: 'duration_hours' }] });
      expect(tiny.body['errors'][0].message).toContain('0.25');
      const gqlTiny = await gql(url, `mutation($input: CreateQuoteInput!) { createQuote(input: $input) { id } }`, {
        input: { machineIds: ['EQ-001'], locationId: 'LOC-004', startTime: hoursFromNow(4, clock.now().getTime()), durationHours: 0.2 },
      });
      expect(gqlTiny.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', fields: [{ field: 'durationHours' }] });
      // Nothing was reserved by the refused quotes; the shortest rental is accepted.
      const shortest = await quote(['EQ-001'], { duration_hours: 0.25 });
      expect(shortest.status).toBe(200);
      expect(shortest.body['line_items'][0]['amount']).toBeGreaterThan(0);
    });

    it('a quote id in upper case is the same quote: confirm, idempotent replay and reads', async () => {
      const q = await quote(['EQ-002']);
      expect(q.status).toBe(200);
      const id: string = q.body['quote_id'];
      const upper = id.toUpperCase();
      const headers = { 'idempotency-key': `case-${id}` };
      const first = await rest(url, 'POST', '/rental/booking/confirm', { quote_id: upper, customer_name: 'Case BV' }, headers);
      expect(first.status).toBe(200);
      expect(first.body['quote_id']).toBe(id);
      const replay = await rest(url, 'POST', '/rental/booking/confirm', { quote_id: upper, customer_name: 'Case BV' }, headers);
      expect(replay.status).toBe(200);
      expect(replay.body['booking_id']).toBe(first.body['booking_id']);
      const lower = await rest(url, 'POST', '/rental/booking/confirm', { quote_id: id, customer_name: 'Case BV' }, headers);
      expect(lower.body['booking_id']).toBe(first.body['booking_id']);

      const read = await gql(url, 'query($q: ID!, $b: ID!) { quote(id: $q) { id status booking { id } } booking(id: $b) { id } }', {
        q: upper,
        b: first.body['booking_id'].toLowerCase(),
      });
      expect(read.errors).toBeUndefined();
      expect(read.data).toEqual({
        quote: { id, status: 'CONFIRMED', booking: { id: first.body['booking_id'] } },
        booking: { id: first.body['booking_id'] },
      });
      const track = await rest(url, 'GET', `/rental/booking/${first.body['booking_id'].toLowerCase()}/track`);
      expect(track.status).toBe(200);
      expect(track.body['booking_id']).toBe(first.body['booking_id']);
    });

    it('control characters are refused with 400 naming the field, in bodies, path parameters and GraphQL ids', async () => {
      const field = (res: { body: Record<string, any> }) => res.body['errors']?.map((e: { field: string }) => e.field);
      const nulName = await rest(url, 'POST', '/rental/booking/confirm', {
        quote_id: '9d79644e-1c89-42b2-86b8-08dbe88825c2',
        customer_name: 'Nul\u0000Bouw',
      });
      expect(nulName.status).toBe(400);
      expect(nulName.body).toMatchObject({ code: 'BAD_USER_INPUT', errors: [{ field: 'customer_name', message: 'must not contain control characters' }] });
      for (const name of ['Tab\tBouw', 'Line\nBouw', 'Del\u007fBouw', 'Esc\u001bBouw']) {
        const res = await rest(url, 'POST', '/rental/booking/confirm', { quote_id: '9d79644e-1c89-42b2-86b8-08dbe88825c2', customer_name: name });
        expect(res.status, JSON.stringify(name)).toBe(400);
        expect(field(res)).toEqual(['customer_name']);
      }
      const nulQuote = await rest(url, 'POST', '/rental/booking/confirm', { quote_id: '\u0000', customer_name: 'x' });
      expect(nulQuote.status).toBe(400);
      expect(field(nulQuote)).toEqual(['quote_id']);
      const nulLocation = await quote(['EQ-003'], { location_id: 'LOC-00\u00001' });
      expect(nulLocation.status).toBe(400);
      expect(field(nulLocation)).toEqual(['location_id']);

      for (const [method, path] of [
        ['GET', '/rental/booking/%00/track'],
        ['GET', '/rental/booking/BK-%0A/track'],
        ['POST', '/rental/booking/%7F/complete'],
      ] as const) {
        const res = await rest(url, method, path);
        expect(res.status, path).toBe(400);
        expect(res.headers.get('content-type')).toContain('application/problem+json');
        expect(res.body).toMatchObject({ code: 'BAD_USER_INPUT', errors: [{ field: 'booking_id', message: 'must not contain control characters' }] });
      }

      for (const [query, arg] of [
        ['query($v: ID!) { booking(id: $v) { id } }', 'id'],
        ['query($v: ID!) { machine(id: $v) { id } }', 'id'],
        ['query($v: ID!) { quote(id: $v) { id } }', 'id'],
        ['query($v: ID!) { tracking(bookingId: $v) { status } }', 'bookingId'],
        ['mutation($v: ID!) { completeBooking(bookingId: $v) { id } }', 'bookingId'],
      ] as const) {
        const res = await gql(url, query, { v: 'BK-\u0000' });
        expect(res.errors?.[0]?.extensions, query).toMatchObject({ code: 'BAD_USER_INPUT', fields: [{ field: arg }] });
      }
      const literal = await gql(
        url,
        'mutation { createQuote(input: { machineIds: ["EQ-003"], locationId: "LOC\\u0000", startTime: "2030-01-01T00:00:00Z", durationHours: 2 }) { id } }',
      );
      expect(literal.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', fields: [{ field: 'locationId' }] });

      // Nothing was reserved or stored by any of them.
      const summary = await rest(url, 'GET', '/rental/fleet/summary');
      expect(summary.status).toBe(200);
    });

    it('impossible calendar dates and times are refused, not rolled over (REST and GraphQL)', async () => {
      // A day 31 of a 30-day month, a Feb 29 of a common year and out-of-range clock fields, all inside the booking window.
      const now = clock.now();
      const month30 = Array.from({ length: 11 }, (_, i) => new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1 + i, 1))).find((d) =>
        [3, 5, 8, 10].includes(d.getUTCMonth()),
      )!;
      const ym = month30.toISOString().slice(0, 7);
      const valid = hoursFromNow(48, now.getTime()).slice(0, 10);
      const impossible = [
        `${ym}-31T10:00:00Z`,
        `${valid}T24:00:00Z`,
        `${valid}T10:60:00Z`,
        `${valid}T10:00:60Z`,
        `${valid}T10:00:00+24:00`,
        `${ym}-00T10:00:00Z`,
      ];
      for (const start of impossible) {
        const res = await quote(['EQ-004'], { start_time: start });
        expect(res.status, start).toBe(400);
        expect(res.body['errors'], start).toEqual([{ field: 'start_time', message: expect.stringContaining('not a real date and time') }]);
        const viaGraphQL = await gql(url, 'mutation($input: CreateQuoteInput!) { createQuote(input: $input) { id } }', {
          input: { machineIds: ['EQ-004'], locationId: 'LOC-004', startTime: start, durationHours: 2 },
        });
        expect(viaGraphQL.errors?.[0]?.extensions?.['code'], start).toBe('BAD_USER_INPUT');
        expect(viaGraphQL.errors?.[0]?.message, start).toContain('not a real date and time');
      }
      const lastMoment = await quote(['EQ-004'], { start_time: `${valid}T23:59:59.999+01:00` });
      expect(lastMoment.status).toBe(200);
    });
  });
});

describe('GraphQL request errors are client errors (400), never faults', () => {
  let url: string;
  beforeAll(async () => {
    ({ url } = await startTestServer());
  });

  const post = async (body: unknown, accept = 'application/graphql-response+json') => {
    const res = await fetch(`${url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as { data?: unknown; errors?: { message: string; extensions?: Record<string, unknown> }[] } };
  };

  it.each([
    ['an unknown operationName', { query: 'query A { fleetSummary { total } }', operationName: 'Nope' }, 'BAD_REQUEST', 'Nope'],
    ['several operations and no operationName', { query: 'query A { fleetSummary { total } } query B { machines { id } }' }, 'BAD_REQUEST', 'operationName'],
    [
      'a Float literal beyond the double range',
      {
        query:
          'mutation { createQuote(input: { machineIds: ["EQ-001"], locationId: "LOC-001", startTime: "2030-01-01T00:00:00Z", durationHours: 1e400 }) { id } }',
      },
      'GRAPHQL_VALIDATION_FAILED',
      'Infinity',
    ],
    ['an Int literal 1e400', { query: '{ bookings(first: 1e400) { totalCount } }' }, 'GRAPHQL_VALIDATION_FAILED', 'Int'],
    ['an Int literal beyond 32 bits', { query: '{ bookings(first: 4294967296) { totalCount } }' }, 'GRAPHQL_VALIDATION_FAILED', 'Int'],
    [
      'a persistedQuery extension whose hash is not 64 hex digits',
      { query: '{ fleetSummary { total } }', extensions: { persistedQuery: { version: 1, sha256Hash: 'abc' } } },
      'BAD_REQUEST',
      '64 hexadecimal',
    ],
    ['a subscription over HTTP', { query: 'subscription { fleetSummaryChanged { cursor } }' }, 'BAD_REQUEST', 'WebSocket'],
    [
      'a subscription chosen by operationName',
      { query: 'query A { fleetSummary { total } } subscription B { machineStatusChanged { cursor } }', operationName: 'B' },
      'BAD_REQUEST',
      'WebSocket',
    ],
    [
      'an impossible DateTime literal',
      {
        query: 'mutation { createQuote(input: { machineIds: ["EQ-001"], locationId: "LOC-001", startTime: "2027-02-30T10:00:00Z", durationHours: 2 }) { id } }',
      },
      'GRAPHQL_VALIDATION_FAILED',
      '2027-02 has 28 days',
    ],
    [
      'a DateTime literal that is not a string',
      { query: 'mutation { createQuote(input: { machineIds: ["EQ-001"], locationId: "LOC-001", startTime: 12345, durationHours: 2 }) { id } }' },
      'GRAPHQL_VALIDATION_FAILED',
      'DateTime cannot be 12345',
    ],
    [
      'a DateTime variable that is not one',
      {
        query: 'mutation ($i: CreateQuoteInput!) { createQuote(input: $i) { id } }',
        variables: { i: { machineIds: ['EQ-001'], locationId: 'LOC-001', startTime: 'tomorrow', durationHours: 2 } },
      },
      'BAD_USER_INPUT',
      'tomorrow',
    ],
  ])('%s: 400 with a catalogued code', async (_, body, code, mention) => {
    for (const accept of ['application/graphql-response+json', 'application/json']) {
      const res = await post(body, accept);
      expect(res.status, accept).toBe(400);
      expect(res.body.data).toBeUndefined();
      expect(res.body.errors?.[0]?.extensions?.['code']).toBe(code);
      expect(res.body.errors?.[0]?.message).toContain(mention);
    }
  });

  it('a refused subscription or DateTime changes nothing', async () => {
    await post({
      query: 'mutation ($i: CreateQuoteInput!) { createQuote(input: $i) { id } }',
      variables: { i: { machineIds: ['EQ-001'], locationId: 'LOC-001', startTime: '2027-13-01T00:00:00Z', durationHours: 2 } },
    });
    const summary = await post({ query: '{ fleetSummary { reserved } }' });
    expect(summary.body.data).toEqual({ fleetSummary: { reserved: 0 } });
  });

  it('a DateTime literal the subgraph cannot parse is a validation error, not an internal one', async () => {
    for (const startTime of ['2027-02-30T10:00:00Z', 'garbage']) {
      const res = await post({
        query: `mutation { createQuote(input: { machineIds: ["EQ-001"], locationId: "LOC-001", startTime: "${startTime}", durationHours: 2 }) { id } }`,
      });
      expect(res.body.errors?.[0]?.extensions?.['code'], startTime).toBe('GRAPHQL_VALIDATION_FAILED');
      expect(res.body.errors?.[0]?.message).toContain(startTime);
    }
    const quote = await post({ query: '{ fleetSummary { reserved } }' });
    expect(quote.body.data).toEqual({ fleetSummary: { reserved: 0 } });
  });

  it('a mutation over GET keeps its 405, with the catalogue code for it', async () => {
    const query = encodeURIComponent('mutation { completeBooking(bookingId: "BK-000000000000") { id } }');
    const res = await fetch(`${url}/graphql?query=${query}`, { headers: { accept: 'application/json', 'apollo-require-preflight': 'true' } });
    expect(res.status).toBe(405);
    expect(((await res.json()) as { errors: { extensions: { code: string } }[] }).errors[0]!.extensions.code).toBe('METHOD_NOT_ALLOWED');
  });

  it('an Accept header that allows no GraphQL response type is 406 with its catalogue code', async () => {
    const res = await post({ query: '{ fleetSummary { total } }' }, 'text/html');
    expect(res.status).toBe(406);
    expect(res.body.errors?.[0]?.extensions?.['code']).toBe('NOT_ACCEPTABLE');
  });

  it('an operation that resolves is served as before', async () => {
    const res = await post({ query: 'query A { fleetSummary { total } } query B { machines { id } }', operationName: 'A' });
    expect(res).toEqual({ status: 200, body: { data: { fleetSummary: { total: 15 } } } });
  });
});

/*
 * A booking whose sequence number was allocated before another's but that commits after it must not be
 * skipped by a client paging the ledger meanwhile. Only PostgreSQL runs transactions concurrently.
 */
describe.runIf(TEST_DATABASE_URL)('ledger paging while confirms commit out of order (postgres)', () => {
  it('a walk from the first page sees every booking older than its first row', async () => {
    const server = await startTestServer({ backend: 'postgres' });
    const { url } = server;
    const quote = async (machine: string, location: string) => {
      const q = await rest(url, 'POST', '/rental/pricing/quote', {
        machine_ids: [machine],
        location_id: location,
        start_time: hoursFromNow(6),
        duration_hours: 4,
      });
      expect(q.status).toBe(200);
      return q.body['quote_id'] as string;
    };
    const confirm = (quoteId: string, name: string) => rest(url, 'POST', '/rental/booking/confirm', { quote_id: quoteId, customer_name: name });
    for (const [machine, name] of [
      ['EQ-001', 'Older 1'],
      ['EQ-002', 'Older 2'],
      ['EQ-003', 'Older 3'],
    ] as const) {
      expect((await confirm(await quote(machine, 'LOC-001'), name)).status).toBe(200);
    }
    const slowQuote = await quote('EQ-004', 'LOC-005');
    const fastQuote = await quote('EQ-005', 'LOC-001');

    // Hold the row a booking at LOC-005 must reference: its INSERT waits in the foreign-key check.
    const holder = new pg.Client({ connectionString: TEST_DATABASE_URL, options: `-c search_path=${server.schema}` });
    await holder.connect();
    const lockWaiters = async () =>
      (
        await holder.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity
           WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid() AND datname = current_database()`,
        )
      ).rows[0]!.n;
    let page1: { body: Record<string, any> };
    let slow: Promise<unknown> | undefined;
    let fast: Promise<{ status: number }> | undefined;
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM rental_locations WHERE id = 'LOC-005' FOR UPDATE`);
      slow = confirm(slowQuote, 'Slow');
      await until(async () => (await lockWaiters()) >= 1, 'the slow confirm waiting on the lock');
      expect(await lockWaiters()).toBe(1);
      // The second confirm either commits at once (with the higher sequence number) or waits its turn.
      let fastDone = false;
      fast = confirm(fastQuote, 'Fast').then((r) => ((fastDone = true), r));
      await until(async () => fastDone || (await lockWaiters()) >= 2, 'the fast confirm committed or waiting');
      page1 = await rest(url, 'GET', '/rental/bookings?limit=2');
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
    }
    expect((await fast).status).toBe(200);
    await slow;

    const walk: string[] = page1.body['bookings'].map((b: { customer_name: string }) => b.customer_name);
    for (let cursor = page1.body['next_cursor']; cursor;) {
      const page = await rest(url, 'GET', `/rental/bookings?limit=2&cursor=${cursor}`);
      walk.push(...page.body['bookings'].map((b: { customer_name: string }) => b.customer_name));
      cursor = page.body['next_cursor'];
    }
    const all = (await rest(url, 'GET', '/rental/bookings?limit=100')).body['bookings'].map((b: { customer_name: string }) => b.customer_name);
    expect(all).toHaveLength(5);
    expect(walk).toEqual(all.slice(all.indexOf(walk[0])));
  });
});

describe('REST input errors name the field and say what is wrong', () => {
  let url: string;
  beforeAll(async () => {
    ({ url } = await startTestServer());
  });

  it('a field of the wrong type says which type it must be; only an absent field "is required"', async () => {
    const res = await rest(url, 'POST', '/rental/pricing/quote', { machine_ids: 'EQ-001', location_id: 5, start_time: null, duration_hours: '2' });
    expect(res.status).toBe(400);
    expect(res.body['errors']).toEqual([
      { field: 'machine_ids', message: 'must be an array' },
      { field: 'location_id', message: 'must be a string' },
      { field: 'start_time', message: 'must be a string' },
      { field: 'duration_hours', message: 'must be a number' },
    ]);
    // Raw JSON: 1e400 parses to Infinity (JSON.stringify would send null).
    const nested = await rest(url, 'POST', '/rental/pricing/quote', '{"machine_ids":["EQ-001",7],"location_id":"LOC-001","duration_hours":1e400}');
    expect(nested.body['errors']).toEqual([
      { field: 'machine_ids[1]', message: 'must be a string' },
      { field: 'start_time', message: 'is required' },
      { field: 'duration_hours', message: 'must be a finite number' },
    ]);
    for (const sent of ['abc', '0x10', '1e2', '%201', '-1', '']) {
      const limit = await rest(url, 'GET', `/rental/bookings?limit=${sent}`);
      expect(limit.status, sent).toBe(400);
      expect(limit.body['errors'], sent).toEqual([{ field: 'limit', message: 'must be a whole number from 1 to 100' }]);
    }
  });

  it('a ledger cursor is only what the API handed out, and REST names it cursor', async () => {
    const b64 = (s: string) => Buffer.from(s).toString('base64url');
    for (const cursor of ['nonsense', b64('booking:007'), b64('booking:9007199254740993000'), b64('booking:0')]) {
      const res = await rest(url, 'GET', `/rental/bookings?cursor=${cursor}`);
      expect(res.status, cursor).toBe(400);
      expect(res.body['errors'], cursor).toEqual([{ field: 'cursor', message: 'is not a cursor returned by this API' }]);
    }
    const empty = await gql(url, '{ bookings(first: 1, after: "") { totalCount } }');
    expect(empty.errors?.[0]?.extensions?.['code']).toBe('BAD_USER_INPUT');
    expect((await rest(url, 'GET', `/rental/bookings?cursor=${b64('booking:7')}`)).status).toBe(200);
  });

  it('an invalid Idempotency-Key is named as the header, not snake-cased', async () => {
    const res = await rest(
      url,
      'POST',
      '/rental/booking/confirm',
      { quote_id: '9d79644e-1c89-42b2-86b8-08dbe88825c2', customer_name: 'Header BV' },
      {
        'idempotency-key': 'has spaces in it',
      },
    );
    expect(res.status).toBe(400);
    expect(res.body['errors']).toEqual([{ field: 'Idempotency-Key', message: 'must be printable ASCII' }]);
    expect(res.body['detail']).toBe('Idempotency-Key: must be printable ASCII');
  });
});

describe('REST framing errors are problem details with the documented status', () => {
  let url: string;
  beforeAll(async () => {
    ({ url } = await startTestServer());
  });
  const isProblem = (res: { headers: Headers; body: unknown }, status: number, code: string) => {
    expect(res.headers.get('content-type')).toContain('application/problem+json');
    expect(res.body).toMatchObject({ status, code, type: expect.stringContaining('urn:ops-supergraph:problem:') });
  };

  it('a body that is not JSON is 415, on REST and on /graphql', async () => {
    for (const type of ['text/plain', 'text/plain; charset=utf-8', 'application/xml', 'application/x-www-form-urlencoded']) {
      const res = await rest(url, 'POST', '/rental/pricing/quote', '{"machine_ids":["EQ-001"]}', { 'content-type': type });
      expect(res.status, type).toBe(415);
      isProblem(res, 415, 'UNSUPPORTED_MEDIA_TYPE');
      expect(res.body['detail']).toContain('application/json');
    }
    const graphql = await rest(url, 'POST', '/graphql', '{"query":"{ fleetSummary { total } }"}', { 'content-type': 'text/plain' });
    expect(graphql.status).toBe(415);
    isProblem(graphql, 415, 'UNSUPPORTED_MEDIA_TYPE');
    expect(graphql.body['errors']).toEqual([{ message: graphql.body['detail'], extensions: { code: 'UNSUPPORTED_MEDIA_TYPE' } }]);
    // JSON is still served.
    expect((await rest(url, 'GET', '/rental/fleet/summary')).status).toBe(200);
  });

  it('a compressed body is 415, a prototype-poisoning key 400, an unpaired surrogate 400; nothing is reserved', async () => {
    const body = JSON.stringify({ machine_ids: ['EQ-001'], location_id: 'LOC-001', start_time: hoursFromNow(4), duration_hours: 2 });
    const gzip = await rest(url, 'POST', '/rental/pricing/quote', body, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
    expect(gzip.status).toBe(415);
    isProblem(gzip, 415, 'UNSUPPORTED_MEDIA_TYPE');
    expect(gzip.body['detail']).toContain('gzip');
    const proto = await rest(url, 'POST', '/rental/pricing/quote', '{"__proto__":{"x":1},"machine_ids":["EQ-001"]}', { 'content-type': 'application/json' });
    expect(proto.status).toBe(400);
    expect(proto.body['detail']).toContain('__proto__');
    const surrogate = await rest(url, 'POST', '/rental/booking/confirm', '{"quote_id":"9d79644e-1c89-42b2-86b8-08dbe88825c2","customer_name":"a\\ud800b"}', {
      'content-type': 'application/json',
    });
    expect(surrogate.status).toBe(400);
    expect(surrogate.body['errors']).toEqual([{ field: 'customer_name', message: 'must be well-formed Unicode (no unpaired surrogate)' }]);
    expect((await rest(url, 'GET', '/rental/fleet/summary')).body['reserved']).toBe(0);
  });

  it('a path that takes no body accepts none (even with a JSON Content-Type) or {}, and refuses anything else', async () => {
    const q = await rest(url, 'POST', '/rental/pricing/quote', {
      machine_ids: ['EQ-015'],
      location_id: 'LOC-001',
      start_time: hoursFromNow(4),
      duration_hours: 2,
    });
    const b = await rest(url, 'POST', '/rental/booking/confirm', { quote_id: q.body['quote_id'], customer_name: 'Bodiless BV' });
    const path = `/rental/booking/${b.body['booking_id']}/complete`;
    for (const sent of ['[1]', '"x"', '{"force":true}']) {
      const refused = await rest(url, 'POST', path, sent, { 'content-type': 'application/json' });
      expect(refused.status, sent).toBe(400);
      expect(refused.body['errors'], sent).toEqual([{ field: 'body', message: 'this path takes no body (send none, or {})' }]);
    }
    const empty = await fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' } });
    expect(empty.status).toBe(200);
    expect(((await empty.json()) as { status: string }).status).toBe('completed');
    // A body-taking path with an empty body says what it needs.
    const noQuote = await fetch(`${url}/rental/pricing/quote`, { method: 'POST', headers: { 'content-type': 'application/json' } });
    expect(noQuote.status).toBe(400);
    expect(((await noQuote.json()) as { errors: unknown[] }).errors).toEqual([
      { field: 'body', message: 'must be a JSON object (Content-Type: application/json)' },
    ]);
  });

  it('router errors: a bad percent-encoding is 400, an over-long path segment 414, oversized headers 431', async () => {
    const badUrl = await rest(url, 'GET', '/rental/booking/%ZZ/track');
    expect(badUrl.status).toBe(400);
    isProblem(badUrl, 400, 'BAD_REQUEST');
    const longSegment = await rest(url, 'GET', `/rental/booking/${'X'.repeat(200)}/track`);
    expect(longSegment.status).toBe(414);
    isProblem(longSegment, 414, 'URI_TOO_LONG');
    const hugeUrl = await rest(url, 'GET', `/rental/fleet/summary?pad=${'x'.repeat(20_000)}`);
    expect(hugeUrl.status).toBe(431);
    isProblem(hugeUrl, 431, 'REQUEST_HEADER_FIELDS_TOO_LARGE');
  });
});
