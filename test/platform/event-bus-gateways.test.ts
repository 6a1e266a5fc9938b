import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGatewayProcess, stopProcess, type GatewayProcess } from '../support/process.js';
import { gql, hoursFromNow, rest } from '../support/http.js';
import { until } from '../support/wait.js';
import { NATS_SERVER, TestNats } from '../support/nats.js';
import { PG_BIN, TestPostgres } from '../support/postgres.js';
import { Collector, wsClient, type WsClient } from '../support/ws.js';

/*
 * Three gateway processes on one PostgreSQL with the event log on JetStream (EVENT_BUS_URL): each relays
 * the outbox (one leads) and serves subscriptions from the stream. Subscribers spread over the three all
 * receive every event once and in order; the leading gateway killed with SIGKILL: its clients resume on
 * another from their last cursor, nothing lost and nothing twice, while another gateway takes over the
 * relay; NATS itself killed and started again: every subscriber catches up, nothing lost; PostgreSQL
 * stopped as in a crash and started again under the relay: writes are refused while it is away, then the
 * relay reconnects and every event reaches every subscriber once. PostgreSQL and NATS are servers of the
 * test's own.
 */

const runs = Boolean(PG_BIN && NATS_SERVER);
if (!runs) console.warn('[event-bus-gateways] needs PostgreSQL server binaries (initdb) and a nats-server: skipped');

interface MachineEvent {
  machineStatusChanged: { cursor: string; machine: { id: string } };
}
const QUERY = 'subscription($after: ID) { machineStatusChanged(after: $after) { cursor machine { id } } }';
const quoteBody = (machine: string) => ({ machine_ids: [machine], location_id: 'LOC-001', start_time: hoursFromNow(5), duration_hours: 2 });

interface Subscriber {
  on: number;
  socket: WsClient;
  events: Collector<MachineEvent>;
  /** What it received on earlier connections (it resumed from the last of these). */
  before: string[];
}

describe.runIf(runs)('three gateways, the event log on JetStream', () => {
  const stream = `T_${randomBytes(4).toString('hex').toUpperCase()}`;
  const gateways: GatewayProcess[] = [];
  let nats: TestNats;
  let postgres: TestPostgres;

  beforeAll(async () => {
    [nats, postgres] = await Promise.all([TestNats.start(), TestPostgres.start()]);
    const env = { DATABASE_URL: postgres.url, EVENT_BUS_URL: nats.url, EVENT_STREAM: stream };
    // One after the other: the first applies the migrations and leads the relay.
    for (let i = 0; i < 3; i++) gateways.push(await startGatewayProcess(env));
  }, 400_000);
  afterAll(async () => {
    await Promise.all(gateways.map((p) => stopProcess(p)));
    await nats?.close();
    await postgres?.close();
  });

  it('every subscriber gets every event once, in order, through a gateway killed, NATS restarted and PostgreSQL restarted', async () => {
    const quote = async (via: GatewayProcess, machine: string) =>
      expect((await rest(via.url, 'POST', '/rental/pricing/quote', quoteBody(machine))).status).toBe(200);
    const cursorOf = (s: Subscriber) => [...s.before, ...s.events.data.map((d) => d.machineStatusChanged.cursor)];
    const machinesOf = (s: Subscriber) => s.events.data.map((d) => d.machineStatusChanged.machine.id);
    const after = (await gql(gateways[0]!.url, '{ eventCursor }')).data!['eventCursor'] as string;
    // Two subscribers per gateway, all from the same cursor.
    const subscribers: Subscriber[] = [0, 0, 1, 1, 2, 2].map((on) => {
      const socket = wsClient(gateways[on]!.url);
      return { on, socket, events: new Collector<MachineEvent>(socket.client, QUERY, { after }), before: [] };
    });

    const first = ['EQ-001', 'EQ-002', 'EQ-003', 'EQ-004', 'EQ-005', 'EQ-006'];
    for (const [i, machine] of first.entries()) await quote(gateways[i % 3]!, machine);
    for (const s of subscribers) await s.events.until((x) => x.results.length >= first.length, undefined, `six events on gateway ${s.on}`);
    const reference = cursorOf(subscribers[0]!);
    for (const s of subscribers) {
      expect(s.events.results.every((r) => r.errors === undefined)).toBe(true);
      expect(machinesOf(s)).toEqual(first);
      expect(cursorOf(s)).toEqual(reference);
    }

    // The first gateway (the relay's leader) killed: its subscribers resume on the second from their last cursor.
    await stopProcess(gateways[0], 'SIGKILL');
    const second = ['EQ-007', 'EQ-008'];
    for (const machine of second) await quote(gateways[1]!, machine);
    for (const s of subscribers.filter((x) => x.on === 0)) {
      s.before = cursorOf(s);
      s.on = 1;
      s.socket = wsClient(gateways[1]!.url);
      s.events = new Collector<MachineEvent>(s.socket.client, QUERY, { after: s.before.at(-1) });
    }
    // Another gateway takes the relay over once the lease of the killed one runs out (10 s).
    for (const s of subscribers) await s.events.until(() => machinesOf(s).includes('EQ-008'), 90_000, `EQ-008 on gateway ${s.on}`);

    // NATS killed and started again under the relay and the hubs.
    await nats.down();
    const third = ['EQ-009', 'EQ-010'];
    for (const machine of third) await quote(gateways[2]!, machine);
    await nats.up();
    for (const s of subscribers) await s.events.until(() => machinesOf(s).includes('EQ-010'), 90_000, `EQ-010 on gateway ${s.on}`);

    // PostgreSQL stopped as in a crash: writes are refused (nothing half done), the streams stay open.
    postgres.down();
    const refused = await rest(gateways[1]!.url, 'POST', '/rental/pricing/quote', quoteBody('EQ-011'));
    expect(refused.status).toBe(503);
    await postgres.up();
    const fourth = ['EQ-011', 'EQ-012'];
    for (const machine of fourth) {
      // The gateway's pool finds the server again on its next connection.
      await until(
        async () => (await rest(gateways[1]!.url, 'POST', '/rental/pricing/quote', quoteBody(machine))).status === 200,
        `quote ${machine} after PostgreSQL restarted`,
      );
    }
    for (const s of subscribers) await s.events.until(() => machinesOf(s).includes('EQ-012'), 90_000, `EQ-012 on gateway ${s.on}`);

    const all = cursorOf(subscribers[2]!);
    expect(all).toHaveLength(first.length + second.length + third.length + fourth.length);
    for (const s of subscribers) {
      // Nothing lost, nothing twice, one order everywhere, no error on any stream.
      expect(cursorOf(s)).toEqual(all);
      expect(new Set(cursorOf(s)).size).toBe(all.length);
      expect(s.events.results.every((r) => r.errors === undefined)).toBe(true);
    }
    expect(all.map(BigInt)).toEqual([...all.map(BigInt)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
    for (const s of subscribers) await s.socket.dispose().catch(() => undefined);
  });
});
