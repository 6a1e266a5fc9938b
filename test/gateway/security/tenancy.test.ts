import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditEntry } from '../../../gateway/security/audit.js';
import { PRINCIPAL_HEADER, PrincipalSigner } from '../../../platform/principal.js';
import { gql, hoursFromNow, rest } from '../../support/http.js';
import { setups, startTestServer, type TestServer } from '../../support/server.js';
import { Collector, wsClient } from '../../support/ws.js';

/*
 * Two partners (tenants A and B) and an operator, configured as a deployment would (API_KEYS_FILE and
 * API_KEYS): each partner sees and changes only its own quotes, bookings, tracking and bonding sessions;
 * another tenant's id answers exactly as an id that does not exist; the operator sees every tenant.
 */

const A = 'partner-a-key-0000000001';
const B = 'partner-b-key-0000000002';
const OPS = 'operator-key-0000000003';
const dir = mkdtempSync(join(tmpdir(), 'tenancy-'));
const keyFile = join(dir, 'keys.json');
const allScopes = ['fleet:read', 'rental:read', 'rental:book', 'prediction:read', 'bonding:use'];
writeFileSync(
  keyFile,
  JSON.stringify([
    { key: A, principal: 'app-a', tenant: 'tenant-a', scopes: allScopes },
    // Stored as its digest, as a deployment that keeps no raw keys would.
    { key_sha256: (await import('node:crypto')).createHash('sha256').update(B).digest('hex'), principal: 'app-b', tenant: 'tenant-b', scopes: allScopes },
  ]),
);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const as = (key: string) => ({ 'x-api-key': key });
const SECRET = randomBytes(24).toString('hex');

