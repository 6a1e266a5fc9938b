import type { GraphQLDataSource, GraphQLDataSourceProcessOptions } from '@apollo/gateway';
import type { GatewayGraphQLResponse } from '@apollo/server-gateway-interface';
import { describe, expect, it } from 'vitest';
import { copyJson } from '../../../gateway/sources/json-copy.js';
import { collapsing } from '../../../gateway/sources/collapse.js';
import type { GatewayContext } from '../../../gateway/pipeline/context.js';
import { hoursFromNow, rest } from '../../support/http.js';
import { startTestServer } from '../../support/server.js';
import { DEMO_PRINCIPAL, type Principal } from '../../../platform/principal.js';

/** A subgraph stand-in whose answers are released by the test. */
function heldSource() {
  const calls: { query: string; release(r: GatewayGraphQLResponse): void; fail(e: Error): void }[] = [];
  const source: GraphQLDataSource<GatewayContext> = {
    process: (options) =>
      new Promise<GatewayGraphQLResponse>((resolve, reject) => {
        calls.push({ query: options.request.query ?? '', release: resolve, fail: reject });
      }),
  };
  return { source, calls };
}

const fetchOf = (
  query: string,
  variables: Record<string, unknown> = {},
  headers: Record<string, string | undefined> = {},
  principal: Principal = DEMO_PRINCIPAL,
) =>
  ({
    request: { query, variables },
    context: { headers, principal },
    incomingRequestContext: {},
  }) as unknown as GraphQLDataSourceProcessOptions<GatewayContext>;

