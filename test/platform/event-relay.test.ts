import { jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUDIENCE_HEADER, EventRelay, OUTBOX_ID_HEADER } from '../../platform/event-relay.js';
import { databaseIdentity } from '../../platform/database-identity.js';
import { appendEvents } from '../../platform/outbox.js';
import { hoursFromNow, rest } from '../support/http.js';
import { NATS_SERVER, TestNats } from '../support/nats.js';
import { backends, startTestServer, type TestServer } from '../support/server.js';
import { until } from '../support/wait.js';
import { Collector, wsClient } from '../support/ws.js';

/*
 * The outbox relayed to JetStream (EVENT_BUS_URL): every event once, in outbox order, under
 * `<stream>.<topic>` with its outbox id; a relay that lost its position (a crash between a publish and the
 * position's update) publishes nothing twice; NATS killed and started again: the relay reconnects and
 * catches up, nothing lost. Subscriptions read the stream (live and resumed from a cursor). Against a
 * nats-server of the test's own.
 */

interface MachineEvent {
  machineStatusChanged: { cursor: string; machine: { id: string }; status: string };
}
const MACHINE_EVENTS = 'subscription($after: ID) { machineStatusChanged(after: $after) { cursor machine { id } status } }';

if (!NATS_SERVER) console.warn('[event-relay] no nats-server installed: skipped (Debian package nats-server, or NATS_SERVER_PATH)');

const STREAM = 'T_EVENTS';

interface Relayed {
  seq: number;
  subject: string;
  outboxId: string;
  payload: unknown;
  audience: unknown;
}

async function streamContents(jsm: JetStreamManager): Promise<Relayed[]> {
  const info = await jsm.streams.info(STREAM);
  const out: Relayed[] = [];
  for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
    const m = await jsm.streams.getMessage(STREAM, { seq });
    if (m)
      out.push({ seq, subject: m.subject, outboxId: m.header.get(OUTBOX_ID_HEADER), payload: m.json(), audience: JSON.parse(m.header.get(AUDIENCE_HEADER)) });
  }
  return out;
}

