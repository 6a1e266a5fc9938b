import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
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

  async function metric(name: string): Promise<number> {
    const text = await (await fetch(`${url}/metrics`, { headers: { 'x-api-key': OPERATOR } })).text();
    const line = text.split('\n').find((l) => l.startsWith(`${name} `));
    return line ? Number(line.split(' ')[1]) : Number.NaN;
  }
});
