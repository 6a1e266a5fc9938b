import type { GraphQLDataSource, GraphQLDataSourceProcessOptions } from '@apollo/gateway';
import type { GatewayGraphQLResponse } from '@apollo/server-gateway-interface';
import { describe, expect, it } from 'vitest';
import type { GatewayContext } from '../../../gateway/pipeline/context.js';
import { FetchCache, pureClassifier } from '../../../gateway/sources/fetch-cache.js';
import { bonding } from '../../../subgraphs/bonding/index.js';
import { prediction } from '../../../subgraphs/prediction/index.js';
import { gql, hoursFromNow, rest } from '../../support/http.js';
import { startTestServer } from '../../support/server.js';

const fetchOf = (query: string, variables: Record<string, unknown> = {}) =>
  ({ request: { query, variables }, context: { headers: {} }, incomingRequestContext: {} }) as unknown as GraphQLDataSourceProcessOptions<GatewayContext>;

/** A subgraph stand-in that counts its calls and answers with `answer(call number)`. */
function countingSource(answer: (n: number) => GatewayGraphQLResponse = (n) => ({ data: { n } })) {
  let calls = 0;
  const source: GraphQLDataSource<GatewayContext> = { process: async () => answer(++calls) };
  return { source, calls: () => calls };
}

const TRAVEL = 'query($input: TravelInput!) { predictTravelTime(input: $input) { q50Minutes } }';

describe('which subgraph reads are pure', () => {
  const isPrediction = pureClassifier(prediction.pure!);
  const isBonding = pureClassifier(bonding.pure!);

  it('every prediction query, and its Booking forecasts from the representation', () => {
    expect(isPrediction(TRAVEL)).toBe(true);
    expect(isPrediction('{ predictionModels { seed travel { version } } __typename }')).toBe(true);
    expect(isPrediction('query($r: [_Any!]!) { _entities(representations: $r) { ... on Booking { deliveryForecast { q50Minutes } } } }')).toBe(true);
  });

  it('a bonding path recommendation, but not with its measured time, and never session state', () => {
    expect(isBonding('{ recommendPaths(paths: []) { feasible pair { a b } } }')).toBe(true);
    expect(isBonding('{ recommendPaths(paths: []) { feasible elapsedMs } }')).toBe(false);
    expect(isBonding('{ recommendPaths(paths: []) { feasible } bondingOverview { open } }')).toBe(false);
    expect(isBonding('query($r: [_Any!]!) { _entities(representations: $r) { ... on BondingSession { state } } }')).toBe(false);
  });

  it('never a mutation, a subscription, fragments at the root or a document that does not parse', () => {
    const all = pureClassifier({ query: 'all', entities: ['Booking'] });
    expect(all('mutation { predictTravelTime { q50Minutes } }')).toBe(false);
    expect(all('subscription { predictTravelTime { q50Minutes } }')).toBe(false);
    expect(all('{ ... on Query { predictTravelTime { q50Minutes } } }')).toBe(false);
    expect(all('{ predictTravelTime(')).toBe(false);
    expect(all('query A { x } query B { y }')).toBe(false);
  });
});

