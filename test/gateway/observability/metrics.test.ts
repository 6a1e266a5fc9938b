import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gql, hoursFromNow, rest } from '../../support/http.js';
import { startTestServer, TEST_DATABASE_URL, type TestServer } from '../../support/server.js';
import { until } from '../../support/wait.js';
import { Collector, wsClient, type WsClient } from '../../support/ws.js';

/** One sample of a Prometheus text exposition: the value of `name` with exactly these labels. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const found = Object.fromEntries([...(match[2] ?? '').matchAll(/([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1], m[2]]));
    if (Object.keys(found).length === Object.keys(labels).length && Object.entries(labels).every(([k, v]) => found[k] === v)) return Number(match[3]);
  }
  return undefined;
}

const scrape = async (url: string) => {
  const res = await fetch(`${url}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toContain('text/plain');
  return res.text();
};

describe.each(TEST_DATABASE_URL ? (['pglite', 'postgres'] as const) : (['pglite'] as const))('metrics and request ids (%s)', (backend) => {
  let server: TestServer;
  let ws: WsClient;
  beforeAll(async () => {
    // Every read reaches its subgraph (no state cache), so each fetch is timed.
    server = await startTestServer({ backend, env: { STATE_CACHE_MB: '0' } });
    ws = wsClient(server.url);
  });
  afterAll(async () => {
    await ws?.dispose();
  });

  it('counts requests by route template and status, times them, and times subgraph fetches by outcome', async () => {
    for (let i = 0; i < 3; i++) expect((await rest(server.url, 'GET', '/rental/fleet/summary')).status).toBe(200);
    expect((await rest(server.url, 'GET', '/rental/booking/BK-nothing-here/track')).status).toBeGreaterThanOrEqual(400);
    expect((await rest(server.url, 'GET', '/no/such/path')).status).toBe(404);
    const quote = await rest(server.url, 'POST', '/rental/pricing/quote', {
      machine_ids: ['EQ-007'],
      location_id: 'LOC-003',
      start_time: hoursFromNow(50),
      duration_hours: 4,
    });
    expect(quote.status).toBe(200);
    const federated = await gql(server.url, '{ bookings(first: 5) { edges { node { id deliveryForecast { q50Minutes } } } } fleetSummary { total } }');
    expect(federated.errors).toBeUndefined();

    let text = await scrape(server.url);
    expect(sample(text, 'http_requests_total', { method: 'GET', route: '/rental/fleet/summary', status: '200' })).toBe(3);
    expect(sample(text, 'http_requests_total', { method: 'GET', route: 'unmatched', status: '404' })).toBe(1);
    expect(sample(text, 'http_requests_total', { method: 'POST', route: '/rental/pricing/quote', status: '200' })).toBe(1);
    expect(sample(text, 'http_request_duration_seconds_count', { method: 'GET', route: '/rental/fleet/summary', status: '200' })).toBe(3);
    // The raw path of the failed track is not a label value: the route template is.
    expect(text).not.toContain('BK-nothing-here');
    expect(sample(text, 'http_request_duration_seconds_bucket', { method: 'GET', route: '/rental/fleet/summary', status: '200', le: '+Inf' })).toBe(3);
    expect(sample(text, 'subgraph_fetch_duration_seconds_count', { subgraph: 'rental', outcome: 'ok' })).toBeGreaterThanOrEqual(5);
    expect(sample(text, 'process_cpu_seconds_total')).toBeGreaterThan(0);
    // The event loop's delay is sampled every 10 ms (each sample at least that long): its p99 is a measured delay.
    expect(sample(text, 'nodejs_eventloop_lag_p99_seconds')).toBeGreaterThan(0);
    expect(sample(text, 'requests_waiting_for_turn')).toBe(0);
    if (backend === 'postgres') {
      const open = sample(text, 'db_pool_connections', { state: 'open' }) ?? 0;
      expect(open).toBeGreaterThan(0);
      expect(sample(text, 'db_pool_connections', { state: 'idle' })).toBeLessThanOrEqual(open);
      // The scrape's own outbox query may be waiting for a connection as it is read.
      expect(sample(text, 'db_pool_connections', { state: 'waiting' })).toBeLessThanOrEqual(1);
      expect(sample(text, 'db_read_cache_reads_total', { result: 'hit' })).toBeUndefined();
    } else {
      expect(sample(text, 'db_pool_connections', { state: 'open' })).toBeUndefined();
      // A repeated read is answered from the read cache, and its answer is kept (a background write in between
      // may drop it: try again).
      const hits = () => sample(text, 'db_read_cache_reads_total', { result: 'hit' }) ?? 0;
      const entries = () => sample(text, 'db_read_cache_entries') ?? 0;
      const before = hits();
      expect(sample(text, 'db_read_cache_reads_total', { result: 'miss' })).toBeGreaterThan(0);
      for (let i = 0; i < 10 && (hits() === before || entries() === 0); i++) {
        expect((await rest(server.url, 'GET', '/rental/fleet/summary')).status).toBe(200);
        text = await scrape(server.url);
      }
      expect(hits()).toBeGreaterThan(before);
      expect(sample(text, 'db_read_cache_entries')).toBeGreaterThan(0);
    }
  });

  it('reports open WebSocket connections and operations, and the outbox lag', async () => {
    const events = await server.live.opened(() => new Collector(ws.client, 'subscription { fleetSummaryChanged { reserved } }'));
    let text = await scrape(server.url);
    expect(sample(text, 'websocket_connections')).toBe(1);
    expect(sample(text, 'websocket_operations')).toBe(1);
    expect(
      (
        await rest(server.url, 'POST', '/rental/pricing/quote', {
          machine_ids: ['EQ-008'],
          location_id: 'LOC-003',
          start_time: hoursFromNow(52),
          duration_hours: 4,
        })
      ).status,
    ).toBe(200);
    await events.until((c) => c.results.length >= 1);
    // Every event written has been handed to the streams.
    await until(async () => sample(await scrape(server.url), 'outbox_lag_events') === 0, 'the outbox lag back to 0');
    events.unsubscribe();
    await until(async () => sample(await scrape(server.url), 'websocket_operations') === 0, 'the completed subscription no longer counted');
    text = await scrape(server.url);
    expect(sample(text, 'websocket_slow_consumer_closes_total')).toBe(0);
  });

  it('answers with a request id: the caller’s when it is a plain token, a new UUID otherwise', async () => {
    const fresh = await fetch(`${server.url}/health/live`);
    expect(fresh.headers.get('x-request-id')).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    const other = await fetch(`${server.url}/health/live`);
    expect(other.headers.get('x-request-id')).not.toBe(fresh.headers.get('x-request-id'));
    const given = await fetch(`${server.url}/rental/fleet/summary`, { headers: { 'x-request-id': 'dash-7f3a.42:retry-1' } });
    expect(given.headers.get('x-request-id')).toBe('dash-7f3a.42:retry-1');
    const graphql = await fetch(`${server.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': 'gql-1' },
      body: '{"query":"{ fleetSummary { total } }"}',
    });
    expect(graphql.headers.get('x-request-id')).toBe('gql-1');
    for (const bad of ['has spaces in it', 'x'.repeat(129), 'quote"d']) {
      const res = await fetch(`${server.url}/health/live`, { headers: { 'x-request-id': bad } });
      expect(res.headers.get('x-request-id')).not.toBe(bad);
      expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    }
  });
});
