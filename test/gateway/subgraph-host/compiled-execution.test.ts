import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setCompiledSubgraphExecution, subgraphExecutionCounts } from '../../../gateway/sources/in-process-data-source.js';
import { gql, hoursFromNow } from '../../support/http.js';
import { signedSubgraphCall, startTestServer, type TestServer } from '../../support/server.js';

/*
 * A subgraph server runs its callers' documents compiled by graphql-jit, as the gateway runs a subgraph in
 * process; graphql-js answers introspection and everything with SUBGRAPH_COMPILED_EXECUTION=false. The two
 * must give the same answers, status and body, errors included.
 */
describe('a subgraph server executes compiled', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ mode: 'distributed' });
    // Two bookings through the gateway, so the ledger has rows, machines and bills to answer.
    for (const [machineIds, locationId] of [
      [['EQ-002', 'EQ-006'], 'LOC-004'],
      [['EQ-004'], 'LOC-002'],
    ] as const) {
      const quote = await gql(server.url, 'mutation($input: CreateQuoteInput!) { createQuote(input: $input) { id } }', {
        input: { machineIds, locationId, startTime: hoursFromNow(6), durationHours: 8 },
      });
      const booked = await gql(server.url, 'mutation($q: ID!) { confirmBooking(input: { quoteId: $q, customerName: "Compiled BV" }) { id } }', {
        q: quote.data!['createQuote'].id,
      });
      expect(booked.errors).toBeUndefined();
    }
  });
  afterAll(async () => {
    setCompiledSubgraphExecution(true);
    await server?.close();
  });

  const call = async (query: string, variables?: Record<string, unknown>) => {
    const res = await signedSubgraphCall(server, 'rental', JSON.stringify({ query, variables }));
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };

  const LEDGER = `query Ledger($first: Int!) { bookings(first: $first) { totalCount pageInfo { hasNextPage endCursor }
    edges { cursor node { __typename id status customerName location { id name } machines { id name category hourlyRate depot { id } }
    bill { currency quotedAmount finalAmount closed } } } } }`;
  const documents: { name: string; query: string; variables?: Record<string, unknown>; compiled: boolean }[] = [
    { name: 'a ledger page', query: LEDGER, variables: { first: 5 }, compiled: true },
    {
      name: 'a booking that does not exist',
      query: 'query($id: ID!) { booking(id: $id) { id status } }',
      variables: { id: 'no-such-booking' },
      compiled: true,
    },
    { name: 'a bad page size', query: LEDGER, variables: { first: 0 }, compiled: true },
    { name: 'a variable of the wrong type', query: LEDGER, variables: { first: 'many' }, compiled: true },
    { name: 'the subgraph SDL', query: '{ _service { sdl } }', compiled: true },
    { name: 'introspection', query: '{ __schema { queryType { name } } __type(name: "Booking") { name } }', compiled: false },
    { name: 'a subscription over HTTP', query: 'subscription { fleetSummaryChanged { reserved } }', compiled: false },
  ];

  it.each(documents)('$name: the same answer compiled and by graphql-js', async ({ query, variables, compiled }) => {
    setCompiledSubgraphExecution(true);
    const before = { ...subgraphExecutionCounts };
    const fast = await call(query, variables);
    const ran = { compiled: subgraphExecutionCounts.compiled - before.compiled, interpreted: subgraphExecutionCounts.interpreted - before.interpreted };
    setCompiledSubgraphExecution(false);
    const plain = await call(query, variables);
    setCompiledSubgraphExecution(true);
    expect(fast).toEqual(plain);
    // A request refused before execution (variables that do not coerce) runs neither.
    if (fast.status === 200) expect(ran).toEqual(compiled ? { compiled: 1, interpreted: 0 } : { compiled: 0, interpreted: 1 });
  });

  it('answers a ledger page with its rows, machines and bills', async () => {
    const { status, body } = await call(LEDGER, { first: 3 });
    expect(status).toBe(200);
    const bookings = (body['data'] as { bookings: { totalCount: number; edges: { node: { customerName: string; machines: unknown[]; bill: unknown } }[] } })
      .bookings;
    expect(bookings.totalCount).toBe(2);
    expect(bookings.edges.map((e) => [e.node.customerName, e.node.machines.length, e.node.bill !== null])).toEqual([
      ['Compiled BV', 1, true],
      ['Compiled BV', 2, true],
    ]);
  });
});