describe('identical subgraph reads in flight', () => {
  it('never join across an eviction of the state cache: a read after a write is not answered by a fetch from before it', async () => {
    const { source, calls } = heldSource();
    let epoch = 7;
    const collapsed = collapsing(
      source,
      () => undefined,
      () => epoch,
    );
    const q = 'query { machines { id status } }';
    const first = collapsed.process(fetchOf(q));
    // A write is answered (or its event read): what the first fetch may have read is no longer current.
    epoch += 1;
    const second = collapsed.process(fetchOf(q));
    expect(calls).toHaveLength(2);
    // Within one epoch they collapse again.
    const third = collapsed.process(fetchOf(q));
    expect(calls).toHaveLength(2);
    calls[0]!.release({ data: { machines: [{ id: 'EQ-001', status: 'AVAILABLE' }] } });
    calls[1]!.release({ data: { machines: [{ id: 'EQ-001', status: 'RESERVED' }] } });
    expect((await first).data).toEqual({ machines: [{ id: 'EQ-001', status: 'AVAILABLE' }] });
    expect((await second).data).toEqual({ machines: [{ id: 'EQ-001', status: 'RESERVED' }] });
    expect((await third).data).toEqual({ machines: [{ id: 'EQ-001', status: 'RESERVED' }] });
  });

  it('are made once; every caller gets its own copy of the answer', async () => {
    const { source, calls } = heldSource();
    let joined = 0;
    const collapsed = collapsing(source, () => joined++);
    const q = 'query { machines { id status } }';
    const answers = [
      collapsed.process(fetchOf(q, {}, { 'x-request-id': 'a' })),
      collapsed.process(fetchOf(q, {}, { 'x-request-id': 'b' })),
      collapsed.process(fetchOf(q)),
    ];
    expect(calls).toHaveLength(1);
    expect(joined).toBe(2);
    calls[0]!.release({ data: { machines: [{ id: 'EQ-001', status: 'AVAILABLE' }] } });
    const [a, b, c] = await Promise.all(answers);
    expect(b).toEqual(a);
    expect(c).toEqual(a);
    // The gateway merges answers into its result in place: no two callers may share an object.
    (a!.data as { machines: { status: string }[] }).machines[0]!.status = 'CHANGED';
    expect((b!.data as { machines: { status: string }[] }).machines[0]!.status).toBe('AVAILABLE');
    expect(b!.data).not.toBe(c!.data);
    // Nothing is cached: the next read is made again.
    const later = collapsed.process(fetchOf(q));
    expect(calls).toHaveLength(2);
    calls[1]!.release({ data: { machines: [] } });
    expect(await later).toEqual({ data: { machines: [] } });
  });

  it('are not collapsed across documents, variables, headers or principals that change an answer; mutations never', async () => {
    const { source, calls } = heldSource();
    const collapsed = collapsing(source);
    const q = 'query($id: ID!) { machine(id: $id) { id } }';
    const pending = [
      collapsed.process(fetchOf(q, { id: 'EQ-001' })),
      collapsed.process(fetchOf(q, { id: 'EQ-002' })),
      collapsed.process(fetchOf('query { fleetSummary { total } }')),
      collapsed.process(fetchOf(q, { id: 'EQ-001' }, { 'idempotency-key': 'k1' })),
      // Another principal: what it may see differs, so its reads are its own.
      collapsed.process(fetchOf(q, { id: 'EQ-001' }, {}, { id: 'app-b', tenant: 'tenant-b', scopes: ['fleet:read'] })),
      collapsed.process(fetchOf('mutation { completeBooking(id: "B") { id } }')),
      collapsed.process(fetchOf('mutation { completeBooking(id: "B") { id } }')),
    ];
    expect(calls).toHaveLength(7);
    for (const call of calls) call.release({ data: {} });
    await Promise.all(pending);
  });

  it('share a failure with every caller, and the next read is made afresh', async () => {
    const { source, calls } = heldSource();
    const collapsed = collapsing(source);
    const q = 'query { fleetSummary { total } }';
    const first = collapsed.process(fetchOf(q));
    const second = collapsed.process(fetchOf(q));
    calls[0]!.fail(new Error('connection reset'));
    await expect(first).rejects.toThrow('connection reset');
    await expect(second).rejects.toThrow('connection reset');
    const third = collapsed.process(fetchOf(q));
    expect(calls).toHaveLength(2);
    calls[1]!.release({ data: { fleetSummary: { total: 15 } } });
    expect(await third).toEqual({ data: { fleetSummary: { total: 15 } } });
  });

  it('through the gateway: concurrent identical federated queries all get the one right answer', async () => {
    const server = await startTestServer({ mode: 'distributed' });
    for (const [i, machine] of ['EQ-011', 'EQ-012'].entries()) {
      const quote = await rest(server.url, 'POST', '/rental/pricing/quote', {
        machine_ids: [machine],
        location_id: 'LOC-002',
        start_time: hoursFromNow(20 + i),
        duration_hours: 3,
      });
      expect((await rest(server.url, 'POST', '/rental/booking/confirm', { quote_id: quote.body['quote_id'], customer_name: `C${i}` })).status).toBe(200);
    }
    const query = JSON.stringify({
      query: '{ bookings(first: 10) { edges { node { id machines { id status } deliveryForecast { q10Minutes q50Minutes q90Minutes } } } } }',
    });
    const post = () => fetch(`${server.url}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: query }).then((r) => r.json());
    const alone = await post();
    const together = await Promise.all(Array.from({ length: 20 }, post));
    for (const answer of together) expect(answer).toEqual(alone);
    // Every logical fetch is either made (and timed) or collapsed: none lost, none counted twice.
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    const total = (name: string) =>
      metrics
        .split('\n')
        .filter((l) => l.startsWith(name))
        .reduce((sum, l) => sum + Number(l.split(' ').pop()), 0);
    const made = total('subgraph_fetch_duration_seconds_count');
    const collapsed = total('subgraph_fetches_collapsed_total');
    // Forecasts already fetched are answered from the gateway's fetch cache (gateway/sources/fetch-cache.ts).
    const kept = metrics
      .split('\n')
      .filter((l) => l.startsWith('subgraph_fetch_cache_reads_total') && l.includes('result="hit"'))
      .reduce((sum, l) => sum + Number(l.split(' ').pop()), 0);
    // 21 operations of two fetches each (the ledger page, then its forecasts), plus the health checks made.
    expect(made + collapsed + kept).toBeGreaterThanOrEqual(42);
    console.log(`collapse: ${collapsed} of ${made + collapsed + kept} fetches joined one in flight, ${kept} answered from the fetch cache`);
    await server.close();
  }, 180_000);
});

describe('the copy each joined caller gets', () => {
  it('is what a JSON round trip gives, sharing nothing, own __proto__ keys kept', () => {
    const answer = JSON.parse('{"data":{"a":[1,{"b":null,"c":"x"}],"__proto__":{"d":true}},"errors":[{"message":"m","path":["a",0]}]}') as Record<
      string,
      unknown
    >;
    const copy = copyJson(answer);
    expect(JSON.stringify(copy)).toBe(JSON.stringify(answer));
    expect(copy).toEqual(JSON.parse(JSON.stringify(answer)));
    const data = copy['data'] as Record<string, unknown>;
    expect(Object.prototype.hasOwnProperty.call(data, '__proto__')).toBe(true);
    expect(Object.getPrototypeOf(data)).toBe(Object.prototype);
    (data['a'] as unknown[])[0] = 2;
    expect(((answer['data'] as Record<string, unknown>)['a'] as unknown[])[0]).toBe(1);
    expect(copyJson({ kept: 1, dropped: undefined })).toEqual({ kept: 1 });
  });
});