describe.runIf(NATS_SERVER).each(backends)('the outbox relayed to JetStream (%s)', (backend) => {
  let nats: TestNats;
  let server: TestServer;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  let relay: EventRelay;
  const quote = async (machine: string) =>
    expect(
      (
        await rest(server.url, 'POST', '/rental/pricing/quote', {
          machine_ids: [machine],
          location_id: 'LOC-001',
          start_time: hoursFromNow(4),
          duration_hours: 2,
        })
      ).status,
    ).toBe(200);
  const outbox = async () =>
    (
      await server.db.query<{ id: string; topic: string; payload: unknown; audience: unknown }>(
        'SELECT id::text AS id, topic, payload, audience FROM outbox ORDER BY outbox.id',
      )
    ).rows;

  beforeAll(async () => {
    nats = await TestNats.start();
    server = await startTestServer({ backend, env: { EVENT_BUS_URL: nats.url, EVENT_STREAM: STREAM } });
    relay = server.relay!;
    nc = await connect({ servers: nats.url, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
    jsm = await jetstreamManager(nc);
  }, 120_000);
  afterAll(async () => {
    if (relay !== server?.relay) await relay?.close();
    await nc?.close();
    await server?.close();
    await nats?.close();
  });

  it('puts every outbox event in the stream once, in outbox order, with its id, topic, payload and audience ("everyone" explicit)', async () => {
    await quote('EQ-001');
    await quote('EQ-002');
    await relay.drained();
    const rows = await outbox();
    expect(rows.length).toBeGreaterThan(2);
    const relayed = await streamContents(jsm);
    expect(relayed.map((r) => [r.outboxId, r.subject, r.payload, r.audience])).toEqual(rows.map((r) => [r.id, `${STREAM}.${r.topic}`, r.payload, r.audience]));
    expect(relayed.filter((r) => r.audience === 'everyone').length).toBeGreaterThan(0);
    const info = await jsm.streams.info(STREAM);
    expect(info.config.subjects).toEqual([`${STREAM}.>`]);
    expect(info.config.max_age).toBe(7 * 86_400 * 1e9);
    const health = await rest(server.url, 'GET', '/health');
    expect(health.body['event_bus']).toMatchObject({ connected: true, leading: true, relay_lag_events: 0 });
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    expect(metrics).toMatch(/^event_relay_lag_events 0$/m);
    expect(Number(/^event_stream_bytes (\d+)/m.exec(metrics)?.[1])).toBeGreaterThan(0);
  });

  it('subscriptions read the stream: live events arrive, and a resume from a cursor replays exactly what followed it', async () => {
    const c = wsClient(server.url);
    try {
      const live = await server.live.opened(() => new Collector<MachineEvent>(c.client, MACHINE_EVENTS));
      await quote('EQ-007');
      await live.until((x) => x.results.length >= 1 || x.error !== undefined).catch(() => undefined);
      if (live.error) throw new Error(JSON.stringify(live.error));
      await live.count(1);
      await quote('EQ-009');
      await quote('EQ-010');
      expect(live.data[0]!.machineStatusChanged.machine.id).toBe('EQ-007');
      const machineEvents = (await outbox()).filter((r) => r.topic === 'rental.machine_status');
      expect(machineEvents.length).toBeGreaterThan(2);
      const from = machineEvents[1]!.id;
      const resumed = await server.live.opened(() => new Collector<MachineEvent>(c.client, MACHINE_EVENTS, { after: from }));
      const expected = machineEvents.slice(2).map((r) => r.id);
      await resumed.until((x) => x.results.length >= expected.length || x.error !== undefined).catch(() => undefined);
      if (resumed.error) throw new Error(JSON.stringify(resumed.error));
      await resumed.until((x) => x.results.length >= expected.length);
      expect(resumed.data.map((d) => d.machineStatusChanged.cursor)).toEqual(expected);
      // Then live, from the stream as well.
      await quote('EQ-008');
      await resumed.until((x) => x.results.length >= expected.length + 1);
      expect(resumed.data.at(-1)!.machineStatusChanged.machine.id).toBe('EQ-008');
    } finally {
      await c.dispose();
    }
  });

  it('NATS killed and started again: the relay reconnects and catches up, nothing lost, nothing twice', async () => {
    const c = wsClient(server.url);
    const live = await server.live.opened(() => new Collector<MachineEvent>(c.client, MACHINE_EVENTS));
    await nats.down();
    await until(async () => (await rest(server.url, 'GET', '/health')).body['event_bus']?.connected === false, 'health to report the event bus disconnected');
    await quote('EQ-004');
    await quote('EQ-005');
    const behind = await relay.status();
    expect(behind.lagEvents).toBeGreaterThan(0);
    await nats.up();
    await relay.drained(30_000);
    const rows = await outbox();
    const relayed = await streamContents(jsm);
    expect(relayed.map((r) => r.outboxId)).toEqual(rows.map((r) => r.id));
    expect(new Set(relayed.map((r) => r.outboxId)).size).toBe(relayed.length);
    expect((await rest(server.url, 'GET', '/health')).body['event_bus']).toMatchObject({ connected: true, relay_lag_events: 0 });
    // A live subscriber saw the events made while NATS was away, once each, once NATS was back.
    await live.until((x) => x.data.some((d) => d.machineStatusChanged.machine.id === 'EQ-005'));
    const ids = live.data.map((d) => d.machineStatusChanged.machine.id);
    expect(ids).toEqual(['EQ-004', 'EQ-005']);
    await c.dispose();
  });

  it('two relays on one database: one leads and publishes, the other waits; each event once', async () => {
    const second = await EventRelay.start(server.db, await databaseIdentity(server.db), {
      url: nats.url,
      stream: STREAM,
      maxAgeS: 7 * 86_400,
      maxBytes: 1024 ** 3,
      duplicateWindowS: 120,
    });
    try {
      await quote('EQ-006');
      await relay.drained();
      await second.drained();
      expect((await relay.status()).leading).toBe(true);
      expect(await second.status()).toMatchObject({ leading: false, published: 0, lagEvents: 0 });
      const relayed = await streamContents(jsm);
      expect(relayed.map((r) => r.outboxId)).toEqual((await outbox()).map((r) => r.id));
    } finally {
      await second.close();
    }
  });

  // Last: it replaces the server's relay with one of its own.
  it('a relay that lost its position (a crash before it was saved) reconciles with the stream and repeats nothing', async () => {
    const before = await streamContents(jsm);
    await relay.close();
    // As if the relay had published everything and crashed before saving where it stood.
    await server.db.query(`UPDATE outbox_relay SET position = 0, leader = NULL, lease_until = NULL WHERE name = $1`, [STREAM]);
    relay = await EventRelay.start(server.db, await databaseIdentity(server.db), {
      url: nats.url,
      stream: STREAM,
      maxAgeS: 7 * 86_400,
      maxBytes: 1024 ** 3,
      duplicateWindowS: 120,
    });
    await quote('EQ-003');
    await relay.drained();
    const after = await streamContents(jsm);
    const rows = await outbox();
    expect(after.map((r) => r.outboxId)).toEqual(rows.map((r) => r.id));
    expect(after.slice(0, before.length)).toEqual(before);
    // Only the new events were published: the stream told the relay where it stood.
    expect((await relay.status()).published).toBe(rows.length - before.length);
  });

  it('a block longer than one lease, published pipelined by one of two relays: the lead renewed with every batch, each event once, in order', async () => {
    await relay.close();
    const options = { url: nats.url, stream: STREAM, maxAgeS: 7 * 86_400, maxBytes: 1024 ** 3, duplicateWindowS: 120, leaseMs: 250, batch: 25 };
    const [a, b] = [
      await EventRelay.start(server.db, await databaseIdentity(server.db), options),
      await EventRelay.start(server.db, await databaseIdentity(server.db), options),
    ];
    relay = a;
    try {
      // What came before, read while nothing new reached the outbox (the server writes events of its own, a fleet
      // tick's positions among them): every row counted was published and counted, none after the counts.
      let snapshot: { before: Awaited<ReturnType<typeof jsm.streams.info>>['state']; rowsBefore: number; publishedBefore: number[] } | null = null;
      while (!snapshot) {
        const rows = (await outbox()).length;
        await a.drained();
        await b.drained();
        const taken = {
          before: (await jsm.streams.info(STREAM)).state,
          rowsBefore: rows,
          publishedBefore: [(await a.status()).published, (await b.status()).published],
        };
        if ((await outbox()).length === rows) snapshot = taken;
      }
      const { before, rowsBefore, publishedBefore } = snapshot;
      const block = 10_000;
      await server.db.transaction((tx) =>
        appendEvents(
          tx,
          Array.from({ length: block }, (_, i) => ({ audience: 'everyone' as const, tags: [], topic: 'test.block', key: `K-${i % 7}`, payload: { n: i } })),
        ),
      );
      await a.drained(60_000);
      await b.drained(60_000);
      // The block, and anything the server itself wrote meanwhile.
      const added = (await outbox()).slice(rowsBefore);
      expect(added.filter((r) => r.topic === 'test.block')).toHaveLength(block);
      expect((await jsm.streams.info(STREAM)).state.messages).toBe(before.messages + added.length);
      // One relay published all of it (its lead renewed with every batch), and nothing twice.
      const published = [(await a.status()).published - publishedBefore[0]!, (await b.status()).published - publishedBefore[1]!];
      expect(published.sort((x, y) => x - y)).toEqual([0, added.length]);
      // The stream holds the outbox, in order, read back by an ordered consumer.
      const consumer = await jetstream(nc).consumers.get(STREAM, { opt_start_seq: before.last_seq + 1 });
      const ids: string[] = [];
      for await (const m of await consumer.consume()) {
        ids.push(m.headers!.get(OUTBOX_ID_HEADER));
        if (ids.length === added.length) break;
      }
      expect(ids).toEqual(added.map((r) => r.id));
    } finally {
      await b.close();
    }
  });
});
