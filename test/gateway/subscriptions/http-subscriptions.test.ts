import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { request, type IncomingMessage } from 'node:http';
import { join } from 'node:path';
import { ApolloClient, gql as parseQuery, HttpLink, InMemoryCache } from '@apollo/client';
import { createClient } from 'graphql-sse';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hoursFromNow, rest } from '../../support/http.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import { until } from '../../support/wait.js';

/*
 * Subscriptions over plain HTTP for clients behind proxies that block WebSockets: GraphQL over Server-Sent
 * Events (graphql-sse's distinct-connections mode, Last-Event-ID resuming from the cursor) and Apollo's
 * multipart subscriptions (Apollo Client's HttpLink), with the authorization and limits of graphql-ws.
 */

const OPERATOR = 'http-subs-operator-key-1';
const PARTNER = 'http-subs-partner-key-02';

interface SseEvent {
  id: string | null;
  event: string;
  data: string;
}

/** Reads a text/event-stream body event by event. */
class SseReader {
  readonly events: SseEvent[] = [];
  ended = false;
  private readonly controller = new AbortController();
  readonly response: Promise<Response>;

  constructor(url: string, body: unknown, headers: Record<string, string> = {}) {
    this.response = fetch(`${url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', 'x-api-key': OPERATOR, ...headers },
      body: JSON.stringify(body),
      signal: this.controller.signal,
    });
    void this.read();
  }

  private async read(): Promise<void> {
    try {
      const response = await this.response;
      if (!response.body || response.status !== 200) return;
      const decoder = new TextDecoder();
      let buffer = '';
      for await (const chunk of response.body) {
        buffer += decoder.decode(chunk as Uint8Array, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) !== -1) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const lines = block.split('\n').filter((l) => !l.startsWith(':'));
          if (lines.length === 0) continue;
          const field = (name: string) =>
            lines
              .find((l) => l.startsWith(`${name}:`))
              ?.slice(name.length + 1)
              .trim() ?? null;
          this.events.push({ id: field('id'), event: field('event') ?? 'message', data: field('data') ?? '' });
        }
      }
    } catch {
      // aborted
    } finally {
      this.ended = true;
    }
  }

  next(): Array<{ id: string | null; payload: { data?: Record<string, unknown>; errors?: unknown[] } }> {
    return this.events.filter((e) => e.event === 'next').map((e) => ({ id: e.id, payload: JSON.parse(e.data) as { data?: Record<string, unknown> } }));
  }

  abort(): void {
    this.controller.abort();
  }
}

describe('subscriptions over HTTP', () => {
  const dir = mkdtempSync(join(tmpdir(), 'http-subs-'));
  let server: TestServer;
  let url: string;
  const quote = (machineIds: string[]) =>
    rest(
      url,
      'POST',
      '/rental/pricing/quote',
      { machine_ids: machineIds, location_id: 'LOC-001', start_time: hoursFromNow(4), duration_hours: 6 },
      { 'x-api-key': OPERATOR },
    );

  beforeAll(async () => {
    const keys = join(dir, 'keys.json');
    writeFileSync(keys, JSON.stringify([{ key: PARTNER, principal: 'partner', tenant: 'tenant-p', scopes: ['prediction:read'] }]));
    server = await startTestServer({ env: { API_KEYS: OPERATOR, API_KEYS_FILE: keys, HTTP_STREAM_HEARTBEAT_MS: '200' } });
    url = server.url;
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('the graphql-sse client subscribes over Server-Sent Events and gets each event', async () => {
    const client = createClient({ url: `${url}/graphql`, headers: { 'x-api-key': OPERATOR }, retryAttempts: 0 });
    const seen: { cursor: string; reserved: number }[] = [];
    let dispose: () => void = () => undefined;
    await server.live.opened(() => {
      dispose = client.subscribe<{ fleetSummaryChanged: { cursor: string; reserved: number } }>(
        { query: 'subscription { fleetSummaryChanged { cursor reserved } }' },
        { next: (r) => r.data && seen.push(r.data.fleetSummaryChanged), error: () => undefined, complete: () => undefined },
      );
    });
    expect((await quote(['EQ-001'])).status).toBe(200);
    await until(() => seen.length >= 1, 'an event over SSE');
    expect(seen[0]!.cursor).toMatch(/^\d+$/);
    expect(await metric('http_streams_open')).toBeGreaterThanOrEqual(1);
    dispose();
    client.dispose();
    await until(async () => (await metric('http_streams_open')) === 0, 'the stream to end when the client goes');
  });

  it('each event carries its cursor as id; a reconnect with Last-Event-ID gets exactly what it missed', async () => {
    const body = { query: 'subscription { machineStatusChanged(machineIds: ["EQ-002", "EQ-003"]) { machine { id } status } }' };
    const first = await server.live.opened(() => new SseReader(url, body));
    expect((await first.response).headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect((await quote(['EQ-002'])).status).toBe(200);
    await until(() => first.next().length >= 1, 'the first event');
    const [event] = first.next();
    expect(event!.id).toMatch(/^\d+$/);
    // The client asked for no cursor: the id carries it, the data is what it asked for.
    expect(event!.payload.data).toEqual({ machineStatusChanged: { machine: { id: 'EQ-002' }, status: 'RESERVED' } });
    first.abort();
    // Missed while away.
    expect((await quote(['EQ-003'])).status).toBe(200);
    const again = new SseReader(url, body, { 'last-event-id': event!.id! });
    await until(() => again.next().length >= 1, 'the missed event after Last-Event-ID');
    const replayed = again.next();
    expect(replayed.map((e) => e.payload.data)).toEqual([{ machineStatusChanged: { machine: { id: 'EQ-003' }, status: 'RESERVED' } }]);
    expect(BigInt(replayed[0]!.id!)).toBeGreaterThan(BigInt(event!.id!));
    again.abort();
  });

  it('bad input is refused before a stream opens: a Last-Event-ID that is not a cursor, a field the principal may not read, an invalid document', async () => {
    const subscribe = (query: string, headers: Record<string, string> = {}) =>
      fetch(`${url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream', 'x-api-key': OPERATOR, ...headers },
        body: JSON.stringify({ query }),
      });
    const notCursor = await subscribe('subscription { fleetSummaryChanged { cursor } }', { 'last-event-id': 'yesterday' });
    expect(notCursor.status).toBe(400);
    expect(((await notCursor.json()) as { errors: { message: string; extensions: { code: string } }[] }).errors[0]).toMatchObject({
      extensions: { code: 'BAD_REQUEST' },
      message: expect.stringContaining('Last-Event-ID') as string,
    });
    const forbidden = await subscribe('subscription { fleetSummaryChanged { cursor } }', { 'x-api-key': PARTNER });
    expect(forbidden.status).toBe(403);
    // A GET changes nothing: a mutation over SSE must be POSTed.
    const mutation = await fetch(`${url}/graphql?query=${encodeURIComponent('mutation { closeBondingSession(id: "x") { id } }')}`, {
      headers: { accept: 'text/event-stream', 'x-api-key': OPERATOR },
    });
    expect(mutation.status).toBe(405);
    expect(mutation.headers.get('allow')).toBe('POST');
    const invalid = await subscribe('subscription { noSuchField }');
    expect(invalid.status).toBe(400);
    expect(((await invalid.json()) as { errors: { extensions: { code: string } }[] }).errors[0]!.extensions.code).toBe('GRAPHQL_VALIDATION_FAILED');
  });

  it('queries are served as a stream too: one next, then complete; GET works as an EventSource sends it', async () => {
    const reader = new SseReader(url, { query: '{ fleetSummary { total } }' });
    await until(() => reader.ended, 'the stream to complete');
    expect(reader.events.map((e) => e.event)).toEqual(['next', 'complete']);
    expect(reader.next()[0]!.payload.data).toEqual({ fleetSummary: { total: 15 } });

    const get = await fetch(`${url}/graphql?query=${encodeURIComponent('{ fleetSummary { total } }')}`, {
      headers: { accept: 'text/event-stream', 'x-api-key': OPERATOR },
    });
    expect(get.status).toBe(200);
    expect(await get.text()).toBe(':\n\nevent: next\ndata: {"data":{"fleetSummary":{"total":15}}}\n\nevent: complete\ndata:\n\n');
  });

  it("Apollo Client's HttpLink subscribes over multipart HTTP, with heartbeats between events", async () => {
    const raw = await fetch(`${url}/graphql`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'multipart/mixed;boundary="graphql";subscriptionSpec=1.0,application/json',
        'x-api-key': OPERATOR,
      },
      body: JSON.stringify({ query: 'subscription { fleetSummaryChanged { cursor } }' }),
    });
    expect(raw.headers.get('content-type')).toBe('multipart/mixed;boundary="graphql";subscriptionSpec="1.0"');
    const reader = raw.body!.getReader();
    let text = '';
    while (!text.includes('{}')) text += new TextDecoder().decode((await reader.read()).value);
    expect(text).toContain('\r\n--graphql\r\ncontent-type: application/json; charset=utf-8\r\n\r\n{}\r\n--graphql');
    await reader.cancel();

    const client = new ApolloClient({ link: new HttpLink({ uri: `${url}/graphql`, headers: { 'x-api-key': OPERATOR } }), cache: new InMemoryCache() });
    const seen: { machine: { id: string }; status: string }[] = [];
    const subscription = await server.live.opened(() =>
      client.subscribe({ query: parseQuery('subscription { machineStatusChanged(machineIds: ["EQ-004"]) { machine { id } status } }') }).subscribe({
        next: (r) => {
          const data = r.data as { machineStatusChanged: { machine: { id: string }; status: string } } | undefined;
          if (data) seen.push(data.machineStatusChanged);
        },
      }),
    );
    expect((await quote(['EQ-004'])).status).toBe(200);
    await until(() => seen.length >= 1, 'an event over multipart HTTP');
    expect(seen[0]).toMatchObject({ machine: { id: 'EQ-004' }, status: 'RESERVED' });
    subscription.unsubscribe();
    client.stop();
  });

  it('a client that stops reading has its stream cut once its unsent bytes pass the limit, and resumes with Last-Event-ID', async () => {
    const slowServer = await startTestServer({
      env: { API_KEYS: OPERATOR, WS_MAX_BUFFERED_BYTES: '65536', GRAPHQL_MAX_ALIASES: '400', GRAPHQL_MAX_FIELDS: '20000', GRAPHQL_MAX_TOKENS: '100000' },
    });
    const base = slowServer.url;
    // Large events: each carries its machine 150 times over (aliases), so a few cycles fill the socket buffers.
    const copies = Array.from({ length: 150 }, (_, i) => `m${i}: machine { id name category hourlyRate status depot { id name } }`).join(' ');
    const body = JSON.stringify({ query: `subscription { machineStatusChanged(machineIds: ["EQ-010"]) { status ${copies} } }` });
    const slowIds: string[] = [];
    let cut = false;
    const slow = await slowServer.live.opened(
      () =>
        new Promise<IncomingMessage>((resolve, reject) => {
          const req = request(
            `${base}/graphql`,
            { method: 'POST', headers: { 'content-type': 'application/json', accept: 'text/event-stream', 'x-api-key': OPERATOR } },
            (res) => {
              res.setEncoding('utf8');
              res.on('data', (chunk: string) => {
                for (const match of chunk.matchAll(/^id: (\d+)$/gm)) slowIds.push(match[1]!);
              });
              res.on('close', () => (cut = true));
              resolve(res);
            },
          );
          req.on('error', () => (cut = true));
          req.once('error', reject);
          req.end(body);
        }),
    );
    const cycle = async () => {
      const q = await rest(
        base,
        'POST',
        '/rental/pricing/quote',
        { machine_ids: ['EQ-010'], location_id: 'LOC-001', start_time: hoursFromNow(3), duration_hours: 4 },
        { 'x-api-key': OPERATOR },
      );
      expect(q.status).toBe(200);
      const b = await rest(
        base,
        'POST',
        '/rental/booking/confirm',
        { quote_id: q.body['quote_id'], customer_name: 'Slow Reader BV' },
        { 'x-api-key': OPERATOR },
      );
      expect(b.status).toBe(200);
      expect((await rest(base, 'POST', `/rental/booking/${b.body['booking_id']}/complete`, undefined, { 'x-api-key': OPERATOR })).status).toBe(200);
    };
    await cycle();
    await until(() => slowIds.length === 3, 'the slow client to read the first cycle');
    slow.pause();
    const cuts = async () => {
      const text = await (await fetch(`${base}/metrics`, { headers: { 'x-api-key': OPERATOR } })).text();
      return Number(/^http_stream_slow_consumer_cuts_total (\d+)/m.exec(text)?.[1] ?? 0);
    };
    let cycles = 1;
    while (cycles < 60 && (await cuts()) === 0) {
      await cycle();
      cycles++;
    }
    expect(await cuts()).toBe(1);
    slow.resume();
    await until(() => cut, 'the slow stream to be closed');
    // It resumes from the last event it read, and gets every event after it, in order.
    const resumeFrom = slowIds.at(-1)!;
    const read = slowIds.length;
    const again = new SseReader(base, JSON.parse(body) as unknown, { 'last-event-id': resumeFrom });
    await until(() => again.next().length === cycles * 3 - read, `the ${cycles * 3 - read} events after ${resumeFrom}`, {
      detail: () => ({ got: again.next().length, cycles, read }),
    });
    const ids = again.next().map((e) => BigInt(e.id!));
    expect(ids[0]! > BigInt(resumeFrom)).toBe(true);
    for (let i = 1; i < ids.length; i++) expect(ids[i]! > ids[i - 1]!).toBe(true);
    again.abort();
    await slowServer.close();
  });

  it('a principal has at most HTTP_MAX_STREAMS_PER_PRINCIPAL streams open; one more is refused until one ends', async () => {
    const capped = await startTestServer({ env: { API_KEYS: OPERATOR, HTTP_MAX_STREAMS_PER_PRINCIPAL: '1' } });
    const body = { query: 'subscription { fleetSummaryChanged { cursor } }' };
    const first = await capped.live.opened(() => new SseReader(capped.url, body));
    expect((await first.response).status).toBe(200);
    const second = await fetch(`${capped.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', 'x-api-key': OPERATOR },
      body: JSON.stringify(body),
    });
    expect(second.status).toBe(400);
    expect(((await second.json()) as { errors: { extensions: { code: string } }[] }).errors[0]!.extensions.code).toBe('SUBSCRIPTION_LIMIT_EXCEEDED');
    first.abort();
    await until(() => first.ended, 'the first stream to end');
    // The server counts the stream gone once it sees the connection close.
    let third: SseReader | null = null;
    await until(async () => {
      third?.abort();
      third = new SseReader(capped.url, body);
      return (await third.response).status === 200;
    }, 'a stream to be allowed again once the first ended');
    (third as SseReader | null)?.abort();
    await capped.close();
  });

  async function metric(name: string): Promise<number> {
    const text = await (await fetch(`${url}/metrics`, { headers: { 'x-api-key': OPERATOR } })).text();
    const line = text.split('\n').find((l) => l.startsWith(`${name} `));
    return line ? Number(line.split(' ')[1]) : Number.NaN;
  }
});
