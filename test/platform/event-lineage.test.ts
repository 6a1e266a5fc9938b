import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LINEAGE_HEADER, OUTBOX_ID_HEADER } from '../../platform/event-relay.js';
import { hoursFromNow, rest } from '../support/http.js';
import { NATS_SERVER, TestNats } from '../support/nats.js';
import { startTestServer, TEST_DATABASE_URL, type TestServer } from '../support/server.js';
import { until } from '../support/wait.js';
import { Collector, wsClient } from '../support/ws.js';

/*
 * An event stream and its database are one lineage. A stream filled from another database (a new
 * database, a second deployment on the same stream) is refused loudly: nothing is relayed, /health and
 * /metrics say why and what to do, the events wait in the outbox (and this deployment's subscribers still
 * get them, from the outbox); once the stream is started afresh, they are relayed. A database restored
 * from a backup older than its stream goes on after the stream's last id: no cursor is ever reused.
 * Against a nats-server of the test's own (and a PostgreSQL schema of its own for the restore).
 */

if (!NATS_SERVER) console.warn('[event-lineage] no nats-server installed: skipped (Debian package nats-server, or NATS_SERVER_PATH)');

interface Message {
  outboxId: string;
  lineage: string;
}

async function contents(jsm: JetStreamManager, stream: string): Promise<Message[]> {
  const info = await jsm.streams.info(stream);
  const out: Message[] = [];
  for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
    const m = await jsm.streams.getMessage(stream, { seq });
    if (m) out.push({ outboxId: m.header.get(OUTBOX_ID_HEADER), lineage: m.header.get(LINEAGE_HEADER) });
  }
  return out;
}

const quote = async (server: TestServer, machine: string) => {
  const res = await rest(server.url, 'POST', '/rental/pricing/quote', {
    machine_ids: [machine],
    location_id: 'LOC-001',
    start_time: hoursFromNow(30),
    duration_hours: 2,
  });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
};

const identity = async (server: TestServer) => (await server.db.query<{ id: string }>('SELECT id::text AS id FROM database_identity')).rows[0]!.id;

