import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { webcrypto } from 'node:crypto';
import { exportJWK, generateKeyPair, SignJWT, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gql } from '../../support/http.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import { within } from '../../support/wait.js';
import { Collector, wsClient } from '../../support/ws.js';

/*
 * A credential that stops being valid ends what it opened, on every transport: a key removed from
 * API_KEYS_FILE (on reload) closes its WebSockets (4401) and ends its HTTP streams with a last
 * UNAUTHENTICATED error; a token whose signing key left the identity provider's JWKS does the same within
 * AUTH_RECHECK_S. Other principals' connections go on.
 */

type CryptoKey = webcrypto.CryptoKey;

const SUBSCRIPTION = 'subscription { fleetSummaryChanged { total } }';

/** Opens an SSE subscription; resolves to its whole body once the server ends it. */
async function sse(url: string, headers: Record<string, string>): Promise<{ status: number; body: Promise<string> }> {
  const res = await fetch(`${url}/graphql`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({ query: SUBSCRIPTION }),
  });
  return { status: res.status, body: res.text() };
}

describe('a key removed from API_KEYS_FILE', () => {
  const dir = mkdtempSync(join(tmpdir(), 'revocation-'));
  const file = join(dir, 'keys.json');
  const GONE = 'revoked-partner-key-00001';
  const KEPT = 'kept-partner-key-0000002';
  const entry = (key: string, principal: string) => ({ key, principal, tenant: 'revocation', scopes: ['fleet:read'] });
  let server: TestServer;
  beforeAll(async () => {
    writeFileSync(file, JSON.stringify([entry(GONE, 'gone'), entry(KEPT, 'kept')]));
    server = await startTestServer({ env: { API_KEYS_FILE: file } });
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('ends its sockets (4401) and streams (a last UNAUTHENTICATED error) on reload; a bad file changes nothing; the others go on', async () => {
    const gone = wsClient(server.url, { 'x-api-key': GONE });
    const kept = wsClient(server.url, { 'x-api-key': KEPT });
    const [, keptLive] = await server.live.opened(() => [new Collector(gone.client, SUBSCRIPTION), new Collector(kept.client, SUBSCRIPTION)], {
      subscriptions: 2,
    });
    const stream = await sse(server.url, { 'x-api-key': GONE });
    expect(stream.status).toBe(200);

    // A file that does not load: refused whole, every key as before.
    writeFileSync(file, '[{"key":"short"}]');
    const refused = await server.reloadKeys();
    expect(refused.ok).toBe(false);
    expect(!refused.ok && refused.error).toMatch(/API_KEYS_FILE/);
    expect((await gql(server.url, '{ fleetSummary { total } }', {}, { 'x-api-key': GONE })).status).toBe(200);

    writeFileSync(file, JSON.stringify([entry(KEPT, 'kept')]));
    const reloaded = await server.reloadKeys();
    expect(reloaded).toEqual({ ok: true, keys: 1, ended: 2 });
    const closed = await within(gone.closed, 'the removed key to close its socket');
    expect(closed.code).toBe(4401);
    expect(closed.reason).toContain('no longer valid');
    const body = await within(stream.body, 'the removed key to end its stream');
    expect(body).toMatch(/"code":"UNAUTHENTICATED"[\s\S]*event: complete/);
    expect(body).toContain('no longer valid (invalid API key)');
    // The key runs nothing more; the other principal's subscription goes on.
    expect((await gql(server.url, '{ fleetSummary { total } }', {}, { 'x-api-key': GONE })).status).toBe(401);
    expect(keptLive.error).toBeUndefined();
    expect(keptLive.completed).toBe(false);
    await gone.dispose();
    await kept.dispose();
  });
});

describe('a token whose signing key left the JWKS', () => {
  const ISSUER = 'https://idp.revocation.test';
  const AUDIENCE = 'ops-supergraph';
  let jwks: Server;
  let served: JWK[] = [];
  let server: TestServer;
  let oldKey: CryptoKey;
  let newKey: CryptoKey;
  let newJwk: JWK;
  beforeAll(async () => {
    const old = await generateKeyPair('ES256', { extractable: true });
    const next = await generateKeyPair('ES256', { extractable: true });
    oldKey = old.privateKey;
    newKey = next.privateKey;
    const oldJwk = { ...(await exportJWK(old.publicKey)), kid: 'old', alg: 'ES256', use: 'sig' };
    newJwk = { ...(await exportJWK(next.publicKey)), kid: 'new', alg: 'ES256', use: 'sig' };
    served = [oldJwk, newJwk];
    jwks = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: served })));
    await new Promise<void>((resolve) => jwks.listen(0, '127.0.0.1', resolve));
    const jwksUrl = `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks.json`;
    server = await startTestServer({ env: { AUTH_JWKS_URL: jwksUrl, AUTH_ISSUER: ISSUER, AUTH_AUDIENCE: AUDIENCE, AUTH_RECHECK_S: '1' } });
  });
  afterAll(() => new Promise<void>((resolve) => jwks.close(() => resolve())));

  const mint = (key: CryptoKey, kid: string, subject: string) =>
    new SignJWT({ tenant: 'tenant-jwt', scope: 'fleet:read' })
      .setProtectedHeader({ alg: 'ES256', kid })
      .setSubject(subject)
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setIssuedAt()
      .setExpirationTime('10m')
      .sign(key);

  it('ends the sockets and streams it opened within AUTH_RECHECK_S; a token of the key that stays goes on', async () => {
    const rotated = `Bearer ${await mint(oldKey, 'old', 'user-7')}`;
    const current = `Bearer ${await mint(newKey, 'new', 'user-8')}`;
    const socket = wsClient(server.url, { authorization: rotated });
    const stays = wsClient(server.url, { authorization: current });
    const [, live] = await server.live.opened(() => [new Collector(socket.client, SUBSCRIPTION), new Collector(stays.client, SUBSCRIPTION)], {
      subscriptions: 2,
    });
    const stream = await sse(server.url, { authorization: rotated });
    expect(stream.status).toBe(200);
    // The provider rotates: the old key leaves its JWKS.
    served = [newJwk];
    const closed = await within(socket.closed, 'the rotated token to close its socket');
    expect(closed.code).toBe(4401);
    expect(await within(stream.body, 'the rotated token to end its stream')).toMatch(/"code":"UNAUTHENTICATED"[\s\S]*event: complete/);
    expect((await gql(server.url, '{ fleetSummary { total } }', {}, { authorization: rotated })).status).toBe(401);
    expect(live.error).toBeUndefined();
    expect((await gql(server.url, '{ fleetSummary { total } }', {}, { authorization: current })).status).toBe(200);
    await socket.dispose();
    await stays.dispose();
  });
});