describe('the gateway fetch cache', () => {
  it('fetches a pure read once and gives every caller its own copy; other variables are another read', async () => {
    const cache = new FetchCache({ maxBytes: 1 << 20, maxAgeMs: 60_000 });
    const { source, calls } = countingSource((n) => ({ data: { predictTravelTime: { q50Minutes: 40 + n } } }));
    const kept = cache.wrap('prediction', prediction.pure, source);
    const a = await kept.process(fetchOf(TRAVEL, { input: { distanceKm: 5 } }));
    const b = await kept.process(fetchOf(TRAVEL, { input: { distanceKm: 5 } }));
    expect(calls()).toBe(1);
    expect(b).toEqual({ data: { predictTravelTime: { q50Minutes: 41 } } });
    expect(a.data).toEqual(b.data);
    (b.data as { predictTravelTime: { q50Minutes: number } }).predictTravelTime.q50Minutes = 0;
    expect((await kept.process(fetchOf(TRAVEL, { input: { distanceKm: 5 } }))).data).toEqual({ predictTravelTime: { q50Minutes: 41 } });
    await kept.process(fetchOf(TRAVEL, { input: { distanceKm: 6 } }));
    expect(calls()).toBe(2);
    expect(cache.snapshot()).toMatchObject({ hits: 2, misses: 2, entries: 2 });
  });

  it('passes through what is not pure, health checks, and subgraphs that declare nothing', async () => {
    const cache = new FetchCache({ maxBytes: 1 << 20, maxAgeMs: 60_000 });
    const { source, calls } = countingSource();
    const bondingKept = cache.wrap('bonding', bonding.pure, source);
    await bondingKept.process(fetchOf('{ bondingOverview { open } }'));
    await bondingKept.process(fetchOf('{ bondingOverview { open } }'));
    expect(calls()).toBe(2);
    const health = { request: { query: TRAVEL }, kind: 'HEALTH_CHECK', context: {} } as unknown as GraphQLDataSourceProcessOptions<GatewayContext>;
    const predictionKept = cache.wrap('prediction', prediction.pure, source);
    await predictionKept.process(health);
    await predictionKept.process(health);
    expect(calls()).toBe(4);
    const rentalKept = cache.wrap('rental', undefined, source);
    expect(rentalKept).toBe(source);
  });

  it('keeps no answer with errors', async () => {
    const cache = new FetchCache({ maxBytes: 1 << 20, maxAgeMs: 60_000 });
    const { source, calls } = countingSource(() => ({ data: null, errors: [{ message: 'bad input', extensions: { code: 'BAD_USER_INPUT' } }] }));
    const kept = cache.wrap('prediction', prediction.pure, source);
    await kept.process(fetchOf(TRAVEL, { input: {} }));
    const again = await kept.process(fetchOf(TRAVEL, { input: {} }));
    expect(calls()).toBe(2);
    expect(again.errors).toHaveLength(1);
    expect(cache.snapshot().entries).toBe(0);
  });

  it('fetches again past the age limit', async () => {
    let now = 1_000_000;
    const cache = new FetchCache({ maxBytes: 1 << 20, maxAgeMs: 5_000, now: () => now });
    const { source, calls } = countingSource();
    const kept = cache.wrap('prediction', prediction.pure, source);
    await kept.process(fetchOf(TRAVEL));
    now += 5_000;
    expect((await kept.process(fetchOf(TRAVEL))).data).toEqual({ n: 1 });
    now += 1;
    expect((await kept.process(fetchOf(TRAVEL))).data).toEqual({ n: 2 });
    expect(calls()).toBe(2);
  });

  it('drops answers past the age limit at the next read or write, far below its memory bound', async () => {
    let now = 1_000_000;
    const cache = new FetchCache({ maxBytes: 1 << 20, maxAgeMs: 5_000, now: () => now });
    const { source, calls } = countingSource();
    const kept = cache.wrap('prediction', prediction.pure, source);
    for (let k = 0; k < 10; k++) await kept.process(fetchOf(TRAVEL, { k }));
    const full = cache.snapshot();
    expect(full.entries).toBe(10);
    now += 3_000;
    // Read often, the first answer is the most recently used; its age still counts from when it was stored.
    await kept.process(fetchOf(TRAVEL, { k: 0 }));
    for (let k = 10; k < 15; k++) await kept.process(fetchOf(TRAVEL, { k }));
    const fifteen = cache.snapshot();
    expect(fifteen.entries).toBe(15);
    now += 2_001;
    await kept.process(fetchOf(TRAVEL, { k: 14 }));
    // The ten stored first are gone, the one read since among them; the five stored later are left.
    expect(cache.snapshot()).toMatchObject({ entries: 5, bytes: fifteen.bytes - full.bytes });
    expect(calls()).toBe(15);
    await kept.process(fetchOf(TRAVEL, { k: 0 }));
    expect(calls()).toBe(16);
    now += 5_001;
    await kept.process(fetchOf(TRAVEL, { k: 0 }));
    expect(cache.snapshot()).toMatchObject({ entries: 1 });
  });

  it('holds to its memory bound, the least recently used answers going first', async () => {
    const big = 'x'.repeat(1000);
    const cache = new FetchCache({ maxBytes: 40_000, maxAgeMs: 60_000 });
    const { source, calls } = countingSource((n) => ({ data: { n, big } }));
    const kept = cache.wrap('prediction', prediction.pure, source);
    for (let k = 0; k < 50; k++) {
      await kept.process(fetchOf(TRAVEL, { k }));
      // Input 0 is read again after every other one, so it stays the most recently used.
      await kept.process(fetchOf(TRAVEL, { k: 0 }));
    }
    expect(cache.snapshot().bytes).toBeLessThanOrEqual(40_000);
    expect(cache.snapshot().entries).toBeLessThan(50);
    const before = calls();
    await kept.process(fetchOf(TRAVEL, { k: 0 }));
    expect(calls()).toBe(before);
    await kept.process(fetchOf(TRAVEL, { k: 1 }));
    expect(calls()).toBe(before + 1);
  });

  it('through the gateway: forecasts and predictions are served again with the same answers, rental reads always made', async () => {
    for (const mode of ['one-process', 'distributed'] as const) {
      const server = await startTestServer({ mode });
      const quote = await rest(server.url, 'POST', '/rental/pricing/quote', {
        machine_ids: ['EQ-013'],
        location_id: 'LOC-002',
        start_time: hoursFromNow(30),
        duration_hours: 3,
      });
      expect((await rest(server.url, 'POST', '/rental/booking/confirm', { quote_id: quote.body['quote_id'], customer_name: 'Kept' })).status).toBe(200);
      const ledger = '{ bookings(first: 5) { edges { node { id status deliveryForecast { q10Minutes q50Minutes q90Minutes arrivalQ50 } } } } }';
      const travel =
        '{ predictTravelTime(input: { originDensity: 0.4, destinationDensity: 0.6, distanceKm: 12, roadType: URBAN, weather: RAIN, traffic: HEAVY, publicHoliday: false, peakHour: true, hourSin: 0.5, hourCos: 0.86, daySin: 0, dayCos: 1 }) { q10Minutes q50Minutes q90Minutes modelVersion } }';
      const first = [await gql(server.url, ledger), await gql(server.url, travel)];
      const again = [await gql(server.url, ledger), await gql(server.url, travel)];
      expect(again).toEqual(first);
      expect(first[0]!.data!['bookings'].edges.length).toBeGreaterThan(0);
      expect(first[1]!.data!['predictTravelTime'].q50Minutes).toBeGreaterThan(0);
      const metrics = await (await fetch(`${server.url}/metrics`)).text();
      const sample = (pattern: RegExp) =>
        Number(
          metrics
            .split('\n')
            .find((l) => pattern.test(l))
            ?.split(' ')
            .pop() ?? 0,
        );
      expect(sample(/^subgraph_fetch_cache_reads_total\{subgraph="prediction",result="hit"\}/)).toBe(2);
      expect(sample(/^subgraph_fetch_cache_reads_total\{subgraph="prediction",result="miss"\}/)).toBe(2);
      // The ledger itself is fetched from the rental subgraph every time (both reads counted as made).
      expect(sample(/^subgraph_fetch_duration_seconds_count\{subgraph="rental",outcome="ok"\}/)).toBeGreaterThanOrEqual(2);
      await server.close();
    }
  }, 240_000);

  it('with GATEWAY_FETCH_CACHE_MB=0, every read is made', async () => {
    const server = await startTestServer({ env: { GATEWAY_FETCH_CACHE_MB: '0' } });
    const query = '{ predictionModels { travel { version } } }';
    expect(await gql(server.url, query)).toEqual(await gql(server.url, query));
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    expect(metrics).not.toMatch(/^subgraph_fetch_cache_reads_total\{/m);
    const made = Number(/^subgraph_fetch_duration_seconds_count\{subgraph="prediction",outcome="ok"\} (\d+)$/m.exec(metrics)?.[1] ?? 0);
    expect(made).toBeGreaterThanOrEqual(2);
    await server.close();
  }, 120_000);
});
