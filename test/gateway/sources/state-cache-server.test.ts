import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OffsetClock } from '../../../platform/clock.js';
import { gql, hoursFromNow, rest } from '../../support/http.js';
import { startTestServer, TEST_DATABASE_URL, type TestServer } from '../../support/server.js';
import { until } from '../../support/wait.js';

/*
 * The state cache on real servers: fleet and tenant reads served from it, every kind of write seen at once
 * (GraphQL, REST, a subgraph's own clock, another gateway on the same database), read-your-writes by the
 * position a write answers with, tenants kept apart, and bad input refused.
 */

const OPERATOR = 'state-cache-operator-key';
const KEYS = {
  alice: 'state-cache-alice-key',
  bob: 'state-cache-bob-key',
  carol: 'state-cache-carol-key',
  dave: 'state-cache-dave-key',
};
const PARTNER = ['fleet:read', 'rental:read', 'rental:book'];

function keysFile(): string {
  const file = join(mkdtempSync(join(tmpdir(), 'state-cache-')), 'keys.json');
  writeFileSync(
    file,
    JSON.stringify([
      { key: KEYS.alice, principal: 'alice', tenant: 'acme', scopes: PARTNER },
      { key: KEYS.bob, principal: 'bob', tenant: 'acme', scopes: PARTNER },
      { key: KEYS.carol, principal: 'carol', tenant: 'globex', scopes: PARTNER },
      // Of acme too, but without fleet:read.
      { key: KEYS.dave, principal: 'dave', tenant: 'acme', scopes: ['rental:read'] },
    ]),
  );
  return file;
}

const as = (key: string, extra: Record<string, string> = {}) => ({ 'x-api-key': key, ...extra });

const MACHINES = '{ machines { id status } }';
const BOOKINGS = '{ bookings(first: 50) { edges { node { id } } } }';
const QUOTE = 'mutation Q($input: CreateQuoteInput!) { createQuote(input: $input) { id } }';
const BOOK = 'mutation B($input: ConfirmBookingInput!) { confirmBooking(input: $input) { id } }';

/** The state cache's reads so far, by result (`hit`, `miss`, `bypass`), from /metrics. */
async function reads(url: string): Promise<{ hit: number; miss: number; bypass: number }> {
  const text = await (await fetch(`${url}/metrics`, { headers: as(OPERATOR) })).text();
  const out = { hit: 0, miss: 0, bypass: 0 };
  for (const m of text.matchAll(/^state_cache_reads_total\{subgraph="rental",result="(hit|miss|bypass)"\} (\d+)/gm))
    out[m[1] as keyof typeof out] = Number(m[2]);
  return out;
}

const statusOf = async (url: string, key: string, machine: string) => {
  const res = await gql<{ machines: { id: string; status: string }[] }>(url, MACHINES, {}, as(key));
  return res.data?.machines.find((m) => m.id === machine)?.status;
};

/** An available machine, not yet used by this file. */
async function freeMachine(url: string, used: Set<string>): Promise<string> {
  const res = await gql<{ machines: { id: string; status: string }[] }>(url, MACHINES, {}, as(KEYS.alice));
  const found = res.data!.machines.find((m) => m.status === 'AVAILABLE' && !used.has(m.id));
  if (!found) throw new Error('no machine left');
  used.add(found.id);
  return found.id;
}

const quoteInput = (machine: string) => ({ machineIds: [machine], locationId: 'LOC-001', startTime: hoursFromNow(30), durationHours: 4 });

