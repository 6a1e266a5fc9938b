import { execute, parse } from 'graphql';
import { beforeAll, describe, expect, it } from 'vitest';
import { OffsetClock } from '../../../platform/clock.js';
import type { SubgraphInstance } from '../../../platform/subgraph.js';
import { gql, hoursFromNow } from '../../support/http.js';
import { startTestServer, targets } from '../../support/server.js';
import { SYSTEM_PRINCIPAL } from '../../../platform/principal.js';

const QUOTE = `mutation($input: CreateQuoteInput!) {
  createQuote(input: $input) {
    id status utilization surgeMultiplier leadTimeFactor total subtotal deliveryTotal expiresAt signature
    machines { id status }
    lineItems { machine { id } hourlyRate hours surgeMultiplier leadTimeFactor amount }
    deliveries { depot { id } distanceKm amount }
  }
}`;

describe.each(targets)('rental over GraphQL ($name)', ({ backend, mode }) => {
  let url: string;
  let rental: SubgraphInstance;
  const clock = new OffsetClock();

  beforeAll(async () => {
    const server = await startTestServer({ backend, mode, clock });
    url = server.url;
    rental = server.subgraphs.get('rental')!;
  });

  const createQuote = (machineIds: string[], hours = 4) =>
    gql(url, QUOTE, {
      input: { machineIds, locationId: 'LOC-003', startTime: hoursFromNow(hours, clock.now().getTime()), durationHours: 10 },
    });

  it('serves the catalogue, locations and the fleet summary', async () => {
    const res = await gql(
      url,
      `{ machines { id name category hourlyRate status depot { id coordinates { latitude longitude } } }
      locations { id name } fleetSummary { available reserved inUse total utilization surgeMultiplier } }`,
    );
    expect(res.errors).toBeUndefined();
    expect(res.data!['machines']).toHaveLength(15);
    expect(res.data!['machines'][7]).toMatchObject({ id: 'EQ-008', category: 'CRANE', hourlyRate: 185, status: 'AVAILABLE' });
    expect(res.data!['fleetSummary']).toEqual({ available: 15, reserved: 0, inUse: 0, total: 15, utilization: 0, surgeMultiplier: 1 });
  });

  it('runs the whole flow: quote, confirm, tracking, complete, ledger', async () => {
    const q = await createQuote(['EQ-009', 'EQ-010']);
    expect(q.errors).toBeUndefined();
    const quote = q.data!['createQuote'];
    expect(quote.status).toBe('ACTIVE');
    expect(quote.machines).toEqual([
      { id: 'EQ-009', status: 'RESERVED' },
      { id: 'EQ-010', status: 'RESERVED' },
    ]);
    expect(quote.lineItems.map((l: { amount: number }) => l.amount).reduce((a: number, b: number) => a + b, 0)).toBeCloseTo(quote.subtotal, 2);

    const confirm = await gql(
      url,
      `mutation($input: ConfirmBookingInput!) { confirmBooking(input: $input) {
        id status customerName quote { id status } machines { id status } tracking { status eta } } }`,
      { input: { quoteId: quote.id, customerName: 'Bouwbedrijf Zuidas' } },
    );
    expect(confirm.errors).toBeUndefined();
    const booking = confirm.data!['confirmBooking'];
    expect(booking).toMatchObject({ status: 'CONFIRMED', quote: { id: quote.id, status: 'CONFIRMED' } });
    expect(booking.machines.every((m: { status: string }) => m.status === 'IN_USE')).toBe(true);

    const read = await gql(
      url,
      `query($id: ID!, $b: ID!) { quote(id: $id) { booking { id } } booking(id: $b) { id bill { closed quotedAmount } }
      tracking(bookingId: $b) { bookingId status legs { depot { id } status } } }`,
      { id: quote.id, b: booking.id },
    );
    expect(read.data!['quote'].booking.id).toBe(booking.id);
    expect(read.data!['booking'].bill).toEqual({ closed: false, quotedAmount: quote.total });
    expect(read.data!['tracking'].legs).toHaveLength(1);

    const done = await gql(
      url,
      `mutation($id: ID!) { completeBooking(bookingId: $id) { status completedAt
      bill { closed finalAmount billableHours } machines { status } tracking { status minutesRemaining } } }`,
      { id: booking.id },
    );
    expect(done.errors).toBeUndefined();
    expect(done.data!['completeBooking']).toMatchObject({
      status: 'COMPLETED',
      bill: { closed: true, finalAmount: quote.total, billableHours: 10 },
      tracking: { status: 'COMPLETED', minutesRemaining: 0 },
    });

    const ledger = await gql(url, '{ bookings(first: 10) { totalCount edges { cursor node { id status } } pageInfo { hasNextPage endCursor } } }');
    expect(ledger.data!['bookings'].edges[0].node).toEqual({ id: booking.id, status: 'COMPLETED' });
  });

  it('errors carry catalogue codes: CONFLICT, NOT_FOUND, GONE, BAD_USER_INPUT', async () => {
    const held = await createQuote(['EQ-011']);
    expect(held.errors).toBeUndefined();
    const conflict = await createQuote(['EQ-011']);
    expect(conflict.errors?.[0]?.extensions?.['code']).toBe('CONFLICT');

    const missing = await gql(url, `mutation { confirmBooking(input: { quoteId: "00000000-0000-4000-8000-000000000000", customerName: "x" }) { id } }`);
    expect(missing.errors?.[0]?.extensions?.['code']).toBe('NOT_FOUND');

    const bad = await gql(url, QUOTE, { input: { machineIds: [], locationId: 'LOC-001', startTime: hoursFromNow(2), durationHours: 0 } });
    expect(bad.errors?.[0]?.extensions?.['code']).toBe('BAD_USER_INPUT');
    expect(bad.errors?.[0]?.extensions?.['fields'].map((f: { field: string }) => f.field).sort()).toEqual(['durationHours', 'machineIds']);

    const badDate = await gql(url, QUOTE, { input: { machineIds: ['EQ-001'], locationId: 'LOC-001', startTime: '22/11/2026', durationHours: 2 } });
    expect(badDate.errors?.[0]?.extensions?.['code']).toBe('BAD_USER_INPUT');

    clock.advance(125_000);
    const gone = await gql(url, `mutation($q: ID!) { confirmBooking(input: { quoteId: $q, customerName: "x" }) { id } }`, {
      q: held.data!['createQuote'].id,
    });
    expect(gone.errors?.[0]?.extensions?.['code']).toBe('GONE');
    const quote = await gql(url, 'query($q: ID!) { quote(id: $q) { status machines { id status } } }', { q: held.data!['createQuote'].id });
    expect(quote.data!['quote']).toEqual({ status: 'EXPIRED', machines: [{ id: 'EQ-011', status: 'AVAILABLE' }] });
  });

  it('resolves Machine, Quote and Booking entities by key (_entities)', async () => {
    const q = await createQuote(['EQ-012']);
    const quoteId = q.data!['createQuote'].id;
    const b = await gql(url, `mutation($q: ID!) { confirmBooking(input: { quoteId: $q, customerName: "Entity BV" }) { id } }`, { q: quoteId });
    const bookingId = b.data!['confirmBooking'].id;
    const result = await execute({
      schema: rental.schema,
      document: parse(`query($r: [_Any!]!) { _entities(representations: $r) {
        ... on Machine { id status } ... on Quote { id status } ... on Booking { id customerName } } }`),
      variableValues: {
        r: [
          { __typename: 'Machine', id: 'EQ-012' },
          { __typename: 'Quote', id: quoteId },
          { __typename: 'Booking', id: bookingId },
          { __typename: 'Booking', id: 'BK-UNKNOWN' },
        ],
      },
      contextValue: rental.context({ headers: {}, principal: SYSTEM_PRINCIPAL }),
    });
    expect(result.errors).toBeUndefined();
    expect(result.data!['_entities']).toEqual([
      { id: 'EQ-012', status: 'IN_USE' },
      { id: quoteId, status: 'CONFIRMED' },
      { id: bookingId, customerName: 'Entity BV' },
      null,
    ]);
  });

  it('prices the same state the same way (deterministic)', async () => {
    const at = clock.now().getTime();
    const input = { machineIds: ['EQ-013'], locationId: 'LOC-006', startTime: hoursFromNow(30, at), durationHours: 6 };
    const a = await gql(url, QUOTE, { input });
    // Release it: advance past expiry so the fleet returns to the same state.
    clock.advance(121_000);
    const b = await gql(url, QUOTE, { input });
    const pick = (r: typeof a) => {
      const {
        id: _id,
        expiresAt: _e,
        signature: _s,
        leadTimeFactor: _l,
        total: _t,
        subtotal: _st,
        leadTimeHours: _h,
        lineItems,
        ...rest
      } = r.data!['createQuote'];
      return { ...rest, lineItems: lineItems.map((l: { surgeMultiplier: number; hourlyRate: number }) => [l.hourlyRate, l.surgeMultiplier]) };
    };
    expect(pick(b)).toEqual(pick(a));
  });
});