describe.each(setups)('tenants see and change only their own ($name)', ({ backend, mode }) => {
  let server: TestServer;
  let url: string;
  const audit: AuditEntry[] = [];
  beforeAll(async () => {
    server = await startTestServer({ backend, mode, env: { API_KEYS_FILE: keyFile, API_KEYS: OPS, PRINCIPAL_SECRET: SECRET }, audit: (e) => audit.push(e) });
    ({ url } = server);
  });

  const quote = (key: string, machine: string) =>
    rest(url, 'POST', '/rental/pricing/quote', { machine_ids: [machine], location_id: 'LOC-001', start_time: hoursFromNow(4), duration_hours: 2 }, as(key));
  const book = async (key: string, machine: string, customer: string) => {
    const q = await quote(key, machine);
    expect(q.status).toBe(200);
    const b = await rest(url, 'POST', '/rental/booking/confirm', { quote_id: q.body['quote_id'], customer_name: customer }, as(key));
    expect(b.status).toBe(200);
    return { quoteId: q.body['quote_id'] as string, bookingId: b.body['booking_id'] as string };
  };

  it("quotes, bookings, the ledger, tracking, confirm and complete: another tenant's id is 404 as an unknown one", async () => {
    const a = await book(A, 'EQ-001', 'Klant van A');
    const aQuote = await quote(A, 'EQ-002');
    const unknownBooking = 'BK-0000000000AA';

    // B's ledger: none of A's bookings, and a total that counts B's alone.
    const ledgerB = await rest(url, 'GET', '/rental/bookings', undefined, as(B));
    expect(ledgerB.status).toBe(200);
    expect(ledgerB.body['bookings']).toEqual([]);
    expect(ledgerB.body['total']).toBe(0);
    const ledgerA = await rest(url, 'GET', '/rental/bookings', undefined, as(A));
    expect(ledgerA.body['bookings'].map((x: { booking_id: string }) => x.booking_id)).toEqual([a.bookingId]);
    expect(ledgerA.body['bookings'][0].customer_name).toBe('Klant van A');
    expect(ledgerA.body['total']).toBe(1);
    // The operator sees every tenant.
    const ledgerOps = await rest(url, 'GET', '/rental/bookings', undefined, as(OPS));
    expect(ledgerOps.body['bookings'].map((x: { booking_id: string }) => x.booking_id)).toContain(a.bookingId);

    // Tracking, completion and confirmation of A's by B: exactly the answers for ids that do not exist.
    const strip = (body: Record<string, unknown>) => ({
      ...body,
      detail: String(body['detail']).replace(/BK-[0-9A-F]{12}|[0-9a-f-]{36}/g, '<id>'),
      instance: '<path>',
    });
    for (const [path, method, body] of [
      [`/rental/booking/${a.bookingId}/track`, 'GET', undefined],
      [`/rental/booking/${a.bookingId}/complete`, 'POST', undefined],
    ] as const) {
      const theirs = await rest(url, method, path, body, as(B));
      const unknown = await rest(url, method, path.replace(a.bookingId, unknownBooking), body, as(B));
      expect(theirs.status).toBe(404);
      expect(strip(theirs.body)).toEqual(strip(unknown.body));
    }
    const confirmTheirs = await rest(url, 'POST', '/rental/booking/confirm', { quote_id: aQuote.body['quote_id'], customer_name: 'Kaper BV' }, as(B));
    const confirmUnknown = await rest(
      url,
      'POST',
      '/rental/booking/confirm',
      { quote_id: '00000000-0000-4000-8000-000000000000', customer_name: 'Kaper BV' },
      as(B),
    );
    expect(confirmTheirs.status).toBe(404);
    expect(strip(confirmTheirs.body)).toEqual(strip(confirmUnknown.body));

    // GraphQL: null, as for nothing; the entity reference path answers the same.
    const read = await gql(
      url,
      'query ($b: ID!, $q: ID!) { booking(id: $b) { id customerName } quote(id: $q) { id } tracking(bookingId: $b) { eta } }',
      { b: a.bookingId, q: a.quoteId },
      as(B),
    );
    expect(read.errors).toBeUndefined();
    expect(read.data).toEqual({ booking: null, quote: null, tracking: null });

    // Nothing changed: A still tracks and completes its own; its quote is still open for A.
    expect((await rest(url, 'GET', `/rental/booking/${a.bookingId}/track`, undefined, as(A))).body['status']).toBe('scheduled');
    const confirmOwn = await rest(url, 'POST', '/rental/booking/confirm', { quote_id: aQuote.body['quote_id'], customer_name: 'Klant van A' }, as(A));
    expect(confirmOwn.status).toBe(200);
    // The operator completes A's booking on A's behalf.
    expect((await rest(url, 'POST', `/rental/booking/${a.bookingId}/complete`, undefined, as(OPS))).status).toBe(200);

    // The audit trail: every attempted change once, with who, what, on what and how it ended.
    const about = (target: string) =>
      audit.filter((e) => e.target === target).map(({ principal, tenant, operation, outcome }) => ({ principal, tenant, operation, outcome }));
    expect(about(a.quoteId)).toEqual([
      { principal: 'app-a', tenant: 'tenant-a', operation: 'createQuote', outcome: 'ok' },
      { principal: 'app-a', tenant: 'tenant-a', operation: 'confirmBooking', outcome: 'ok' },
    ]);
    expect(about(a.bookingId)).toEqual([
      { principal: 'app-b', tenant: 'tenant-b', operation: 'completeBooking', outcome: 'NOT_FOUND' },
      { principal: 'operator-1', tenant: 'operators', operation: 'completeBooking', outcome: 'ok' },
    ]);
    expect(about(aQuote.body['quote_id'])).toEqual([
      { principal: 'app-a', tenant: 'tenant-a', operation: 'createQuote', outcome: 'ok' },
      { principal: 'app-b', tenant: 'tenant-b', operation: 'confirmBooking', outcome: 'NOT_FOUND' },
      { principal: 'app-a', tenant: 'tenant-a', operation: 'confirmBooking', outcome: 'ok' },
    ]);
    expect(audit.every((e) => typeof e.requestId === 'string' && e.requestId.length > 0)).toBe(true);
  });

  it("a tenant cannot follow another tenant's delivery: trackingUpdated answers NOT_FOUND", async () => {
    const a = await book(A, 'EQ-003', 'Volg mij BV');
    const client = wsClient(url, { 'x-api-key': B });
    const theirs = new Collector(client.client, 'subscription ($id: ID!) { trackingUpdated(bookingId: $id, after: "0") { status } }', { id: a.bookingId });
    await theirs.until((c) => c.results.length > 0 || c.error !== undefined || c.completed);
    expect(JSON.stringify(theirs.results[0]?.errors ?? theirs.error)).toContain('NOT_FOUND');
    const own = wsClient(url, { 'x-api-key': A });
    const mine = new Collector<{ trackingUpdated: { status: string } }>(
      own.client,
      'subscription ($id: ID!) { trackingUpdated(bookingId: $id, after: "0") { status } }',
      { id: a.bookingId },
    );
    await mine.count(1);
    expect(mine.data[0]!.trackingUpdated.status).toBe('SCHEDULED');
    await client.dispose();
    await own.dispose();
  });

  it("bonding sessions are their principal's; keys are distilled and shown to it alone", async () => {
    const started = await rest(url, 'POST', '/bonding/api/bonding/start?seed=5', undefined, as(A));
    expect(started.status).toBe(200);
    expect(started.body['user_id']).toBe('app-a');
    const id = started.body['session_id'] as string;
    // B names A as the user: refused; B asks for the session: nothing there.
    const posing = await rest(url, 'POST', '/bonding/api/bonding/start?user_id=app-a', undefined, as(B));
    expect(posing.status).toBe(403);
    expect(posing.body['code']).toBe('FORBIDDEN');
    expect((await rest(url, 'GET', `/bonding/api/bonding/status?user_id=app-a`, undefined, as(B))).status).toBe(403);
    expect((await rest(url, 'GET', `/bonding/api/bonding/status?session_id=${id}`, undefined, as(B))).status).toBe(404);
    const key = 'mutation ($id: ID!) { generateQuantumKey(input: { sessionId: $id, bits: 128, seed: 3 }) { status key } }';
    const stolen = await gql(url, key, { id }, as(B));
    expect(stolen.errors?.[0]?.extensions?.['code']).toBe('NOT_FOUND');
    expect(JSON.stringify(stolen.data)).not.toMatch(/[0-9a-f]{32}/);
    // The operator sees it, and does not get its keys.
    expect((await rest(url, 'GET', `/bonding/api/bonding/status?session_id=${id}`, undefined, as(OPS))).body['user_id']).toBe('app-a');
    expect((await gql(url, key, { id }, as(OPS))).errors?.[0]?.extensions?.['code']).toBe('FORBIDDEN');
    const own = await gql(url, key, { id }, as(A));
    expect(own.errors).toBeUndefined();
    expect(own.data!['generateQuantumKey']).toMatchObject({ status: 'COMPLETED', key: expect.stringMatching(/^[0-9a-f]{32}$/) });
    // The trail names the key's session and outcome, never its material.
    const keyEntries = audit.filter((e) => e.operation === 'generateQuantumKey' && e.target === id);
    expect(keyEntries.map((e) => [e.principal, e.outcome])).toEqual([
      ['app-b', 'NOT_FOUND'],
      ['operator-1', 'FORBIDDEN'],
      ['app-a', 'ok'],
    ]);
    expect(JSON.stringify(audit)).not.toContain(own.data!['generateQuantumKey'].key);
    // The overview counts the caller's tenant only (an operator's, every tenant's): B learns nothing of A's.
    const open = async (key: string) => (await gql(url, '{ bondingOverview { openSessions } }', {}, as(key))).data?.['bondingOverview'].openSessions as number;
    expect(await open(B)).toBe(0);
    expect(await open(A)).toBeGreaterThanOrEqual(1);
    expect(await open(OPS)).toBeGreaterThanOrEqual(await open(A));
    // B cannot close it; A can.
    expect((await rest(url, 'POST', `/bonding/api/bonding/close?session_id=${id}`, undefined, as(B))).status).toBe(404);
    expect((await rest(url, 'POST', `/bonding/api/bonding/close?session_id=${id}`, undefined, as(A))).body['state']).toBe('closed');
  });

  it.runIf(mode === 'distributed')('a client that reaches a subgraph port directly cannot pose as anyone', async () => {
    const rental = server.subgraphServers.get('rental')!;
    const a = await book(A, 'EQ-004', 'Direct BV');
    const query = { query: 'query ($id: ID!) { booking(id: $id) { id customerName } }', variables: { id: a.bookingId } };
    const post = (headers: Record<string, string>) =>
      fetch(rental.graphqlUrl, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(query) });
    // A forged principal header, signed with another secret, and one signed right but for another call.
    const path = new URL(rental.graphqlUrl).pathname;
    const forged = PrincipalSigner.from('x'.repeat(40))!.sign(
      { id: 'app-a', tenant: 'tenant-a', scopes: ['rental:read'] },
      { subgraph: 'rental', method: 'POST', path, body: JSON.stringify(query) },
    );
    expect((await post({ [PRINCIPAL_HEADER]: forged, 'x-api-key': B })).status).toBe(401);
    const other = JSON.stringify({ query: '{ bookings { totalCount } }' });
    const replayed = PrincipalSigner.from(SECRET)!.sign(
      { id: 'app-a', tenant: 'tenant-a', scopes: ['rental:read'] },
      { subgraph: 'rental', method: 'POST', path, body: other },
    );
    expect((await post({ [PRINCIPAL_HEADER]: replayed, 'x-api-key': B })).status).toBe(401);
    // B's own key, directly: with PRINCIPAL_SECRET the subgraph serves only what its gateway signed.
    expect((await post({ 'x-api-key': B })).status).toBe(401);
    expect((await post({})).status).toBe(401);
  });
});