describe('the state cache (one process)', () => {
  let server: TestServer;
  let url: string;
  const clock = new OffsetClock();
  const used = new Set<string>();
  beforeAll(async () => {
    server = await startTestServer({ env: { API_KEYS_FILE: keysFile(), API_KEYS: OPERATOR }, clock });
    ({ url } = server);
  });
  afterAll(async () => server?.close());

  it('serves a fleet read again from the cache, and a GraphQL write evicts it before its answer, which carries the position', async () => {
    const machine = await freeMachine(url, used);
    const before = await reads(url);
    await gql(url, MACHINES, {}, as(KEYS.alice));
    await gql(url, MACHINES, {}, as(KEYS.carol));
    const after = await reads(url);
    expect(after.hit - before.hit).toBeGreaterThanOrEqual(2);
    // What the cache holds is behind the pipeline: a principal without the field's scope is refused as ever.
    const refused = await gql(url, MACHINES, {}, as(KEYS.dave));
    expect(refused.errors?.[0]?.extensions?.['code']).toBe('FORBIDDEN');
    expect(refused.data?.['machines'] ?? null).toBeNull();
    const quoted = await gql<{ createQuote: { id: string } }>(url, QUOTE, { input: quoteInput(machine) }, as(KEYS.alice));
    expect(quoted.errors).toBeUndefined();
    const position = quoted.headers.get('state-position');
    expect(position).toMatch(/^\d+$/);
    expect((quoted as unknown as { extensions?: { statePosition?: string } }).extensions?.statePosition).toBe(position);
    // Nobody sees the machine available any more: not the writer, not another tenant.
    expect(await statusOf(url, KEYS.carol, machine)).toBe('RESERVED');
    expect(await statusOf(url, KEYS.alice, machine)).toBe('RESERVED');
  });

  it('sees a REST write at once, and a quote released by the subgraph’s own clock', async () => {
    const machine = await freeMachine(url, used);
    expect(await statusOf(url, KEYS.carol, machine)).toBe('AVAILABLE');
    const quoted = await rest(
      url,
      'POST',
      '/rental/pricing/quote',
      { machine_ids: [machine], location_id: 'LOC-001', start_time: hoursFromNow(30), duration_hours: 4 },
      as(KEYS.alice),
    );
    expect(quoted.status).toBe(200);
    expect(quoted.headers.get('state-position')).toMatch(/^\d+$/);
    expect(await statusOf(url, KEYS.carol, machine)).toBe('RESERVED');
    // Past the quote's life: the machine is available again, whether the sweeper has run yet or not.
    clock.advance(2 * 3_600_000);
    await until(async () => (await statusOf(url, KEYS.carol, machine)) === 'AVAILABLE', 'the expired quote to release its machine');
  });

  it("keeps tenants apart: a tenant's bookings are served to its principals, never to another tenant", async () => {
    const machine = await freeMachine(url, used);
    const quoted = await gql<{ createQuote: { id: string } }>(url, QUOTE, { input: quoteInput(machine) }, as(KEYS.alice));
    const booked = await gql<{ confirmBooking: { id: string } }>(
      url,
      BOOK,
      { input: { quoteId: quoted.data!.createQuote.id, customerName: 'Acme' } },
      as(KEYS.alice),
    );
    const id = booked.data!.confirmBooking.id;
    const ids = async (key: string) =>
      (await gql<{ bookings: { edges: { node: { id: string } }[] } }>(url, BOOKINGS, {}, as(key))).data!.bookings.edges.map((e) => e.node.id);
    expect(await ids(KEYS.alice)).toContain(id);
    expect(await ids(KEYS.bob)).toContain(id);
    expect(await ids(KEYS.carol)).not.toContain(id);
    expect(await ids(KEYS.carol)).not.toContain(id);
  });

  it('refuses a malformed or future state-position, and answers one it has reached from the cache', async () => {
    for (const bad of ['abc', '-1', '1.5', '99999999999999999999']) {
      const res = await gql(url, MACHINES, {}, as(KEYS.alice, { 'state-position': bad }));
      expect(res.status, bad).toBe(400);
      expect(res.errors?.[0]?.extensions?.['code'], bad).toBe('BAD_USER_INPUT');
    }
    const future = await rest(url, 'GET', '/rental/fleet/summary', undefined, as(KEYS.alice, { 'state-position': '9000000000000' }));
    expect(future.status).toBe(400);
    expect(future.body['detail']).toMatch(/beyond the newest write/);
    const machine = await freeMachine(url, used);
    const quoted = await gql(url, QUOTE, { input: quoteInput(machine) }, as(KEYS.alice));
    const position = quoted.headers.get('state-position')!;
    expect(await statusOf(url, KEYS.alice, machine)).toBe('RESERVED');
    const res = await gql<{ machines: { id: string; status: string }[] }>(url, MACHINES, {}, as(KEYS.bob, { 'state-position': position }));
    expect(res.status).toBe(200);
    expect(res.data!.machines.find((m) => m.id === machine)?.status).toBe('RESERVED');
  });

  it('lets operators invalidate by type, row or tag, and refuses what names nothing', async () => {
    const post = (body: unknown, key = OPERATOR) => rest(url, 'POST', '/admin/state-cache/invalidate', body, as(key));
    await gql(url, MACHINES, {}, as(KEYS.alice));
    const byType = await post({ type: 'Machine' });
    expect(byType.status).toBe(200);
    expect(byType.body['evicted']).toBeGreaterThanOrEqual(1);
    expect(byType.body['position']).toMatch(/^\d+$/);
    expect((await post({ type: 'Machine', key: 'EQ-001' })).status).toBe(200);
    expect((await post({ tag: 'Booking@acme' })).status).toBe(200);
    expect((await post({ all: true })).status).toBe(200);
    for (const [body, pattern] of [
      [{ type: 'Unicorn' }, /no state type "Unicorn"/],
      [{ tag: 'not a tag' }, /is not a tag/],
      [{ tag: 'Unicorn:1' }, /names no state type/],
      [{ key: 'EQ-001' }, /"key" needs its "type"/],
      [{}, /exactly one of/],
      [{ type: 'Machine', extra: 1 }, /Unrecognized key/],
    ] as const) {
      const res = await post(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body['code']).toBe('BAD_USER_INPUT');
      expect(res.body['detail']).toMatch(pattern);
    }
    expect((await post({ all: true }, KEYS.alice)).status).toBe(403);
  });
});

describe.runIf(TEST_DATABASE_URL)('the state cache across two gateways on one PostgreSQL database', () => {
  let a: TestServer;
  let b: TestServer;
  const used = new Set<string>();
  beforeAll(async () => {
    const env = { API_KEYS_FILE: keysFile(), API_KEYS: OPERATOR };
    a = await startTestServer({ backend: 'postgres', env });
    b = await startTestServer({ backend: 'postgres', env, schema: a.schema! });
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  it("answers a request carrying another gateway's write position with that write, and every reader within the lag bound", async () => {
    const machine = await freeMachine(a.url, used);
    // B keeps the machine as available.
    expect(await statusOf(b.url, KEYS.carol, machine)).toBe('AVAILABLE');
    expect(await statusOf(b.url, KEYS.carol, machine)).toBe('AVAILABLE');
    const quoted = await gql(a.url, QUOTE, { input: quoteInput(machine) }, as(KEYS.alice));
    const position = quoted.headers.get('state-position')!;
    const res = await gql<{ machines: { id: string; status: string }[] }>(b.url, MACHINES, {}, as(KEYS.alice, { 'state-position': position }));
    expect(res.data!.machines.find((m) => m.id === machine)?.status).toBe('RESERVED');
    await until(async () => (await statusOf(b.url, KEYS.carol, machine)) === 'RESERVED', "gateway B's cache to hear of A's write");
  });
});