describe.runIf(NATS_SERVER)('one lineage: a database and its event stream', () => {
  let nats: TestNats;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  beforeAll(async () => {
    nats = await TestNats.start();
    nc = await connect({ servers: nats.url });
    jsm = await jetstreamManager(nc);
  });
  afterAll(async () => {
    await nc?.close();
    await nats?.close();
  });

  it('a new database on an old stream relays nothing, says so, serves its own subscribers from the outbox, and relays everything once the stream starts afresh', async () => {
    const env = { EVENT_BUS_URL: nats.url, EVENT_STREAM: 'LINEAGE_NEW' };
    const first = await startTestServer({ env });
    await quote(first, 'EQ-001');
    await first.relay!.drained();
    const before = await contents(jsm, 'LINEAGE_NEW');
    expect(before.length).toBeGreaterThan(0);
    const firstIdentity = await identity(first);
    expect(new Set(before.map((m) => m.lineage))).toEqual(new Set([firstIdentity]));
    await first.close();

    // Another database, the same stream.
    const second = await startTestServer({ env });
    expect(await identity(second)).not.toBe(firstIdentity);
    const ws = wsClient(second.url);
    const live = await second.live.opened(
      () => new Collector<{ machineStatusChanged: { machine: { id: string } } }>(ws.client, 'subscription { machineStatusChanged { machine { id } } }'),
    );
    await quote(second, 'EQ-002');
    // Its own subscriber gets the event (read from the outbox), while the bus gets nothing.
    await live.until((c) => c.results.length > 0, undefined, "the second deployment's own subscriber");
    expect(live.data[0]!.machineStatusChanged.machine.id).toBe('EQ-002');
    const health = await rest(second.url, 'GET', '/health');
    expect(health.status).toBe(200);
    expect(health.body['status']).toBe('degraded');
    expect(health.body['event_bus']).toMatchObject({ status: 'degraded' });
    expect(String(health.body['event_bus'].reason)).toContain(`holds the events of database ${firstIdentity}`);
    expect(String(health.body['event_bus'].reason)).toContain('npm run event-stream -- reset');
    const metrics = await (await fetch(`${second.url}/metrics`)).text();
    expect(metrics).toMatch(/^event_relay_lineage_mismatch 1$/m);
    const status = await second.relay!.status();
    expect(status.lineage).toBe('foreign');
    expect(status.lagEvents).toBeGreaterThan(0);
    expect(await contents(jsm, 'LINEAGE_NEW')).toEqual(before);

    // Started afresh (the reset command deletes the stream): every event of this database is relayed.
    execFileSync('npx', ['tsx', 'tools/event-stream.ts', 'reset'], {
      env: { ...process.env, EVENT_BUS_URL: nats.url, EVENT_STREAM: 'LINEAGE_NEW' },
      stdio: 'pipe',
    });
    second.relay!.wake();
    await until(
      async () => (await second.relay!.status()).lineage === 'ok' && (await second.relay!.status()).lagEvents === 0,
      'the relay to resume on the fresh stream',
    );
    const after = await contents(jsm, 'LINEAGE_NEW');
    const outbox = (await second.db.query<{ id: string }>('SELECT id::text AS id FROM outbox ORDER BY outbox.id')).rows.map((r) => r.id);
    expect(after.map((m) => m.outboxId)).toEqual(outbox);
    expect(new Set(after.map((m) => m.lineage))).toEqual(new Set([await identity(second)]));
    expect((await rest(second.url, 'GET', '/health')).body['status']).toBe('ok');
    await ws.dispose();
    await second.close();
  });

  it('two deployments on one NATS server: different streams both relay; the same stream refuses the second', async () => {
    const a = await startTestServer({ env: { EVENT_BUS_URL: nats.url, EVENT_STREAM: 'LINEAGE_A' } });
    const b = await startTestServer({ env: { EVENT_BUS_URL: nats.url, EVENT_STREAM: 'LINEAGE_B' } });
    await quote(a, 'EQ-003');
    await quote(b, 'EQ-003');
    await a.relay!.drained();
    await b.relay!.drained();
    expect((await a.relay!.status()).lineage).toBe('ok');
    expect((await b.relay!.status()).lineage).toBe('ok');
    const c = await startTestServer({ env: { EVENT_BUS_URL: nats.url, EVENT_STREAM: 'LINEAGE_A' } });
    expect((await c.relay!.status()).lineage).toBe('foreign');
    await quote(c, 'EQ-004');
    expect(new Set((await contents(jsm, 'LINEAGE_A')).map((m) => m.lineage))).toEqual(new Set([await identity(a)]));
    await c.close();
    await b.close();
    await a.close();
  });

  it('a cursor older than the stream keeps (its age and size limits dropped the oldest) is answered CURSOR_EXPIRED, naming the oldest still there', async () => {
    const server = await startTestServer({ env: { EVENT_BUS_URL: nats.url, EVENT_STREAM: 'LINEAGE_KEPT' } });
    for (const m of ['EQ-008', 'EQ-009', 'EQ-010']) await quote(server, m);
    await server.relay!.drained();
    // The stream keeps only its last two events, as its limits would after long enough.
    await jsm.streams.purge('LINEAGE_KEPT', { keep: 2 });
    const kept = await contents(jsm, 'LINEAGE_KEPT');
    const oldest = (BigInt(kept[0]!.outboxId) - 1n).toString();
    const ws = wsClient(server.url);
    const query = 'subscription($a: ID) { machineStatusChanged(after: $a) { cursor } }';
    const expired = new Collector(ws.client, query, { a: '0' });
    await expired.until((c) => c.results.length > 0 || c.error !== undefined);
    expect(expired.results[0]?.errors?.[0]?.extensions).toMatchObject({ code: 'CURSOR_EXPIRED', oldestCursor: oldest });
    const whole = new Collector<{ machineStatusChanged: { cursor: string } }>(ws.client, query, { a: oldest });
    await whole.until((c) => c.results.length > 0 || c.error !== undefined);
    expect(whole.results[0]?.errors).toBeUndefined();
    // The first event after the oldest cursor: one the stream still holds.
    expect(kept.map((m) => m.outboxId)).toContain(whole.data[0]!.machineStatusChanged.cursor);
    await ws.dispose();
    await server.close();
  });

  it.runIf(TEST_DATABASE_URL)(
    'a database restored from a pg_dump older than its stream goes on after the stream: no id is reused, the lost range is said',
    async () => {
      const schema = `lineage_${Date.now().toString(36)}`;
      const env = { EVENT_BUS_URL: nats.url, EVENT_STREAM: 'LINEAGE_RESTORE' };
      const dir = mkdtempSync(join(tmpdir(), 'restore-'));
      const dump = join(dir, 'ops.dump');
      try {
        const server = await startTestServer({ backend: 'postgres', schema, env });
        await quote(server, 'EQ-005');
        await server.relay!.drained();
        execFileSync('pg_dump', ['-Fc', '-n', schema, '-f', dump, TEST_DATABASE_URL!]);
        const atBackup = (await server.db.query<{ max: string }>('SELECT max(id)::text AS max FROM outbox')).rows[0]!.max;
        await quote(server, 'EQ-006');
        await server.relay!.drained();
        const relayed = await contents(jsm, 'LINEAGE_RESTORE');
        const newestRelayed = relayed.at(-1)!.outboxId;
        expect(BigInt(newestRelayed)).toBeGreaterThan(BigInt(atBackup));
        await server.close();
        // The database is lost and restored from the backup.
        execFileSync('psql', [TEST_DATABASE_URL!, '-qc', `DROP SCHEMA ${schema} CASCADE`]);
        execFileSync('pg_restore', ['-d', TEST_DATABASE_URL!, dump]);
        const restored = await startTestServer({ backend: 'postgres', schema, env });
        expect((await restored.relay!.status()).lineage).toBe('ok');
        // A subscriber holding the newest cursor the stream gave resumes: the next event comes after it.
        const ws = wsClient(restored.url);
        const resumed = new Collector<{ machineStatusChanged: { cursor: string; machine: { id: string } } }>(
          ws.client,
          'subscription($a: ID) { machineStatusChanged(after: $a) { cursor machine { id } } }',
          { a: newestRelayed },
        );
        await quote(restored, 'EQ-007');
        await resumed.until((c) => c.results.length > 0, undefined, 'the event after the restore');
        expect(BigInt(resumed.data[0]!.machineStatusChanged.cursor)).toBeGreaterThan(BigInt(newestRelayed));
        expect(resumed.data[0]!.machineStatusChanged.machine.id).toBe('EQ-007');
        await restored.relay!.drained();
        const ids = (await contents(jsm, 'LINEAGE_RESTORE')).map((m) => BigInt(m.outboxId));
        // Strictly increasing: no id in the stream twice, none going back.
        for (let i = 1; i < ids.length; i++) expect(ids[i]! > ids[i - 1]!, `stream ids at ${i}`).toBe(true);
        await ws.dispose();
        await restored.close();
      } finally {
        execFileSync('psql', [TEST_DATABASE_URL!, '-qc', `DROP SCHEMA IF EXISTS ${schema} CASCADE`]);
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );
});
