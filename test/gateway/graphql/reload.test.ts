import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readSubgraphSdl } from '../../../platform/subgraph.js';
import { composeSubgraphs } from '../../../schema/compose.js';
import { readCheckedInSupergraph } from '../../../schema/supergraph-file.js';
import { subgraphNames } from '../../../schema/subgraphs.js';
import { hoursFromNow, rest } from '../../support/http.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import { until } from '../../support/wait.js';
import { Collector, wsClient } from '../../support/ws.js';

/*
 * A new supergraph without a restart: on SIGHUP (reloadSupergraph) and when SUPERGRAPH_FILE changes, checked
 * first, swapped at once, with requests in flight and live subscriptions kept; a subscription whose fields
 * are gone ends with a clear error; a broken file changes nothing and is reported on /health.
 */

const original = readCheckedInSupergraph();
/** The same supergraph with one harmless difference (a deprecation), so that each reload serves another SDL. */
const variant = composeSubgraphs(
  subgraphNames.map((name) => {
    const sdl = readSubgraphSdl(name);
    return { name, sdl: name === 'rental' ? sdl.replace(/(\n\s*depots: \[Depot!\]!)/, '$1 @deprecated(reason: "read machines { depot }")') : sdl };
  }),
);
/** Without FleetSummaryEvent.at. */
const withoutAt = composeSubgraphs(
  subgraphNames.map((name) => {
    const sdl = readSubgraphSdl(name);
    if (name !== 'rental') return { name, sdl };
    const type = sdl.indexOf('type FleetSummaryEvent {');
    const at = sdl.indexOf('  at: DateTime!', type);
    return { name, sdl: sdl.slice(0, at) + sdl.slice(sdl.indexOf('\n', at) + 1) };
  }),
);

