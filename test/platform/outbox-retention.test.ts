import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { outboxHorizon, pruneOutbox } from '../../platform/outbox-retention.js';
import { SYSTEM_VIEWER } from '../../platform/ownership.js';
import { subgraphs } from '../../subgraphs/registry.js';
import { hoursFromNow, rest } from '../support/http.js';
import { backends, startTestServer, type TestServer } from '../support/server.js';
import { until } from '../support/wait.js';
import { Collector, wsClient, type WsClient } from '../support/ws.js';

/*
 * The outbox is bounded: events older than OUTBOX_RETENTION_S go (never one the event bus has not
 * received), high-rate topics keep less (fleet ticks an hour, a session's metrics and a delivery's positions
 * only the newest per key after an hour), in batches, one process at a time. A resume cursor older than what
 * is kept is answered CURSOR_EXPIRED naming the oldest cursor still available, never replayed with a gap.
 */

const policies = subgraphs.flatMap((m) => m.retention ?? []);
const DAY = 86_400;

describe.each(backends)('outbox retention (%s)', (backend) => {
  let server: TestServer;
  let ws: WsClient;
  beforeAll(async () => {
    // The pruner is called by the test, not by its timer; bonding ticks fast to write metrics events.
    server = await startTestServer({ backend, env: { OUTBOX_PRUNE_INTERVAL_MS: '86400000', BONDING_TICK_MS: '50', FLEET_TICK_MS: '100' } });
    ws = wsClient(server.url);
  });
  afterAll(async () => {
    await ws?.dispose();
  });

  const newest = async () => BigInt((await server.db.query<{ max: string }>('SELECT max(id)::text AS max FROM outbox')).rows[0]!.max);
  const age = (seconds: number, where: string, params: unknown[] = []) =>
    server.db.query(`UPDATE outbox SET created_at = now() - make_interval(secs => ${seconds}) WHERE ${where}`, params);
  const count = async (where: string, params: unknown[] = []) =>
    (await server.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM outbox WHERE ${where}`, params)).rows[0]!.n;
  const quote = async (machine: string) =>
    expect(
      (
        await rest(server.url, 'POST', '/rental/pricing/quote', {
          machine_ids: [machine],
          location_id: 'LOC-001',
          start_time: hoursFromNow(30),
          duration_hours: 2,
        })
      ).status,
    ).toBe(200);
  const firstResult = async (query: string, variables: Record<string, unknown>) => {
    const c = new Collector(ws.client, query, variables);
    await c.until((x) => x.results.length > 0 || x.error !== undefined || x.completed);
    c.unsubscribe();
    return c;
  };

  it('prunes what is older than the retention, in batches, never what is not yet relayed, and says when a cursor is older than what is kept', async () => {
    await quote('EQ-008');
    await quote('EQ-009');
    const old = await newest();
    await quote('EQ-010');
    const total = await count('id <= $1', [old.toString()]);
    await age(8 * DAY, 'id <= $1', [old.toString()]);
    // An event bus that has received only up to `old - 2`: the last two aged events stay.
    const partial = await pruneOutbox(server.db, { retentionS: 7 * DAY, policies, relayedThrough: async () => old - 2n, batch: 3 });
    expect(partial.busy).toBe(false);
    expect(await count('id <= $1', [(old - 2n).toString()])).toBe(0);
    expect(await count('id > $1 AND id <= $2', [(old - 2n).toString(), old.toString()])).toBe(2);
    expect(partial.pruned).toBe(total - 2);
    // Everything relayed now: those go too. Younger events stay.
    await pruneOutbox(server.db, { retentionS: 7 * DAY, policies, relayedThrough: async () => null, batch: 3 });
    expect(await count('id <= $1', [old.toString()])).toBe(0);
    expect(await count('id > $1', [old.toString()])).toBeGreaterThan(0);
    expect(await outboxHorizon(server.db, 'rental.machine_status')).toBe(old);

    // A cursor older than that: CURSOR_EXPIRED, naming the oldest cursor still available; from it, the stream is whole.
    const machineEvents = 'subscription($a: ID) { machineStatusChanged(after: $a) { cursor machine { id } } }';
    const expired = await firstResult(machineEvents, { a: '0' });
    expect(expired.results[0]?.errors?.[0]?.extensions).toMatchObject({ code: 'CURSOR_EXPIRED', oldestCursor: old.toString() });
    expect(expired.results[0]?.errors?.[0]?.message).toContain(`the oldest cursor to resume from is ${old}`);
    const resumed = await firstResult(machineEvents, { a: old.toString() });
    expect(resumed.results[0]?.errors).toBeUndefined();
    expect((resumed.results[0]?.data as { machineStatusChanged: { machine: { id: string } } }).machineStatusChanged.machine.id).toBe('EQ-010');
    // A malformed or future cursor is still a plain bad input.
    expect((await firstResult(machineEvents, { a: 'abc' })).results[0]?.errors?.[0]?.extensions?.['code']).toBe('BAD_USER_INPUT');
    expect((await firstResult(machineEvents, { a: String(2n ** 62n) })).results[0]?.errors?.[0]?.extensions?.['code']).toBe('BAD_USER_INPUT');
  });

  it("high-rate topics keep less: fleet ticks an hour, a session's metrics only the newest after an hour; other topics keep their cursors", async () => {
    const start = await rest(server.url, 'POST', '/bonding/api/bonding/start?seed=3');
    expect(start.status).toBe(200);
    const session = start.body['session_id'] as string;
    await until(
      async () => (await count(`topic = 'bonding.session' AND key = $1 AND payload->>'kind' = 'metrics'`, [session])) >= 5,
      'metrics events of the session',
    );
    await until(async () => (await count(`topic = 'optimization.positions'`)) >= 2, 'fleet ticks');
    const beforeMachines = await outboxHorizon(server.db, 'rental.machine_status');
    // Closed first, so that no fresh metrics event (newer than every aged one) arrives meanwhile.
    expect((await rest(server.url, 'POST', `/bonding/api/bonding/close?session_id=${session}`)).status).toBe(200);
    await age(2 * 3600, `topic IN ('bonding.session', 'optimization.positions')`);
    const result = await pruneOutbox(server.db, { retentionS: 7 * DAY, policies, relayedThrough: async () => null });
    expect(result.byTopic['optimization.positions']).toBeGreaterThanOrEqual(2);
    // Of the session's metrics events only the newest is left; its start is kept.
    const left = (
      await server.db.query<{ kind: string }>(
        `SELECT payload->>'kind' AS kind FROM outbox WHERE topic = 'bonding.session' AND key = $1 AND created_at < now() - interval '1 hour' ORDER BY outbox.id`,
        [session],
      )
    ).rows.map((r) => r.kind);
    expect(left.filter((k) => k === 'metrics')).toHaveLength(1);
    expect(left[0]).toBe('started');
    // The session's stream from before the compaction: expired; the machines' cursors are untouched.
    const sessionHorizon = await outboxHorizon(server.db, 'bonding.session');
    expect(sessionHorizon).toBeGreaterThan(0n);
    const expired = await firstResult('subscription($s: ID!, $a: ID) { bondingSessionUpdated(sessionId: $s, after: $a) { cursor } }', {
      s: session,
      a: (sessionHorizon - 1n).toString(),
    });
    expect(expired.results[0]?.errors?.[0]?.extensions).toMatchObject({ code: 'CURSOR_EXPIRED', oldestCursor: sessionHorizon.toString() });
    expect(await outboxHorizon(server.db, 'rental.machine_status')).toBe(beforeMachines);
  });

  it('one process at a time: concurrent pruners never delete twice or fail', async () => {
    for (const m of ['EQ-011', 'EQ-012', 'EQ-013']) await quote(m);
    await age(8 * DAY, 'true');
    // Only the aged rows count: the fleet simulation goes on writing fresh events meanwhile.
    const aged = `created_at < now() - interval '7 days'`;
    const before = await count(aged);
    const runs = await Promise.all([1, 2, 3].map(() => pruneOutbox(server.db, { retentionS: 7 * DAY, policies, relayedThrough: async () => null, batch: 2 })));
    // Each row deleted once: what the runs report deleting is what is gone.
    expect(runs.reduce((n, r) => n + r.pruned, 0)).toBe(before - (await count(aged)));
    expect(runs.some((r) => r.pruned > 0)).toBe(true);
    // Whatever the interleaving, a later run finishes the job.
    await pruneOutbox(server.db, { retentionS: 7 * DAY, policies, relayedThrough: async () => null });
    expect(await count(`created_at < now() - interval '7 days'`)).toBe(0);
  });
});

describe('a replay the pruner overtook', () => {
  it('ends CURSOR_EXPIRED instead of going on with a gap, even past the cursor check', async () => {
    // Every replay read from the log (no memory), as on a process that restarted.
    const server = await startTestServer({ env: { OUTBOX_PRUNE_INTERVAL_MS: '86400000', EVENT_REPLAY_MEMORY: '0' } });
    for (const m of ['EQ-014', 'EQ-015']) {
      expect(
        (await rest(server.url, 'POST', '/rental/pricing/quote', { machine_ids: [m], location_id: 'LOC-001', start_time: hoursFromNow(30), duration_hours: 2 }))
          .status,
      ).toBe(200);
    }
    await server.db.query(`UPDATE outbox SET created_at = now() - interval '8 days' WHERE id <= (SELECT min(id) + 1 FROM outbox)`);
    await pruneOutbox(server.db, { retentionS: 7 * DAY, policies, relayedThrough: async () => null });
    // A stream opened from a cursor the check would have refused (the pruner ran after the check).
    const stream = server.events.stream('rental.machine_status', { after: '0', viewer: SYSTEM_VIEWER });
    const error = await (async () => {
      try {
        for await (const event of stream) void event;
      } catch (e) {
        return e as { extensions?: Record<string, unknown> };
      }
      return null;
    })();
    expect(error?.extensions).toMatchObject({ code: 'CURSOR_EXPIRED' });
  });
});
