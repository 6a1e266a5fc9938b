import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { operationCost, RateLimiter } from '../../../gateway/security/rate-limit.js';
import { DEMO_PRINCIPAL, type Principal } from '../../../platform/principal.js';
import { gql, rest } from '../../support/http.js';
import { startTestServer } from '../../support/server.js';
import { until } from '../../support/wait.js';
import { Collector, wsClient } from '../../support/ws.js';

const a: Principal = { id: 'a', tenant: 'ta', scopes: ['fleet:read'] };
const b: Principal = { id: 'b', tenant: 'tb', scopes: ['fleet:read'] };

describe('the token bucket', () => {
  it('spends the burst, refills per second, keeps principals apart, and lets the demo principal through', () => {
    let now = 0;
    const limiter = new RateLimiter({ perSecond: 2, burst: 4, now: () => now });
    const spent = [1, 2, 3, 4].map(() => limiter.take(a, 1));
    expect(spent.map((d) => [d.allowed, d.remaining])).toEqual([
      [true, 3],
      [true, 2],
      [true, 1],
      [true, 0],
    ]);
    const refused = limiter.take(a, 1);
    expect(refused).toMatchObject({ allowed: false, remaining: 0, retryAfter: 1, reset: 2 });
    expect(limiter.take(b, 1).allowed).toBe(true);
    now += 500;
    expect(limiter.take(a, 1).allowed).toBe(true);
    expect(limiter.take(a, 1).allowed).toBe(false);
    // A heavy operation waits for its cost to refill: 2 s from empty for the whole bucket.
    expect(limiter.take(a, 4)).toMatchObject({ allowed: false, retryAfter: 2 });
    now += 2000;
    expect(limiter.take(a, 4)).toMatchObject({ allowed: true, remaining: 0 });
    // One that costs more than the bucket holds is never taken (the rate charge refuses it first).
    expect(() => limiter.take(a, 20)).toThrow(/more than the bucket holds/);
    // One identity, one bucket: another credential of the same principal (other scopes) shares it.
    expect(limiter.take({ ...a, scopes: ['fleet:read', 'rental:read'] }, 1)).toMatchObject({ allowed: false });
    expect(limiter.take({ ...a, tenant: 'other' }, 1)).toMatchObject({ allowed: true });
    for (let i = 0; i < 1000; i++) expect(limiter.take(DEMO_PRINCIPAL, 20).allowed).toBe(true);
    // Every refusal is counted (`rate_limit_refusals_total`), and nothing else.
    expect(limiter.refused).toBe(4);
  });

  it('costs one token per operation, more for heavy root fields', () => {
    expect(operationCost(parse('{ fleetSummary { total } machines { id } }'))).toBe(1);
    expect(operationCost(parse('mutation { startQuantumRun(input: {}) { id } }'))).toBe(21);
    expect(operationCost(parse('query A { machines { id } } query B { leakageAudit { a } }'), 'B')).toBe(11);
  });
});

describe('per-principal rate limits at the gateway', () => {
  let url: string;
  const dir = mkdtempSync(join(tmpdir(), 'rate-'));
  const KEY_A = 'rate-limited-key-0000a';
  const KEY_B = 'rate-limited-key-0000b';
  beforeAll(async () => {
    const file = join(dir, 'keys.json');
    writeFileSync(
      file,
      JSON.stringify([
        { key: KEY_A, principal: 'flooder', tenant: 'ta', scopes: ['fleet:read', 'rental:read'] },
        { key: KEY_B, principal: 'neighbour', tenant: 'tb', scopes: ['fleet:read'] },
      ]),
    );
    ({ url } = await startTestServer({ env: { API_KEYS_FILE: file, RATE_LIMIT_PER_S: '1', RATE_LIMIT_BURST: '5' } }));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('one principal flooding gets 429 RATE_LIMITED with Retry-After and RateLimit headers; another is served', async () => {
    const started = Date.now();
    let served = 0;
    let refusal: Awaited<ReturnType<typeof gql>> | null = null;
    for (let i = 0; i < 30 && !refusal; i++) {
      const res = await gql(url, '{ fleetSummary { total } }', {}, { 'x-api-key': KEY_A });
      if (res.status === 200) {
        served++;
        expect(res.headers.get('ratelimit-limit')).toBe('5');
      } else refusal = res;
    }
    // The burst, plus at most what refilled meanwhile.
    expect(served).toBeGreaterThanOrEqual(5);
    expect(served).toBeLessThanOrEqual(5 + Math.ceil((Date.now() - started) / 1000));
    expect(refusal!.status).toBe(429);
    expect(refusal!.errors?.[0]?.extensions?.['code']).toBe('RATE_LIMITED');
    expect(Number(refusal!.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(refusal!.headers.get('ratelimit-remaining')).toBe('0');
    // REST paths share the bucket, with the same code and Retry-After. A refusal is answered after a
    // pause of a second, in which a token comes back: the next request may be served, the one after not.
    let viaRest = await rest(url, 'GET', '/rental/fleet/summary', undefined, { 'x-api-key': KEY_A });
    for (let i = 0; i < 3 && viaRest.status !== 429; i++) viaRest = await rest(url, 'GET', '/rental/fleet/summary', undefined, { 'x-api-key': KEY_A });
    expect(viaRest.status).toBe(429);
    expect(viaRest.body['code']).toBe('RATE_LIMITED');
    expect(Number(viaRest.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // A subscription is charged as it starts: the token that came back is spent first.
    // Three at once: at most what refilled meanwhile is served, the others are refused.
    const ws = wsClient(url, { 'x-api-key': KEY_A });
    await gql(url, '{ fleetSummary { total } }', {}, { 'x-api-key': KEY_A });
    const subs = [1, 2, 3].map(() => new Collector(ws.client, 'subscription { fleetSummaryChanged { cursor } }'));
    await until(() => subs.some((c) => c.results.length > 0 || c.error !== undefined), 'a subscription to be refused');
    const refused = subs.find((c) => c.results.length > 0 || c.error !== undefined)!;
    expect(JSON.stringify(refused.results[0]?.errors ?? refused.error)).toContain('RATE_LIMITED');
    await ws.dispose();
    // The neighbour's bucket is its own.
    const neighbour = await gql(url, '{ fleetSummary { total } }', {}, { 'x-api-key': KEY_B });
    expect(neighbour.status).toBe(200);
    expect(neighbour.data).toEqual({ fleetSummary: { total: 15 } });
  });
});
