import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildSchema, parse } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryUsageStore, SqlUsageStore, UsageRecorder, USAGE_MIGRATIONS, type UsageRow } from '../../../gateway/governance/usage.js';
import { openDatabase } from '../../../platform/db.js';
import { migrate } from '../../../platform/migrate.js';
import { rest } from '../../support/http.js';
import { dwellInput } from '../../support/prediction.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import { Collector, wsClient } from '../../support/ws.js';

/*
 * Field usage per client: which client (name, version, principal) used which schema coordinate through
 * which operation, over GraphQL, REST and subscriptions, read back by an operator.
 */

const OPERATOR = 'usage-operator-key-0001';
const PARTNER = 'usage-partner-key-00002';

interface UsageAnswer {
  coordinate: string;
  deprecated: string | null;
  requests: number;
  clients: UsageRow[];
}

describe('field usage', () => {
  const dir = mkdtempSync(join(tmpdir(), 'usage-'));
  let server: TestServer;
  let url: string;
  beforeAll(async () => {
    const keys = join(dir, 'keys.json');
    writeFileSync(keys, JSON.stringify([{ key: PARTNER, principal: 'partner', tenant: 'tenant-p', scopes: ['fleet:read', 'prediction:read'] }]));
    server = await startTestServer({ env: { API_KEYS: OPERATOR, API_KEYS_FILE: keys } });
    url = server.url;
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const graphql = (query: string, variables: Record<string, unknown>, headers: Record<string, string>) =>
    fetch(`${url}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ query, variables }) });
  const usage = async (coordinate: string, key = OPERATOR) => {
    const res = await fetch(`${url}/admin/usage?coordinate=${encodeURIComponent(coordinate)}`, { headers: { 'x-api-key': key } });
    return { status: res.status, body: (await res.json()) as UsageAnswer & { code?: string; detail?: string } };
  };

  it('counts each client and operation per coordinate: fields, arguments, input fields and enum values, variables included; REST routes and subscriptions too', async () => {
    const web = { 'x-api-key': PARTNER, 'apollographql-client-name': 'web-app', 'apollographql-client-version': '1.2.0' };
    for (let i = 0; i < 2; i++) expect((await graphql('query Fleet { fleetSummary { total available } }', {}, web)).status).toBe(200);
    const dwell = await graphql('query Dwell($input: DwellInput!) { predictDwell(input: $input) { q50Minutes } }', { input: dwellInput }, web);
    expect(dwell.status).toBe(200);
    expect((await rest(url, 'GET', '/rental/fleet/summary', undefined, { 'x-api-key': PARTNER })).status).toBe(200);
    const socket = wsClient(url, { 'x-api-key': OPERATOR });
    const events = await server.live.opened(() => new Collector(socket.client, 'subscription Live { fleetSummaryChanged { cursor } }'));

    const fleet = await usage('Query.fleetSummary');
    expect(fleet.status).toBe(200);
    const byOperation = Object.fromEntries(fleet.body.clients.map((c) => [`${c.client ?? '-'} ${c.operation}`, c]));
    expect(byOperation['web-app Fleet']).toMatchObject({ version: '1.2.0', tenant: 'tenant-p', principal: 'partner', requests: 2 });
    expect(byOperation['- GET /rental/fleet/summary']).toMatchObject({ principal: 'partner', requests: 1 });
    expect(fleet.body.requests).toBe(3);

    expect((await usage('FleetSummary.available')).body.clients.map((c) => c.operation)).toContain('Fleet');
    expect((await usage('Query.predictDwell(input:)')).body.requests).toBe(1);
    // Input fields and enum values sent in variables count too.
    expect((await usage('DwellInput.buildingType')).body.requests).toBe(1);
    expect((await usage(`BuildingType.${dwellInput.buildingType}`)).body.clients[0]).toMatchObject({ client: 'web-app', operation: 'Dwell' });
    expect((await usage('BuildingType.LABORATORY')).body.requests).toBe(0);
    const live = await usage('Subscription.fleetSummaryChanged');
    expect(live.body.clients).toEqual([expect.objectContaining({ principal: 'operator-1', operation: 'Live', requests: 1 })]);
    events.unsubscribe();
    await socket.dispose();
  });

  it('a coordinate that is not one, or that the schema does not have, is a clear error; only operators may read usage', async () => {
    const malformed = await usage('Query.fleet summary');
    expect(malformed.status).toBe(400);
    expect(malformed.body.detail).toContain('not a schema coordinate');
    const missing = await usage('Query.noSuchField');
    expect(missing.status).toBe(404);
    expect(missing.body.detail).toContain('no Query.noSuchField');
    expect((await usage('Query.fleetSummary', PARTNER)).status).toBe(403);
    const badSince = await fetch(`${url}/admin/usage?coordinate=Query.fleetSummary&since=yesterday`, { headers: { 'x-api-key': OPERATOR } });
    expect(badSince.status).toBe(400);
  });
});

describe.each(['database', 'memory'] as const)('the usage recorder (%s store)', (kind) => {
  it('keeps memory bounded whatever clients send: past the limit, operations count as (other), and every request is counted', async () => {
    const db = kind === 'database' ? await openDatabase({}) : null;
    if (db) await migrate(db, [USAGE_MIGRATIONS]);
    const schema = buildSchema('type Query { a: Int b(x: Int): Int }');
    const store = db ? new SqlUsageStore(db) : new MemoryUsageStore();
    const recorder = new UsageRecorder({ store, schema: () => schema, bucketMs: 3_600_000, retentionMs: 86_400_000, maxOperations: 10 });
    const principal = { id: 'p', tenant: 't', scopes: [] };
    for (let i = 0; i < 500; i++) {
      const text = `query Op${i} { a b(x: ${i}) }`;
      recorder.record({ name: 'flood', version: null, principal }, text, parse(text), `Op${i}`, {});
    }
    expect(recorder.pendingEntries).toBe(11);
    const rows = await recorder.usage('Query.a', new Date(Date.now() - 60_000));
    expect(rows.reduce((sum, r) => sum + r.requests, 0)).toBe(500);
    expect(rows.find((r) => r.operation === '(other)')?.requests).toBe(490);
    expect(rows[0]).toMatchObject({ client: 'flood', operation: '(other)', tenant: 't', principal: 'p' });
    expect(recorder.pendingEntries).toBe(0);
    // Flushes add up.
    const text = 'query Op0 { a b(x: 0) }';
    recorder.record({ name: 'flood', version: null, principal }, text, parse(text), 'Op0', {});
    expect((await recorder.usage('Query.b(x:)', new Date(Date.now() - 60_000))).find((r) => r.operation === 'Op0')?.requests).toBe(2);
    await db?.close();
  });
});
