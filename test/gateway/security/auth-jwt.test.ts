import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, exportSPKI, generateKeyPair, SignJWT, type JWK } from 'jose';
import type { webcrypto } from 'node:crypto';

type CryptoKey = webcrypto.CryptoKey;
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gql, hoursFromNow, rest } from '../../support/http.js';
import { startTestServer } from '../../support/server.js';
import { within } from '../../support/wait.js';
import { Collector, wsClient } from '../../support/ws.js';

/*
 * Bearer JWTs from an identity provider: a local JWKS server and tokens minted here. Every token that is
 * not exactly right is 401 and runs nothing; a right one acts for its subject, tenant and scopes.
 */

const ISSUER = 'https://idp.ops-supergraph.test';
const AUDIENCE = 'ops-supergraph';

describe('bearer JWTs verified against a JWKS', () => {
  let jwks: Server;
  let url: string;
  let signing: CryptoKey;
  let stranger: CryptoKey;
  let publicPem: string;
  let jwksRequests = 0;

  beforeAll(async () => {
    const pair = await generateKeyPair('RS256', { extractable: true });
    signing = pair.privateKey;
    stranger = (await generateKeyPair('RS256')).privateKey;
    publicPem = await exportSPKI(pair.publicKey);
    const jwk: JWK = { ...(await exportJWK(pair.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
    jwks = createServer((_req, res) => {
      jwksRequests++;
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] }));
    });
    await new Promise<void>((resolve) => jwks.listen(0, '127.0.0.1', resolve));
    const jwksUrl = `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/.well-known/jwks.json`;
    ({ url } = await startTestServer({ env: { AUTH_JWKS_URL: jwksUrl, AUTH_ISSUER: ISSUER, AUTH_AUDIENCE: AUDIENCE } }));
  });
  afterAll(() => new Promise<void>((resolve) => jwks.close(() => resolve())));

  const now = () => Math.floor(Date.now() / 1000);
  const mint = (
    claims: Record<string, unknown> = {},
    options: { key?: CryptoKey; kid?: string; iss?: string; aud?: string; exp?: number; nbf?: number } = {},
  ) => {
    const jwt = new SignJWT({ tenant: 'tenant-jwt', scope: 'fleet:read rental:read rental:book', ...claims })
      .setProtectedHeader({ alg: 'RS256', kid: options.kid ?? 'k1' })
      .setSubject('user-42')
      .setIssuer(options.iss ?? ISSUER)
      .setAudience(options.aud ?? AUDIENCE)
      .setIssuedAt()
      .setExpirationTime(options.exp ?? now() + 300);
    if (options.nbf !== undefined) jwt.setNotBefore(options.nbf);
    return jwt.sign(options.key ?? signing);
  };
  const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const quoteBody = (machine: string) => ({ machine_ids: [machine], location_id: 'LOC-001', start_time: hoursFromNow(4), duration_hours: 2 });
  const machineStatus = async (token: string, id: string) =>
    (await rest(url, 'GET', '/rental/fleet/machines', undefined, bearer(token))).body['machines'].find((m: { id: string }) => m.id === id).status;

  it("a valid token acts for its subject and tenant: the booking is the tenant's", async () => {
    const token = await mint();
    const q = await rest(url, 'POST', '/rental/pricing/quote', quoteBody('EQ-005'), bearer(token));
    expect(q.status).toBe(200);
    const b = await rest(url, 'POST', '/rental/booking/confirm', { quote_id: q.body['quote_id'], customer_name: 'JWT BV' }, bearer(token));
    expect(b.status).toBe(200);
    const other = await mint({ tenant: 'someone-else' });
    const seen = await gql(url, 'query ($id: ID!) { booking(id: $id) { id } }', { id: b.body['booking_id'] }, bearer(other));
    expect(seen.data).toEqual({ booking: null });
    const own = await gql(url, 'query ($id: ID!) { booking(id: $id) { id } }', { id: b.body['booking_id'] }, bearer(token));
    expect(own.data).toEqual({ booking: { id: b.body['booking_id'] } });
    // The scp claim (an array) is read as well as scope.
    expect((await rest(url, 'GET', '/rental/fleet/summary', undefined, bearer(await mint({ scope: undefined, scp: ['fleet:read'] })))).status).toBe(200);
  });

  it('expired, not yet valid, wrong issuer or audience, unknown kid, alg none, HS256 with the public key, no tenant: 401, nothing runs', async () => {
    const valid = await mint();
    const header = (alg: string) => b64({ alg, kid: 'k1', typ: 'JWT' });
    const payload = b64({ sub: 'user-42', iss: ISSUER, aud: AUDIENCE, tenant: 'tenant-jwt', scope: 'rental:book', exp: now() + 300 });
    const hs256 = await new SignJWT({ tenant: 'tenant-jwt', scope: 'rental:book' })
      .setProtectedHeader({ alg: 'HS256', kid: 'k1' })
      .setSubject('user-42')
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setExpirationTime(now() + 300)
      .sign(new TextEncoder().encode(publicPem));
    const bad: Record<string, string> = {
      expired: await mint({}, { exp: now() - 60 }),
      'not yet valid': await mint({}, { nbf: now() + 600 }),
      'wrong issuer': await mint({}, { iss: 'https://evil.test' }),
      'wrong audience': await mint({}, { aud: 'another-api' }),
      'unknown kid': await mint({}, { key: stranger, kid: 'k9' }),
      'known kid, other key': await mint({}, { key: stranger }),
      'alg none': `${header('none')}.${payload}.`,
      'HS256 with the public key as secret': hs256,
      'no tenant': await mint({ tenant: undefined }),
      'tampered payload': `${valid.split('.')[0]}.${payload}.${valid.split('.')[2]}`,
    };
    for (const [what, token] of Object.entries(bad)) {
      const q = await rest(url, 'POST', '/rental/pricing/quote', quoteBody('EQ-006'), bearer(token));
      expect(q.status, what).toBe(401);
      expect(q.body['code'], what).toBe('UNAUTHENTICATED');
      const g = await gql(url, 'mutation { completeBooking(bookingId: "BK-000000000001") { id } }', {}, bearer(token));
      expect(g.status, what).toBe(401);
    }
    // Nothing was reserved by any of them.
    expect(await machineStatus(valid, 'EQ-006')).toBe('available');
    expect(jwksRequests).toBeGreaterThan(0);
  });

  it('API keys are not accepted when only JWTs are configured, and a WebSocket needs a valid token too', async () => {
    expect((await rest(url, 'GET', '/rental/fleet/summary', undefined, { 'x-api-key': 'partner-key-0001' })).status).toBe(401);
    expect((await rest(url, 'GET', '/rental/fleet/summary')).status).toBe(401);
    const refused = wsClient(url, { authorization: `Bearer ${await mint({}, { exp: now() - 60 })}` });
    expect((await within(refused.closed, "the expired token's socket to close")).code).toBe(4401);
    const accepted = wsClient(url, { authorization: `Bearer ${await mint()}` });
    const summary = new Collector<{ fleetSummary: { total: number } }>(accepted.client, '{ fleetSummary { total } }');
    await summary.count(1);
    expect(summary.data[0]).toEqual({ fleetSummary: { total: 15 } });
    await accepted.dispose();
  });

  it('a WebSocket is closed 4401 when its JWT expires, its live subscription with it; nothing runs after', async () => {
    const exp = now() + 3;
    const socket = wsClient(url, { authorization: `Bearer ${await mint({}, { exp })}` });
    const live = new Collector(socket.client, 'subscription { fleetSummaryChanged { total } }');
    const before = new Collector<{ fleetSummary: { total: number } }>(socket.client, '{ fleetSummary { total } }');
    await before.count(1);
    const closed = await within(socket.closed, 'the socket to close when its token expires');
    expect(closed.code).toBe(4401);
    expect(closed.reason).toContain('expired');
    // Closed at exp, not before it (exp has a one-second resolution).
    expect(Date.now()).toBeGreaterThanOrEqual(exp * 1000);
    await live.until((c) => c.error !== undefined || c.completed, undefined, 'the live subscription to end with its socket');
    // A new connection with the expired token is refused at connection_init.
    const again = wsClient(url, { authorization: `Bearer ${await mint({}, { exp })}` });
    expect((await within(again.closed, 'the expired token to be refused')).code).toBe(4401);
  });

  it("a stream over HTTP (SSE, multipart) ends at its JWT's exp with a last error saying why, as a WebSocket closes", async () => {
    const exp = now() + 3;
    const token = await mint({}, { exp });
    const open = (accept: string) =>
      fetch(`${url}/graphql`, {
        method: 'POST',
        headers: { ...bearer(token), 'content-type': 'application/json', accept },
        body: JSON.stringify({ query: 'subscription { fleetSummaryChanged { total } }' }),
      });
    const streams = await Promise.all([open('text/event-stream'), open('multipart/mixed;subscriptionSpec="1.0", application/json')]);
    const bodies = await within(Promise.all(streams.map((res) => res.text())), 'both streams to end when their token expires');
    // Ended at exp, not before it (exp has a one-second resolution), each with its protocol's last error.
    expect(Date.now()).toBeGreaterThanOrEqual(exp * 1000);
    expect(bodies[0]).toMatch(
      /event: next\ndata: \{"errors":\[\{"message":"The credential of this stream expired[^\n]*"UNAUTHENTICATED"[^\n]*\n\nevent: complete/,
    );
    expect(bodies[1]).toMatch(/\{"payload":null,"errors":\[\{"message":"The credential of this stream expired[^\n]*"UNAUTHENTICATED"/);
    expect(bodies[1]!.trimEnd().endsWith('--graphql--')).toBe(true);
    // The expired token opens nothing more.
    expect((await open('text/event-stream')).status).toBe(401);
  });

  it('a token naming a reserved principal or tenant is 401', async () => {
    for (const claims of [{ sub: 'sandbox' }, { sub: 'operator-1' }, { tenant: 'demo' }, { tenant: 'operators' }]) {
      const jwt = new SignJWT({ tenant: 'tenant-jwt', scope: 'fleet:read', ...claims })
        .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
        .setSubject(String((claims as { sub?: string }).sub ?? 'user-42'))
        .setIssuer(ISSUER)
        .setAudience(AUDIENCE)
        .setExpirationTime(now() + 300);
      const res = await rest(url, 'GET', '/rental/fleet/summary', undefined, bearer(await jwt.sign(signing)));
      expect(res.status, JSON.stringify(claims)).toBe(401);
      expect(String(res.body['detail']), JSON.stringify(claims)).toContain('reserved');
    }
  });
});
