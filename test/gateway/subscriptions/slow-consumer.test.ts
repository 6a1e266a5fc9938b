import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { hoursFromNow, rest } from '../../support/http.js';
import { startTestServer } from '../../support/server.js';
import { until } from '../../support/wait.js';
import { Collector, wsClient } from '../../support/ws.js';

const SELECTION =
  'cursor previousStatus status reason quoteId bookingId at machine { id name category hourlyRate status depot { id name coordinates { latitude longitude } } }';
const MACHINES = ['EQ-001', 'EQ-002', 'EQ-003', 'EQ-004', 'EQ-005'];

interface Event {
  machineStatusChanged: { cursor: string };
}

describe('slow consumers', () => {
  it('a client that stops reading is closed with 4413 and resumes from its last cursor; the others keep pace', async () => {
    const server = await startTestServer({ env: { WS_MAX_BUFFERED_BYTES: '65536', WS_MAX_QUEUED_EVENTS: '50' } });
    const { url } = server;
    const subscribedBefore = server.live.subscribed;

    // A fast client sees everything.
    const fast = wsClient(url);
    const fastEvents = new Collector<Event>(fast.client, `subscription { machineStatusChanged { ${SELECTION} } }`);

    // A slow client: graphql-transport-ws by hand, 100 subscriptions on one socket, then it stops reading.
    const slow = new WebSocket(`${url.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws');
    await new Promise((resolve) => slow.once('open', resolve));
    slow.send(JSON.stringify({ type: 'connection_init' }));
    await new Promise((resolve) => slow.once('message', resolve));
    let lastCursor: string | null = null;
    slow.on('message', (raw: Buffer) => {
      const message = JSON.parse(raw.toString()) as { type: string; id?: string; payload?: { data?: Event } };
      if (message.type === 'next' && message.id === 's0') lastCursor = message.payload?.data?.machineStatusChanged.cursor ?? lastCursor;
    });
    const closed = new Promise<number>((resolve) => slow.once('close', (code) => resolve(code)));
    for (let i = 0; i < 100; i++) {
      slow.send(JSON.stringify({ id: `s${i}`, type: 'subscribe', payload: { query: `subscription { machineStatusChanged { ${SELECTION} } }` } }));
    }
    // All 101 identical subscriptions live (they share one upstream stream) before the first event.
    await until(() => server.live.subscribed >= subscribedBefore + 101, '101 subscriptions to be live', {
      detail: () => ({ subscribed: server.live.subscribed - subscribedBefore }),
    });

    // One cycle: quote, confirm and complete five machines (15 transitions). The first cycle is read.
    const cycle = async () => {
      const q = await rest(url, 'POST', '/rental/pricing/quote', {
        machine_ids: MACHINES,
        location_id: 'LOC-001',
        start_time: hoursFromNow(3),
        duration_hours: 4,
      });
      expect(q.status).toBe(200);
      const b = await rest(url, 'POST', '/rental/booking/confirm', { quote_id: q.body['quote_id'], customer_name: 'Slow Reader BV' });
      expect(b.status).toBe(200);
      expect((await rest(url, 'POST', `/rental/booking/${b.body['booking_id']}/complete`)).status).toBe(200);
    };
    await cycle();
    await fastEvents.count(15);
    const fifteenth = fastEvents.data[14]!.machineStatusChanged.cursor;
    await until(() => lastCursor === fifteenth, 'the slow client to read the first cycle', { detail: () => ({ lastCursor, fifteenth }) });
    const resumeFrom = lastCursor!;

    slow.pause();
    // Cycles until the server has closed the slow socket (the kernel's socket buffers fill first, then
    // the server's 64 KB), and two more after it; at most 40.
    const slowCloses = async () => ((await rest(url, 'GET', '/health')).body['websocket'] as { slow_consumer_closes: number }).slow_consumer_closes;
    let cycles = 1;
    let after = -1;
    const started = Date.now();
    while (cycles < 40 && after < 2) {
      await cycle();
      cycles++;
      if (after >= 0 || (await slowCloses()) > 0) after++;
    }
    // The fast client kept pace with every event while the slow one was not reading.
    await fastEvents.count(cycles * 15);
    const elapsed = Date.now() - started;

    // The server closed it while it was still not reading, not when it read again.
    expect(await slowCloses()).toBe(1);

    slow.resume();
    expect(await closed).toBe(4413);

    // The slow client comes back with its last cursor and gets exactly what it missed.
    const back = wsClient(url);
    const resumed = new Collector<Event>(back.client, `subscription ($after: ID) { machineStatusChanged(after: $after) { cursor } }`, { after: resumeFrom });
    await resumed.count((cycles - 1) * 15);
    expect(resumed.data.map((d) => d.machineStatusChanged.cursor)).toEqual(fastEvents.data.slice(15).map((d) => d.machineStatusChanged.cursor));
    console.info(
      `[slow consumer] ${(cycles - 1) * 15} events x 100 subscriptions (${cycles - 1} cycles) in ${elapsed} ms; slow socket closed 4413; resumed ${resumed.results.length} events`,
    );
    await fast.dispose();
    await back.dispose();
  });
});
