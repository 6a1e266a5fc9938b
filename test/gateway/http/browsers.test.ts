import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gql, hoursFromNow, rest } from '../../support/http.js';
import { startTestServer, type TestServer } from '../../support/server.js';

/*
 * Pages of other origins in a real browser (Debian's chromium): a page of a site that is not allowed can
 * neither read an answer nor change anything, bodyless cross-site POSTs, form posts and WebSockets
 * included, even in demo mode; a page of an origin in CORS_ORIGINS queries and books with its credential.
 */

const CHROMIUM = process.env['CHROMIUM_PATH'] || '/usr/bin/chromium';
const noBrowser = existsSync(CHROMIUM) ? null : `no Chromium at ${CHROMIUM}`;
if (noBrowser) console.warn(`browser CORS tests skipped: ${noBrowser}`);

/** A blank page served at its own origin, for the browser to run a script from. */
async function pageServer(): Promise<{ server: Server; port: number }> {
  const server = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>elsewhere</title>'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port };
}

describe.skipIf(noBrowser !== null)('browsers: CORS for allowed origins, no cross-site state changes', () => {
  let browser: Browser;
  let pages: { server: Server; port: number };
  let demo: TestServer;
  let keyed: TestServer;
  const KEY = 'frontend-key-000001';

  beforeAll(async () => {
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
    pages = await pageServer();
    // The allowed frontend is http://127.0.0.1:<pages>; http://localhost:<pages> is another site.
    const env = { CORS_ORIGINS: `http://127.0.0.1:${pages.port}` };
    demo = await startTestServer({ env });
    keyed = await startTestServer({ env: { ...env, API_KEYS: KEY } });
  });
  afterAll(async () => {
    await browser?.close();
    await new Promise<void>((resolve) => pages?.server.close(() => resolve()));
  });

  const openAt = async (origin: string): Promise<Page> => {
    const page = await (await browser.newContext()).newPage();
    await page.goto(`${origin}/`);
    return page;
  };
  const book = async (url: string, machine: string) => {
    const headers = {};
    const q = await rest(
      url,
      'POST',
      '/rental/pricing/quote',
      { machine_ids: [machine], location_id: 'LOC-001', start_time: hoursFromNow(4), duration_hours: 2 },
      headers,
    );
    const b = await rest(url, 'POST', '/rental/booking/confirm', { quote_id: q.body['quote_id'], customer_name: 'Browser BV' }, headers);
    expect(b.status).toBe(200);
    return b.body['booking_id'] as string;
  };
  const bookingStatus = async (url: string, id: string, headers: Record<string, string> = {}) =>
    (await gql(url, 'query ($id: ID!) { booking(id: $id) { status } }', { id }, headers)).data!['booking'].status as string;

  it('a page of another site, in demo mode: reads nothing, completes nothing, opens no socket, starts no session', async () => {
    const id = await book(demo.url, 'EQ-007');
    const page = await openAt(`http://localhost:${pages.port}`);
    const outcome = await page.evaluate(
      async ({ api, bookingPath }) => {
        const result: Record<string, string> = {};
        // Reading an answer: blocked by CORS (no Access-Control-Allow-Origin for this origin).
        try {
          await (await fetch(`${api}/rental/fleet/summary`)).json();
          result['read'] = 'read';
        } catch {
          result['read'] = 'blocked';
        }
        // Bodyless POSTs that need no preflight: sent, and refused by the server.
        await fetch(bookingPath, { method: 'POST', mode: 'no-cors' });
        await fetch(`${api}/bonding/api/bonding/start?user_id=victim`, { method: 'POST', mode: 'no-cors' });
        // A form post.
        await fetch(`${api}/rental/pricing/quote`, { method: 'POST', mode: 'no-cors', headers: { 'content-type': 'text/plain' }, body: '{}' });
        // A WebSocket: refused at the handshake.
        result['socket'] = await new Promise<string>((resolve) => {
          const ws = new WebSocket(`${api.replace('http', 'ws')}/graphql`, 'graphql-transport-ws');
          ws.onopen = () => resolve('open');
          ws.onerror = () => resolve('refused');
        });
        return result;
      },
      { api: demo.url, bookingPath: `${demo.url}/rental/booking/${id}/complete` },
    );
    expect(outcome).toEqual({ read: 'blocked', socket: 'refused' });
    expect(await bookingStatus(demo.url, id)).toBe('CONFIRMED');
    const sessions = await gql(demo.url, '{ bondingSessions(userId: "victim") { id } }');
    expect(sessions.data).toEqual({ bondingSessions: [] });
  });

  it('the same requests without a browser are served (no Origin, no Sec-Fetch-Site); a foreign Origin is refused 403', async () => {
    const id = await book(demo.url, 'EQ-009');
    const foreign = await rest(demo.url, 'POST', `/rental/booking/${id}/complete`, undefined, {
      origin: 'http://evil.example',
      'sec-fetch-site': 'cross-site',
    });
    expect(foreign.status).toBe(403);
    expect(foreign.body['code']).toBe('FORBIDDEN');
    expect(await bookingStatus(demo.url, id)).toBe('CONFIRMED');
    const preflight = await fetch(`${demo.url}/rental/booking/${id}/complete`, {
      method: 'OPTIONS',
      headers: { origin: 'http://evil.example', 'access-control-request-method': 'POST' },
    });
    expect(preflight.status).toBe(403);
    expect(preflight.headers.get('access-control-allow-origin')).toBeNull();
    expect((await rest(demo.url, 'POST', `/rental/booking/${id}/complete`)).status).toBe(200);
  });

  it('a page of an allowed origin queries and books with its credential, reading every answer', async () => {
    const page = await openAt(`http://127.0.0.1:${pages.port}`);
    const result = await page.evaluate(
      async ({ api, key }) => {
        const headers = { 'content-type': 'application/json', 'x-api-key': key };
        const graphql = async (query: string, variables: Record<string, unknown> = {}) =>
          (await fetch(`${api}/graphql`, { method: 'POST', headers, body: JSON.stringify({ query, variables }) })).json();
        const summary = await graphql('{ fleetSummary { total } }');
        const start = new Date(Date.now() + 4 * 3_600_000).toISOString();
        const quote = (await (
          await fetch(`${api}/rental/pricing/quote`, {
            method: 'POST',
            headers,
            body: JSON.stringify({ machine_ids: ['EQ-008'], location_id: 'LOC-001', start_time: start, duration_hours: 2 }),
          })
        ).json()) as { quote_id: string };
        const confirm = await fetch(`${api}/rental/booking/confirm`, {
          method: 'POST',
          headers,
          body: JSON.stringify({ quote_id: quote.quote_id, customer_name: 'Frontend BV' }),
        });
        const booked = (await confirm.json()) as { booking_id: string };
        return {
          summary,
          status: confirm.status,
          requestId: confirm.headers.get('x-request-id'),
          booking: booked.booking_id,
          withoutKey: (await fetch(`${api}/rental/fleet/summary`)).status,
        };
      },
      { api: keyed.url, key: KEY },
    );
    expect(result.summary).toEqual({ data: { fleetSummary: { total: 15 } } });
    expect(result.status).toBe(200);
    expect(result.requestId).toMatch(/.+/);
    expect(result.booking).toMatch(/^BK-/);
    // Readable, and still authenticated: without its key the page gets 401.
    expect(result.withoutKey).toBe(401);
    expect(await bookingStatus(keyed.url, result.booking, { 'x-api-key': KEY })).toBe('CONFIRMED');
  });
});
