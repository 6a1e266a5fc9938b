import { execute, parse } from 'graphql';
import { beforeAll, describe, expect, it } from 'vitest';
import { OffsetClock } from '../../../platform/clock.js';
import { SCOPES, type Principal } from '../../../platform/principal.js';
import { stateExtension, StateTrace, traceRequest, traceStateAccess, type StateExtension } from '../../../platform/state-trace.js';
import type { SubgraphInstance } from '../../../platform/subgraph.js';
import { rental } from '../../../subgraphs/rental/index.js';
import { TOPICS } from '../../../subgraphs/rental/records.js';
import { RentalStore } from '../../../subgraphs/rental/store.js';
import { hoursFromNow } from '../../support/http.js';
import { startTestServer, type TestServer } from '../../support/server.js';

/*
 * The rental subgraph's state as the gateways' caches see it (platform/state-trace.ts): every write appends
 * events tagged with the rows and owners it changed (the database handle refuses any other), and every read
 * says which rows it depends on, who may share it, and, where the clock moves it, until when it holds: a
 * reservation's expiry for the fleet, a quote's for its status, one tracker tick for a delivery.
 */

const TTL_S = 60;
const TICK_MS = 2000;

const tenantPrincipal = (tenant: string, id = `app-${tenant}`): Principal => ({
  id,
  tenant,
  scopes: SCOPES.filter((s) => s !== 'ops:admin'),
});
const A = tenantPrincipal('tenant-a');
const A2 = tenantPrincipal('tenant-a', 'second-app-a');

interface Answer {
  data: Record<string, any> | null | undefined;
  errors: readonly unknown[] | undefined;
  state: StateExtension | null;
}

