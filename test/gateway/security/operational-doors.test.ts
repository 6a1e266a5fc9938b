import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../gateway/config.js';
import { gql } from '../../support/http.js';
import { Collector, wsClient } from '../../support/ws.js';
import { startTestServer } from '../../support/server.js';

/*
 * The doors that are not the API: /metrics is for operators and monitoring credentials (`metrics:read`),
 * introspection needs `schema:read` once credentials are configured (demo mode keeps it on), and a JWKS is
 * fetched over https (plain http on loopback only).
 */

const INTROSPECTION = '{ __schema { queryType { name } } }';

describe('operational doors with credentials configured', () => {
  const dir = mkdtempSync(join(tmpdir(), 'doors-'));
  let url: string;
  const PARTNER = 'doors-partner-key-000001';
  const MONITOR = 'doors-monitor-key-000002';
  const TOOLS = 'doors-schema-key-0000003';
  const OPERATOR = 'doors-operator-key-0004';
  beforeAll(async () => {
    const file = join(dir, 'keys.json');
    writeFileSync(
      file,
      JSON.stringify([
        { key: PARTNER, principal: 'partner', tenant: 'tenant-p', scopes: ['fleet:read', 'rental:read', 'rental:book'] },
        { key: MONITOR, principal: 'prometheus', tenant: 'monitoring', scopes: ['metrics:read'] },
        { key: TOOLS, principal: 'codegen', tenant: 'tenant-p', scopes: ['schema:read', 'fleet:read'] },
      ]),
    );
    ({ url } = await startTestServer({ env: { API_KEYS_FILE: file, API_KEYS: OPERATOR } }));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const metrics = (key?: string) => fetch(`${url}/metrics`, key ? { headers: { 'x-api-key': key } } : {});

  it('/metrics: 401 without a credential, 403 for a partner, 200 for metrics:read and for an operator', async () => {
    expect((await metrics()).status).toBe(401);
    const partner = await metrics(PARTNER);
    expect(partner.status).toBe(403);
    const body = (await partner.json()) as { code: string; detail: string };
    expect(body.code).toBe('FORBIDDEN');
    expect(body.detail).toContain('Principal partner');
    expect(body.detail).toContain('metrics:read');
    for (const key of [MONITOR, OPERATOR]) {
      const res = await metrics(key);
      expect(res.status, key).toBe(200);
      expect(await res.text()).toContain('http_requests_total');
    }
  });

  it('introspection needs schema:read: refused whole for a partner, even beside fields it may use; answered for tools and operators', async () => {
    for (const text of [INTROSPECTION, '{ __type(name: "Booking") { name } }', `{ fleetSummary { total } ${INTROSPECTION.slice(1, -1)} }`]) {
      const refused = await gql(url, text, {}, { 'x-api-key': PARTNER });
      expect(refused.status, text).toBe(403);
      expect(refused.data ?? null, text).toBeNull();
      expect(refused.errors?.[0]?.extensions?.['code'], text).toBe('FORBIDDEN');
      expect(refused.errors?.[0]?.message, text).toContain('schema:read');
    }
    expect((await gql(url, INTROSPECTION)).status).toBe(401);
    for (const key of [TOOLS, OPERATOR]) {
      const res = await gql(url, INTROSPECTION, {}, { 'x-api-key': key });
      expect(res.errors, key).toBeUndefined();
      expect(res.data?.['__schema'].queryType.name).toBe('Query');
    }
    // __typename is no introspection of the schema: open to every caller of an operation.
    const typename = await gql(url, '{ __typename fleetSummary { total } }', {}, { 'x-api-key': PARTNER });
    expect(typename.errors).toBeUndefined();
    expect(typename.data?.['__typename']).toBe('Query');
  });

  it('errors suggest no schema names ("Did you mean"), over HTTP and on a socket', async () => {
    const typo = await gql(url, '{ fleetSumary { total } }', {}, { 'x-api-key': PARTNER });
    expect(typo.status).toBe(400);
    expect(typo.errors?.[0]?.message).toBe('Cannot query field "fleetSumary" on type "Query".');
    const enumTypo = await gql(
      url,
      'mutation($p: ProblemKind!) { startQuantumRun(input: { problem: $p, size: 4 }) { id } }',
      { p: 'REGULAR3_MAXCU' },
      { 'x-api-key': OPERATOR },
    );
    expect(enumTypo.status).toBe(400);
    expect(enumTypo.errors?.[0]?.message).not.toContain('Did you mean');
    expect(enumTypo.errors?.[0]?.message).toContain('REGULAR3_MAXCU');
    const ws = wsClient(url, { 'x-api-key': PARTNER });
    const collector = new Collector(ws.client, 'subscription { fleetSummaryChange { total } }');
    await collector.until((c) => c.error !== undefined, undefined, 'the socket to refuse the typo');
    await ws.dispose();
    expect(JSON.stringify(collector.error)).toContain('Cannot query field');
    expect(JSON.stringify(collector.error)).not.toContain('Did you mean');
  });
});

describe('operational doors in demo mode', () => {
  let url: string;
  beforeAll(async () => {
    ({ url } = await startTestServer({}));
  });

  it('/health says demo mode is on, checks the backends at most once per 250 ms however many ask, and answers a flood of probes 429', async () => {
    const first = (await (await fetch(`${url}/health`)).json()) as { demo_mode: boolean; checked_at: string };
    expect(first.demo_mode).toBe(true);
    // Thirty probes at once: one round of backend checks (two, if a 250 ms window ends among them) answers them all.
    const many = await Promise.all(
      Array.from({ length: 30 }, () => fetch(`${url}/health`).then(async (r) => ({ status: r.status, body: (await r.json()) as { checked_at?: string } }))),
    );
    const rounds = new Set(many.filter((m) => m.status === 200).map((m) => m.body.checked_at));
    expect(rounds.size).toBeLessThanOrEqual(2);
    // Past a client address's burst (40, and 20 a second), probes are refused without probing anything.
    let limited: Response | null = null;
    for (let i = 0; i < 120 && !limited; i++) {
      const res = await fetch(`${url}/health/ready`);
      if (res.status === 429) limited = res;
      else await res.arrayBuffer();
    }
    expect(limited?.status).toBe(429);
    expect(((await limited!.json()) as { code: string }).code).toBe('RATE_LIMITED');
    expect(Number(limited!.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  });

  it('keeps introspection and /metrics open (the demo principal holds every scope)', async () => {
    const res = await gql(url, INTROSPECTION);
    expect(res.errors).toBeUndefined();
    expect((await fetch(`${url}/metrics`)).status).toBe(200);
  });
});

describe('AUTH_JWKS_URL', () => {
  const jwt = { AUTH_ISSUER: 'https://idp.test/', AUTH_AUDIENCE: 'ops' };
  it('must be https, except on loopback', () => {
    expect(() => loadConfig({ ...jwt, AUTH_JWKS_URL: 'http://idp.example.com/jwks' })).toThrow(/AUTH_JWKS_URL must be https:\/\//);
    expect(() => loadConfig({ ...jwt, AUTH_JWKS_URL: 'http://10.0.0.8/jwks' })).toThrow(/loopback only/);
    for (const url of ['https://idp.example.com/jwks', 'http://127.0.0.1:8080/jwks', 'http://localhost/jwks', 'http://[::1]:9000/jwks']) {
      expect(loadConfig({ ...jwt, AUTH_JWKS_URL: url }).AUTH_JWKS_URL, url).toBe(url);
    }
  });
});
