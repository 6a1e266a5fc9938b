import { beforeAll, describe, expect, it } from 'vitest';
import { gql, hoursFromNow, rest } from '../../support/http.js';
import { startTestServer } from '../../support/server.js';

describe('API keys', () => {
  let url: string;
  const KEY = 'partner-key-0001';
  beforeAll(async () => {
    ({ url } = await startTestServer({ env: { API_KEYS: `${KEY},second-key-0002` } }));
  });

  it('401 problem details for REST without a key or with a wrong one, and nothing changes', async () => {
    const none = await rest(url, 'GET', '/rental/fleet/summary');
    expect(none.status).toBe(401);
    expect(none.headers.get('content-type')).toContain('application/problem+json');
    expect(none.headers.get('www-authenticate')).toContain('Bearer');
    expect(none.body).toMatchObject({ status: 401, code: 'UNAUTHENTICATED' });

    const body = { machine_ids: ['EQ-001'], location_id: 'LOC-001', start_time: hoursFromNow(2), duration_hours: 2 };
    const wrong = await rest(url, 'POST', '/rental/pricing/quote', body, { 'x-api-key': 'partner-key-0002' });
    expect(wrong.status).toBe(401);
    const wrongBearer = await rest(url, 'POST', '/rental/pricing/quote', body, { authorization: 'Bearer nope-nope-nope' });
    expect(wrongBearer.status).toBe(401);
    const summary = await rest(url, 'GET', '/rental/fleet/summary', undefined, { 'x-api-key': KEY });
    expect(summary.body).toMatchObject({ reserved: 0, available: 15 });
  });

  it('accepts x-api-key and Authorization: Bearer with any configured key', async () => {
    expect((await rest(url, 'GET', '/rental/fleet/summary', undefined, { 'x-api-key': KEY })).status).toBe(200);
    expect((await rest(url, 'GET', '/rental/fleet/summary', undefined, { authorization: 'Bearer second-key-0002' })).status).toBe(200);
    expect((await rest(url, 'GET', '/rental/health', undefined, { authorization: `bearer ${KEY}` })).status).toBe(200);
  });

  it('every key sent must be valid: a right key does not excuse a wrong one next to it', async () => {
    const get = (headers: Record<string, string>) => rest(url, 'GET', '/rental/fleet/summary', undefined, headers);
    expect((await get({ 'x-api-key': KEY, authorization: 'Bearer wrong-key-123' })).status).toBe(401);
    expect((await get({ 'x-api-key': 'wrong-key-123', authorization: `Bearer ${KEY}` })).status).toBe(401);
    expect((await get({ 'x-api-key': '', authorization: `Bearer ${KEY}` })).status).toBe(401);
    // Two valid keys of two principals: whom would the request act for? Refused.
    expect((await get({ 'x-api-key': KEY, authorization: 'Bearer second-key-0002' })).status).toBe(401);
    expect((await get({ 'x-api-key': KEY, authorization: `Bearer ${KEY}` })).status).toBe(200);
    // Another scheme in Authorization (set by a proxy, say) is not an API key and is left alone.
    expect((await get({ 'x-api-key': KEY, authorization: 'Basic dXNlcjpwYXNz' })).status).toBe(200);
  });

  it('guards GraphQL over HTTP the same way, with a GraphQL-readable error', async () => {
    const denied = await gql(url, '{ fleetSummary { total } }');
    expect(denied.status).toBe(401);
    expect(denied.errors?.[0]?.extensions?.['code']).toBe('UNAUTHENTICATED');
    const mutation = await gql(url, 'mutation { completeBooking(bookingId: "BK-1") { id } }', {}, { 'x-api-key': 'wrong-key-123' });
    expect(mutation.status).toBe(401);
    const ok = await gql(url, '{ fleetSummary { total } }', {}, { 'x-api-key': KEY });
    expect(ok.status).toBe(200);
    expect(ok.data).toEqual({ fleetSummary: { total: 15 } });
  });

  it('leaves /health open for liveness probes, with or without a query string', async () => {
    const health = await rest(url, 'GET', '/health');
    expect(health.status).toBe(200);
    expect(health.body).toMatchObject({ status: 'ok', subgraphs: { rental: { ready: true } } });
    expect((await rest(url, 'GET', '/health?probe=k8s')).status).toBe(200);
    expect((await rest(url, 'GET', '/health/ready')).status).toBe(200);
    expect((await rest(url, 'GET', '/health/live')).status).toBe(200);
    // Only the probe paths themselves: a path that merely starts with one, or carries it in the query, is guarded.
    expect((await rest(url, 'GET', '/rental/health?x=/health')).status).toBe(401);
    expect((await rest(url, 'GET', '/healthz')).status).toBe(401);
    expect((await rest(url, 'GET', '/health/other')).status).toBe(401);
  });
});

describe('demo mode (no API_KEYS)', () => {
  it('serves calls without a key, and ignores one that is sent', async () => {
    const { url } = await startTestServer();
    expect((await rest(url, 'GET', '/rental/fleet/summary')).status).toBe(200);
    expect((await rest(url, 'GET', '/rental/fleet/summary', undefined, { 'x-api-key': 'demo' })).status).toBe(200);
  });
});