describe('reloading the supergraph', () => {
  const dir = mkdtempSync(join(tmpdir(), 'reload-'));
  const file = join(dir, 'supergraph.graphql');
  let server: TestServer;
  let url: string;
  beforeAll(async () => {
    expect(variant).not.toBe(original);
    writeFileSync(file, original);
    server = await startTestServer({ env: { SUPERGRAPH_FILE: file, SUPERGRAPH_POLL_MS: '100' } });
    url = server.url;
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const quote = (machine: string) =>
    rest(url, 'POST', '/rental/pricing/quote', { machine_ids: [machine], location_id: 'LOC-001', start_time: hoursFromNow(4), duration_hours: 4 });
  const health = async () =>
    (await rest(url, 'GET', '/health')).body['supergraph'] as { hash: string; reloads: number; last_reload_failed?: { error: string } };

  it('10 reloads under a steady stream of queries and live subscriptions: no failed request, no subscription lost', async () => {
    const socket = wsClient(url);
    const [fleet, machines] = await server.live.opened(
      () => [
        new Collector<{ fleetSummaryChanged: { cursor: string; reserved: number } }>(socket.client, 'subscription { fleetSummaryChanged { cursor reserved } }'),
        new Collector<{ machineStatusChanged: { cursor: string } }>(
          socket.client,
          'subscription { machineStatusChanged(machineIds: ["EQ-001", "EQ-002"]) { cursor status } }',
        ),
      ],
      { subscriptions: 2, streams: 2 },
    );
    let stop = false;
    const failures: string[] = [];
    let answered = 0;
    const load = async () => {
      while (!stop) {
        const res = await fetch(`${url}/graphql`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ query: '{ fleetSummary { total available } machines { id status } }' }),
        });
        const body = (await res.json()) as { errors?: unknown[] };
        if (res.status !== 200 || body.errors) failures.push(`${res.status} ${JSON.stringify(body.errors)}`);
        const summary = await rest(url, 'GET', '/rental/fleet/summary');
        if (summary.status !== 200) failures.push(`REST ${summary.status}`);
        answered += 2;
      }
    };
    const workers = [load(), load(), load()];
    const before = (await health()).reloads;
    for (let i = 0; i < 10; i++) {
      writeFileSync(file, i % 2 === 0 ? variant : original);
      const result = server.reloadSupergraph();
      expect(result, `reload ${i + 1}`).toMatchObject({ ok: true, unchanged: false, subscriptionsEnded: 0 });
      await until(() => answered > (i + 1) * 6, 'requests answered between reloads');
    }
    stop = true;
    await Promise.all(workers);
    expect(failures).toEqual([]);
    expect((await health()).reloads).toBe(before + 10);

    // The live subscriptions carry on across the reloads.
    expect((await quote('EQ-001')).status).toBe(200);
    await fleet.count(1);
    await machines.count(1);
    for (const c of [fleet, machines]) {
      expect(c.error).toBeUndefined();
      expect(c.completed).toBe(false);
      expect(c.results.filter((r) => r.errors)).toEqual([]);
    }
    fleet.unsubscribe();
    machines.unsubscribe();
    await socket.dispose();
  });

  it('a changed SUPERGRAPH_FILE is served without a signal; a subscription it no longer allows ends with a clear error, the others go on', async () => {
    writeFileSync(file, original);
    server.reloadSupergraph();
    const socket = wsClient(url);
    const [keeps, loses] = await server.live.opened(
      () => [
        new Collector<{ fleetSummaryChanged: { reserved: number } }>(socket.client, 'subscription { fleetSummaryChanged { reserved } }'),
        new Collector<{ fleetSummaryChanged: { at: string } }>(socket.client, 'subscription Timed { fleetSummaryChanged { at } }'),
      ],
      { subscriptions: 2, streams: 2 },
    );
    const before = (await health()).hash;
    writeFileSync(file, withoutAt);
    await until(async () => (await health()).hash !== before, 'the changed file to be served');
    await until(() => loses.completed, 'the subscription on a removed field to end');
    expect(JSON.stringify(loses.results.flatMap((r) => r.errors ?? []))).toMatch(/supergraph was reloaded.*Cannot query field .*at/);
    // A query on the removed field is now invalid; the rest of the schema answers.
    const gone = await fetch(`${url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: 'subscription { fleetSummaryChanged { at } }' }),
    });
    expect(gone.status).toBe(400);
    const goneBody = (await gone.json()) as { errors: { message: string; extensions: { code: string } }[] };
    expect(goneBody.errors[0]).toMatchObject({ extensions: { code: 'GRAPHQL_VALIDATION_FAILED' }, message: expect.stringContaining('"at"') as string });
    expect((await quote('EQ-003')).status).toBe(200);
    await keeps.count(1);
    expect(keeps.completed).toBe(false);
    expect(keeps.results.filter((r) => r.errors)).toEqual([]);
    keeps.unsubscribe();
    await socket.dispose();
    writeFileSync(file, original);
    await until(async () => (await health()).hash === before, 'the original supergraph to be served again');
  });

  it('a broken file is refused: the supergraph served before stays, and /health says why', async () => {
    const served = (await health()).hash;
    writeFileSync(file, 'this is not a supergraph {');
    const result = server.reloadSupergraph();
    expect(result.ok).toBe(false);
    expect(!result.ok && result.error).toBeTruthy();
    const after = await health();
    expect(after.hash).toBe(served);
    expect(after.last_reload_failed?.error).toBeTruthy();
    const still = await rest(url, 'GET', '/rental/fleet/summary');
    expect(still.status).toBe(200);
    writeFileSync(file, original);
    expect(server.reloadSupergraph()).toMatchObject({ ok: true });
    expect((await health()).last_reload_failed).toBeUndefined();
  });
});

describe('a reload judges live subscriptions again, and holds the supergraph to default deny', () => {
  const dir = mkdtempSync(join(tmpdir(), 'reload-rules-'));
  const file = join(dir, 'supergraph.graphql');
  const READER = 'reload-fleet-reader-key-01';
  let server: TestServer;
  /** fleetSummaryChanged needs rental:read instead of fleet:read. */
  const stricter = composeSubgraphs(
    subgraphNames.map((name) => {
      const sdl = readSubgraphSdl(name);
      if (name !== 'rental') return { name, sdl };
      return { name, sdl: sdl.replace(/(fleetSummaryChanged\(after: ID\): FleetSummaryEvent! @requiresScopes\(scopes: \[\[)"fleet:read"/, '$1"rental:read"') };
    }),
  );
  beforeAll(async () => {
    expect(stricter).not.toBe(original);
    writeFileSync(file, original);
    const keys = join(dir, 'keys.json');
    writeFileSync(keys, JSON.stringify([{ key: READER, principal: 'fleet-reader', tenant: 'reload', scopes: ['fleet:read'] }]));
    server = await startTestServer({ env: { SUPERGRAPH_FILE: file, API_KEYS_FILE: keys, API_KEYS: 'reload-operator-key-00001' } });
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('a live subscription its principal may no longer run ends with FORBIDDEN naming why; an undeclared root or entity field is refused', async () => {
    const socket = wsClient(server.url, { 'x-api-key': READER });
    const [fleet] = await server.live.opened(() => [new Collector(socket.client, 'subscription { fleetSummaryChanged { cursor } }')], {
      subscriptions: 1,
      streams: 1,
    });
    writeFileSync(file, stricter);
    const result = server.reloadSupergraph();
    expect(result).toMatchObject({ ok: true, subscriptionsEnded: 1 });
    await fleet.until((c) => c.completed || c.error !== undefined || c.results.some((r) => r.errors), undefined, 'the subscription to end');
    const last = fleet.results.at(-1);
    expect(last?.errors?.[0]?.extensions?.['code']).toBe('FORBIDDEN');
    expect(last?.errors?.[0]?.message).toMatch(/no longer allowed.*rental:read/);
    await socket.dispose();
    // A supergraph whose root field declares nothing is not served: the one before stays.
    writeFileSync(
      file,
      stricter.replace(
        /(fleetSummaryChanged\(after: ID\): FleetSummaryEvent! @join__field\(graph: RENTAL\)) @requiresScopes\(scopes: \[\["rental:read"\]\]\)/,
        '$1',
      ),
    );
    const refused = server.reloadSupergraph();
    expect(refused.ok).toBe(false);
    expect(!refused.ok && refused.error).toMatch(/declare nothing: Subscription\.fleetSummaryChanged/);
    // So is one where a field a subgraph adds to another's entity declares nothing (compose's check, again).
    const entityField = '@join__field(graph: FEATURES) @requiresScopes(scopes: [["features:read"]])';
    expect(stricter).toContain(entityField);
    writeFileSync(file, stricter.replace(entityField, '@join__field(graph: FEATURES)'));
    const refusedEntity = server.reloadSupergraph();
    expect(!refusedEntity.ok && refusedEntity.error).toMatch(/declare nothing: Machine\.utilizationFeatures$/);
  });
});