describe('rental state: tagged writes, narrow reads, bounded by the clock', () => {
  let server: TestServer;
  let subgraph: SubgraphInstance;
  const clock = new OffsetClock();

  /** One request to the rental subgraph as the gateway makes it, with what it read and wrote. */
  const ask = async (query: string, variables: Record<string, unknown> = {}, principal: Principal = A): Promise<Answer> => {
    const trace = new StateTrace();
    const contextValue = subgraph.context({ headers: {}, principal });
    const result = await traceRequest(trace, () => execute({ schema: subgraph.schema, document: parse(query), variableValues: variables, contextValue }));
    // Every answer names the database it came from; what else it says is what these tests judge.
    const { lineage, ...state } = stateExtension(trace) ?? {};
    if (lineage !== undefined) expect(lineage).toMatch(/^[0-9a-f-]{36}$/);
    return { data: result.data as Record<string, any> | null | undefined, errors: result.errors, state: Object.keys(state).length > 0 ? state : null };
  };
  const ok = async (query: string, variables?: Record<string, unknown>, principal?: Principal) => {
    const answer = await ask(query, variables, principal);
    expect(answer.errors).toBeUndefined();
    return answer;
  };
  /** The tags of the events after `after`, by topic and key. */
  const eventsAfter = async (after: string) =>
    (
      await server.db.query<{ topic: string; key: string | null; tags: string[] }>(
        'SELECT topic, key, tags FROM outbox WHERE id > $1::bigint ORDER BY outbox.id',
        [after],
      )
    ).rows;
  const newest = async () => (await server.db.query<{ id: string }>('SELECT coalesce(max(id), 0)::text AS id FROM outbox')).rows[0]!.id;

  const quote = (machineIds: string[], principal: Principal = A) =>
    ok(
      'mutation($i: CreateQuoteInput!) { createQuote(input: $i) { id expiresAt } }',
      { i: { machineIds, locationId: 'LOC-001', startTime: hoursFromNow(48, clock.now().getTime()), durationHours: 2 } },
      principal,
    );
  const confirm = (quoteId: string, principal: Principal = A) =>
    ok('mutation($i: ConfirmBookingInput!) { confirmBooking(input: $i) { id } }', { i: { quoteId, customerName: 'Matrix BV' } }, principal);

  beforeAll(async () => {
    // No sweeper within the test: a reservation past its expiry is released by the read that shows it.
    server = await startTestServer({
      clock,
      env: { QUOTE_TTL_SECONDS: String(TTL_S), QUOTE_SWEEP_INTERVAL_MS: '600000', TRACKING_TICK_MS: String(TICK_MS) },
    });
    subgraph = server.subgraphs.get('rental')!;
  });

  it('the signing key is stored with an event tagged with it, and the published keys depend on the keys alone', async () => {
    const stored = await server.db.query<{ kid: string; tags: string[] }>(
      `SELECT k.kid, o.tags FROM rental_signing_keys k JOIN outbox o ON o.topic = $1 AND o.key = k.kid`,
      [TOPICS.signingKey],
    );
    expect(stored.rows.length).toBeGreaterThan(0);
    for (const row of stored.rows) expect(row.tags).toEqual(['SigningKey', `SigningKey:${row.kid}`]);
    const keys = await ok('{ quoteSigningKeys { kid } }');
    expect(keys.state).toEqual({ tags: ['SigningKey'], grain: 'everyone' });
  });

  it('a quote, its confirmation and its completion append events tagged with the machines, quote, booking and owner they changed', async () => {
    let from = await newest();
    const q = await quote(['EQ-001']);
    const quoteId = q.data!['createQuote'].id as string;
    const quoteTags = ['Quote', `Quote:${quoteId}`, 'Quote@tenant-a'];
    expect(await eventsAfter(from)).toEqual([
      { topic: TOPICS.machineStatus, key: 'EQ-001', tags: ['Machine', 'Machine:EQ-001', ...quoteTags] },
      { topic: TOPICS.fleetSummary, key: null, tags: ['Machine'] },
    ]);
    // The answer says where its write is in the log, and what it changed.
    expect(q.state?.position).toBe(await newest());
    expect(new Set(q.state?.changed)).toEqual(new Set(['Machine', 'Machine:EQ-001', ...quoteTags]));

    from = await newest();
    const b = await confirm(quoteId);
    const bookingId = b.data!['confirmBooking'].id as string;
    const bookingTags = ['Booking', `Booking:${bookingId}`, 'Booking@tenant-a'];
    expect(await eventsAfter(from)).toEqual([
      { topic: TOPICS.machineStatus, key: 'EQ-001', tags: ['Machine', 'Machine:EQ-001', ...quoteTags, ...bookingTags] },
      { topic: TOPICS.fleetSummary, key: null, tags: ['Machine'] },
      { topic: TOPICS.booking, key: bookingId, tags: bookingTags },
      // A tracking update is a publication: it changes nothing an answer reads.
      { topic: TOPICS.tracking, key: bookingId, tags: [] },
    ]);

    from = await newest();
    await ok('mutation($id: ID!) { completeBooking(bookingId: $id) { id } }', { id: bookingId });
    expect(await eventsAfter(from)).toEqual([
      { topic: TOPICS.machineStatus, key: 'EQ-001', tags: ['Machine', 'Machine:EQ-001', ...bookingTags] },
      { topic: TOPICS.fleetSummary, key: null, tags: ['Machine'] },
      { topic: TOPICS.booking, key: bookingId, tags: bookingTags },
      { topic: TOPICS.tracking, key: bookingId, tags: [] },
    ]);
  });

  it('a confirm of a quote that is not active writes nothing and is answered as before', async () => {
    const from = await newest();
    const gone = await ask('mutation($i: ConfirmBookingInput!) { confirmBooking(input: $i) { id } }', {
      i: { quoteId: '00000000-0000-4000-8000-000000000000', customerName: 'Matrix BV' },
    });
    expect((gone.errors?.[0] as { extensions?: { code?: string } }).extensions?.code).toBe('NOT_FOUND');
    expect(await eventsAfter(from)).toEqual([]);
  });

  it('the fleet, the machines and one machine depend on the machines for everyone, until the earliest reservation shown expires', async () => {
    const q = await quote(['EQ-002']);
    const expiresAt = Date.parse(q.data!['createQuote'].expiresAt as string);

    // The same answer for every tenant: read from the machines alone, never the quotes behind them.
    for (const principal of [A, tenantPrincipal('tenant-b')]) {
      expect((await ok('{ fleetSummary { available reserved inUse } }', {}, principal)).state).toEqual({
        tags: ['Machine'],
        grain: 'everyone',
        validUntil: expiresAt,
      });
      expect((await ok('{ machines { id status } }', {}, principal)).state).toEqual({ tags: ['Machine'], grain: 'everyone', validUntil: expiresAt });
    }
    expect((await ok('{ machine(id: "EQ-002") { id status } }')).state).toEqual({ tags: ['Machine:EQ-002'], grain: 'everyone', validUntil: expiresAt });
    // A machine no reservation holds does not move with the clock: kept until it is written.
    expect((await ok('{ machine(id: "EQ-003") { id status depot { id } } }')).state).toEqual({ tags: ['Machine:EQ-003'], grain: 'everyone' });
  });

  it("a quote's status holds until it expires; past it, the read that shows it releases its machines, with their events", async () => {
    const q = await quote(['EQ-004']);
    const quoteId = q.data!['createQuote'].id as string;
    const expiresAt = Date.parse(q.data!['createQuote'].expiresAt as string);
    const read = await ok('query($id: ID!) { quote(id: $id) { status machines { id status } } }', { id: quoteId });
    expect(read.data!['quote']).toEqual({ status: 'ACTIVE', machines: [{ id: 'EQ-004', status: 'RESERVED' }] });
    expect(read.state).toEqual({ tags: [`Quote:${quoteId}`, 'Machine:EQ-004'], grain: 'tenant', validUntil: expiresAt });

    clock.advance(TTL_S * 1000 + 1000);
    const from = await newest();
    const machine = await ok('{ machine(id: "EQ-004") { id status } }');
    expect(machine.data!['machine']).toEqual({ id: 'EQ-004', status: 'AVAILABLE' });
    const released = await eventsAfter(from);
    expect(released).toContainEqual({
      topic: TOPICS.machineStatus,
      key: 'EQ-004',
      tags: ['Machine', 'Machine:EQ-004', 'Quote', `Quote:${quoteId}`, 'Quote@tenant-a'],
    });
    expect(machine.state?.position).toBe(await newest());
    expect(machine.state?.changed).toContain(`Quote:${quoteId}`);

    const after = await ok('query($id: ID!) { quote(id: $id) { status } }', { id: quoteId });
    expect(after.data!['quote']).toEqual({ status: 'EXPIRED' });
    // Expired for good: kept until the quote is written.
    expect(after.state).toEqual({ tags: [`Quote:${quoteId}`], grain: 'tenant' });
    // Nothing reserved any more: the fleet holds until it is written.
    expect((await ok('{ fleetSummary { reserved } }')).state).toEqual({ tags: ['Machine'], grain: 'everyone' });
  });

  it("a tenant's ledger depends on that tenant's bookings, for every principal of it; a delivery on its booking, one tick at most", async () => {
    const q = await quote(['EQ-005']);
    const bookingId = (await confirm(q.data!['createQuote'].id as string)).data!['confirmBooking'].id as string;
    for (const principal of [A, A2]) {
      const page = await ok('{ bookings(first: 5) { totalCount edges { node { id status machines { id } } } } }', {}, principal);
      expect(page.state).toMatchObject({ tags: expect.arrayContaining(['Booking@tenant-a']), grain: 'tenant' });
      expect(page.state?.tags?.filter((t) => t.startsWith('Booking'))).toEqual(['Booking@tenant-a']);
      expect(page.state?.validUntil).toBeUndefined();
    }

    const now = clock.now().getTime();
    const delivery = await ok('query($id: ID!) { booking(id: $id) { id status tracking { status eta minutesRemaining legs { status } } } }', {
      id: bookingId,
    });
    expect(delivery.state?.tags).toEqual([`Booking:${bookingId}`]);
    expect(delivery.state?.grain).toBe('tenant');
    expect(delivery.state?.validUntil).toBeGreaterThan(now);
    expect(delivery.state?.validUntil).toBeLessThanOrEqual(now + TICK_MS + 1000);

    // Completed: the tracking no longer moves with the clock.
    await ok('mutation($id: ID!) { completeBooking(bookingId: $id) { id } }', { id: bookingId });
    const done = await ok('query($id: ID!) { tracking(bookingId: $id) { status minutesRemaining } }', { id: bookingId });
    expect(done.data!['tracking']).toEqual({ status: 'COMPLETED', minutesRemaining: 0 });
    expect(done.state).toEqual({ tags: [`Booking:${bookingId}`], grain: 'tenant' });
  });

  it('the event cursor is never kept', async () => {
    expect((await ok('{ eventCursor }')).state?.uncacheable).toMatch(/outbox/);
  });

  it("the tracker's writes pass the state check: a plan forecast again is announced tagged with its booking, a publication untagged", async () => {
    const q = await quote(['EQ-006']);
    const bookingId = (await confirm(q.data!['createQuote'].id as string)).data!['confirmBooking'].id as string;
    // The store as the subgraph has it: its writes held to their events.
    const store = await RentalStore.open(traceStateAccess(server.db, rental.state!, 'rental_', 'rental-test-lineage'));
    const [booking] = (await store.activeTrackedBookings()).filter((b) => b.id === bookingId);
    const legs = booking!.legs.map((leg) => ({ ...leg, arriveAt: new Date(Date.parse(leg.arriveAt) + 60_000).toISOString() }));

    let from = await newest();
    expect(await store.replanLegs(booking!, legs, null, clock.now())).toBe(true);
    const owner = ['Booking', `Booking:${bookingId}`, 'Booking@tenant-a'];
    expect(await eventsAfter(from)).toEqual([{ topic: TOPICS.deliveryPlan, key: bookingId, tags: owner }]);
    // The plan read is stale now: another rewrite of it is refused, with nothing written.
    from = await newest();
    expect(await store.replanLegs(booking!, legs, null, clock.now())).toBe(false);
    expect(await eventsAfter(from)).toEqual([]);

    const [replanned] = (await store.activeTrackedBookings()).filter((b) => b.id === bookingId);
    from = await newest();
    const payload = {
      bookingId,
      status: 'dispatched' as const,
      latitude: 0,
      longitude: 0,
      eta: legs[0]!.arriveAt,
      minutesRemaining: 1,
      distanceRemainingKm: 1,
      at: clock.now().toISOString(),
    };
    expect(await store.claimTracking(replanned!, 'dispatched', [payload], clock.now())).toBe(true);
    expect(await eventsAfter(from)).toEqual([{ topic: TOPICS.tracking, key: bookingId, tags: [] }]);
  });
});
