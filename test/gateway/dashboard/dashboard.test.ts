import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parse, validate } from 'graphql';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDashboard } from '../../../gateway/dashboard/build.js';
import { dashboardBuilt } from '../../../gateway/dashboard/plugin.js';
import { createLimiter, requestLimitsOf } from '../../../gateway/security/limits.js';
import { OffsetClock } from '../../../platform/clock.js';
import { loadConfig } from '../../../gateway/config.js';
import { readCheckedInSupergraph } from '../../../schema/supergraph-file.js';
import { DOCUMENTS } from '../../../web/src/documents.js';
import { gql, hoursFromNow, rest } from '../../support/http.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import { TcpProxy } from '../../support/tcp-proxy.js';
import { until, WAIT_MS } from '../../support/wait.js';
import { Collector, wsClient } from '../../support/ws.js';

/** The time zone the page is shown in (its clock readings are compared with the API's instants). */
const PAGE_TIME_ZONE = 'Europe/Amsterdam';

/** Debian's `chromium` (.ci/run installs it when apt-get can), or CHROMIUM_PATH. */
const CHROMIUM = process.env['CHROMIUM_PATH'] || '/usr/bin/chromium';
const noBrowser = existsSync(CHROMIUM) ? null : `no Chromium at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)`;
if (noBrowser) console.warn(`dashboard browser tests skipped: ${noBrowser}`);

const SCREENSHOT = resolve('test-results/dashboard.png');
const KEY = 'dashboard-test-key-1';

interface MachineEvent {
  machineStatusChanged: { cursor: string; machine: { id: string }; status: string };
}

beforeAll(async () => {
  // `npm ci` builds the dashboard (prepare); an install that skipped scripts gets it built here.
  if (!dashboardBuilt()) {
    console.warn('web/dist is missing: building the dashboard');
    await buildDashboard();
  }
});

describe('the dashboard is served at / and speaks only the public API', () => {
  let server: TestServer;
  let locked: TestServer;
  beforeAll(async () => {
    [server, locked] = await Promise.all([startTestServer(), startTestServer({ env: { API_KEYS: KEY } })]);
  });

  it('serves the page and its assets under a same-origin Content-Security-Policy, public even with API_KEYS set', async () => {
    for (const base of [server.url, locked.url]) {
      const page = await fetch(`${base}/`, { headers: { accept: 'text/html' } });
      expect(page.status).toBe(200);
      expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
      const csp = page.headers.get('content-security-policy') ?? '';
      expect(csp).toContain("default-src 'self'");
      expect(csp).toContain("script-src 'self'");
      expect(csp).toContain("style-src 'self'");
      expect(csp).toMatch(new RegExp(`connect-src 'self' ws://${new URL(base).host} wss://`));
      expect(csp).toContain("frame-ancestors 'none'");
      const html = await page.text();
      // No inline script and no other origin: every script and stylesheet is a file of this server.
      expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
      expect(html).not.toMatch(/(?:src|href)="(?:https?:)?\/\//);
      const assets = [...html.matchAll(/(?:src|href)="\.\/([^"]+)"/g)].map((m) => m[1]!);
      expect(assets.some((a) => a.endsWith('.js'))).toBe(true);
      expect(assets.some((a) => a.endsWith('.css'))).toBe(true);
      for (const asset of assets) {
        const res = await fetch(`${base}/${asset}`);
        expect(res.status, asset).toBe(200);
        expect(res.headers.get('content-type')).toMatch(
          asset.endsWith('.js') ? /^text\/javascript/ : asset.endsWith('.css') ? /^text\/css/ : /^image\/svg\+xml/,
        );
        if (asset.startsWith('assets/')) expect(res.headers.get('cache-control')).toContain('immutable');
      }
    }
    // The API keeps its rules: a key is needed for data, and /graphql serves no page itself (in demo mode a
    // browser is sent to the explorer, test/gateway/dashboard/explorer.test.ts; with credentials it is off).
    expect((await rest(locked.url, 'GET', '/rental/fleet/summary')).status).toBe(401);
    expect((await fetch(`${locked.url}/graphql`, { headers: { accept: 'text/html', 'x-api-key': KEY } })).status).toBe(406);
    expect((await fetch(`${server.url}/graphql`, { headers: { accept: 'text/html' }, redirect: 'manual' })).status).toBe(303);
    const post = await fetch(`${server.url}/`, { method: 'POST' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD, OPTIONS');
    expect((await fetch(`${server.url}/nothing-here.js`)).status).toBe(404);
  });

  it('every document the page sends is valid against the API schema and within the request limits', () => {
    const limiter = createLimiter(readCheckedInSupergraph(), requestLimitsOf(loadConfig({})));
    for (const [name, document] of Object.entries(DOCUMENTS)) {
      expect(
        validate(server.subscriptions.schema, parse(document)).map((e) => e.message),
        name,
      ).toEqual([]);
      const checked = limiter.check(document, { after: '1', id: 'BK-000000000000', bookingId: 'BK-000000000000', sessionId: 'BS-000000000000' }, null);
      expect('error' in checked ? checked.error.message : 'ok', name).toBe('ok');
    }
  });
});

describe.skipIf(noBrowser !== null)('the dashboard in headless Chromium', () => {
  let browser: Browser;
  beforeAll(async () => {
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
  });
  afterAll(async () => {
    await browser?.close();
  });

  /** A page whose console errors and uncaught exceptions are kept (a CSP violation is a console error). */
  async function open(context: BrowserContext): Promise<{ page: Page; errors: string[] }> {
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('console', (message) => {
      if (message.type() === 'error') errors.push(message.text());
    });
    page.on('pageerror', (error) => errors.push(`uncaught: ${error.message}`));
    return { page, errors };
  }

  const live = (page: Page) => page.waitForSelector('body[data-connection="live"]', { timeout: WAIT_MS });
  const tile = (page: Page, id: string) => page.locator(`.tile[data-machine="${id}"]`);
  const waitFor = (page: Page, selector: string) => page.waitForSelector(selector, { timeout: WAIT_MS });
  const feedCursors = (page: Page) =>
    page.locator('#feed li[data-stream="machines"]').evaluateAll((items) => items.map((li) => li.getAttribute('data-cursor') ?? '').reverse());

  it('follows quotes and deliveries live, resumes after a dropped socket without missing an event, and renders every subgraph', async () => {
    const clock = new OffsetClock();
    const server = await startTestServer({ clock, env: { TRACKING_TICK_MS: '250' } });
    const proxy = await TcpProxy.start('127.0.0.1', Number(new URL(server.url).port));
    const pageUrl = `http://127.0.0.1:${proxy.port}/`;
    try {
      // Something in every panel: a bonding session and a small quantum run.
      const session = await rest(server.url, 'POST', '/bonding/api/bonding/start?user_id=sandbox&seed=7');
      expect(session.status).toBe(200);
      const run = await gql(server.url, 'mutation { startQuantumRun(input: { problem: REGULAR3_MAXCUT, size: 8, depth: 1, shots: 256 }) { id } }');
      expect(run.errors).toBeUndefined();

      // A witness of every machine event from before the page opens, straight from the gateway.
      const cursor = (await gql<{ eventCursor: string }>(server.url, '{ eventCursor }')).data!.eventCursor;
      const witness = new Collector<MachineEvent>(
        wsClient(server.url).client,
        'subscription($after: ID) { machineStatusChanged(after: $after) { cursor machine { id } status } }',
        { after: cursor },
      );

      const context = await browser.newContext({
        viewport: { width: 1440, height: 1000 },
        reducedMotion: 'reduce',
        locale: 'en-GB',
        timezoneId: PAGE_TIME_ZONE,
      });
      const { page, errors } = await open(context);
      await page.goto(pageUrl);
      await live(page);
      await until(async () => (await page.locator('.tile[data-status="available"]').count()) === 15, '15 available machine tiles');
      await waitFor(page, `.session[data-session="${session.body['session_id']}"]`);
      await waitFor(page, `tr[data-run="${run.data!['startQuantumRun'].id}"]`);
      await waitFor(page, '[data-field="health"]');
      await waitFor(page, '.vessel');

      // A quote through REST: the tile turns reserved without a reload, and the feed shows the event.
      const quote = await rest(server.url, 'POST', '/rental/pricing/quote', {
        machine_ids: ['EQ-002'],
        location_id: 'LOC-002',
        start_time: hoursFromNow(4, clock.now().getTime()),
        duration_hours: 8,
      });
      expect(quote.status).toBe(200);
      await waitFor(page, '.tile[data-machine="EQ-002"][data-status="reserved"]');
      await waitFor(page, '#feed li[data-stream="machines"][data-machine="EQ-002"][data-status="reserved"]');
      await waitFor(page, '[data-stat="utilization"] >> text=6.7%');

      // Confirmed: the machine goes in use and its delivery appears with its ETA and forecast band.
      const booking = await rest(server.url, 'POST', '/rental/booking/confirm', { quote_id: quote.body['quote_id'], customer_name: 'Havenbedrijf' });
      expect(booking.status).toBe(200);
      const bookingId = booking.body['booking_id'] as string;
      await waitFor(page, '.tile[data-machine="EQ-002"][data-status="in_use"]');
      const delivery = page.locator(`.delivery[data-booking="${bookingId}"]`);
      await delivery.waitFor({ timeout: WAIT_MS });
      // One ETA per truck: the page's ETA and band are the tracking's, which are the delivery forecast's.
      const forecast = (
        await gql(
          server.url,
          'query($id: ID!) { booking(id: $id) { tracking { eta etaQ10 etaQ90 etaSource } deliveryForecast { arrivalQ10 arrivalQ50 arrivalQ90 } } }',
          { id: bookingId },
        )
      ).data!['booking'];
      expect(forecast.tracking).toEqual({
        eta: forecast.deliveryForecast.arrivalQ50,
        etaQ10: forecast.deliveryForecast.arrivalQ10,
        etaQ90: forecast.deliveryForecast.arrivalQ90,
        etaSource: 'MODEL',
      });
      const band = delivery.locator('[data-field="band"]');
      expect(await band.getAttribute('data-source')).toBe('model');
      expect(await band.getAttribute('data-q10')).toBe(forecast.deliveryForecast.arrivalQ10);
      expect(await band.getAttribute('data-q90')).toBe(forecast.deliveryForecast.arrivalQ90);
      expect(await band.textContent()).toContain('q10–q90');
      const hhmm = (iso: string) => new Date(iso).toLocaleTimeString('en-GB', { hour: '2-digit', minute: '2-digit', hour12: false, timeZone: PAGE_TIME_ZONE });
      expect(await delivery.locator('[data-field="eta"]').textContent()).toBe(`ETA ${hhmm(forecast.tracking.eta)}`);
      await waitFor(page, `.marker[data-booking="${bookingId}"]`);

      // On its way: the marker moves along the route (the server's clock is moved to the middle of the trip).
      const leg = (await rest(server.url, 'GET', `/rental/booking/${bookingId}/track`)).body['legs'][0];
      clock.advance(Date.parse(leg.depart_at) - clock.now().getTime() + (Date.parse(leg.eta) - Date.parse(leg.depart_at)) * 0.4);
      await waitFor(page, `.marker[data-booking="${bookingId}"][data-status="in_transit"]`);
      await waitFor(page, `.delivery[data-booking="${bookingId}"][data-status="in_transit"] [data-field="remaining"]`);
      await waitFor(page, `#feed li[data-stream="tracking"][data-booking="${bookingId}"]`);
      // The first session has been idle past its TTL on the moved clock and closes; a new one for the picture.
      const bonded = await rest(server.url, 'POST', '/bonding/api/bonding/start?user_id=sandbox&seed=11');
      expect(bonded.status).toBe(200);

      // The socket is cut and new connections refused: the page says so, and cannot know of a new quote.
      await proxy.cut();
      await waitFor(page, 'body[data-connection="reconnecting"]');
      expect(await page.locator('#banner').isVisible()).toBe(true);
      expect(await page.locator('#banner').textContent()).toContain('Disconnected');
      const during = await rest(server.url, 'POST', '/rental/pricing/quote', {
        machine_ids: ['EQ-010'],
        location_id: 'LOC-004',
        start_time: hoursFromNow(6, clock.now().getTime()),
        duration_hours: 4,
      });
      expect(during.status).toBe(200);
      await witness.until((c) => c.data.some((d) => d.machineStatusChanged.machine.id === 'EQ-010'), WAIT_MS, 'the quote made during the drop');
      expect(await tile(page, 'EQ-010').getAttribute('data-status')).toBe('available');

      // Back: the page reconnects by itself and resumes from its cursor, so the missed event is shown.
      await proxy.restore();
      await live(page);
      await waitFor(page, '.tile[data-machine="EQ-010"][data-status="reserved"]');
      await waitFor(page, '#feed li[data-stream="machines"][data-machine="EQ-010"]');
      expect(await page.locator('#banner').isVisible()).toBe(false);
      // Exactly the witness's events, in order: none missed across the drop, none shown twice.
      const expected = () => witness.data.map((d) => d.machineStatusChanged.cursor);
      await until(async () => (await feedCursors(page)).length >= expected().length, 'the page to show every machine event', {
        detail: () => ({ witness: expected() }),
      });
      expect(await feedCursors(page)).toEqual(expected());
      expect(expected()).toHaveLength(3);

      // More of the fleet busy for the picture: a scheduled delivery from Rotterdam and an open quote.
      const later = await rest(server.url, 'POST', '/rental/pricing/quote', {
        machine_ids: ['EQ-008', 'EQ-012'],
        location_id: 'LOC-003',
        start_time: hoursFromNow(7, clock.now().getTime()),
        duration_hours: 10,
      });
      const second = await rest(server.url, 'POST', '/rental/booking/confirm', { quote_id: later.body['quote_id'], customer_name: 'Zuidas Bouw' });
      expect(second.status).toBe(200);
      expect(
        (
          await rest(server.url, 'POST', '/rental/pricing/quote', {
            machine_ids: ['EQ-011', 'EQ-013', 'EQ-005'],
            location_id: 'LOC-006',
            start_time: hoursFromNow(30, clock.now().getTime()),
            duration_hours: 16,
          })
        ).status,
      ).toBe(200);
      await waitFor(page, `.delivery[data-booking="${second.body['booking_id']}"]`);
      await waitFor(page, '.tile[data-machine="EQ-005"][data-status="reserved"]');
      await waitFor(page, '.tile[data-machine="EQ-012"][data-status="in_use"]');
      await waitFor(page, `tr[data-run="${run.data!['startQuantumRun'].id}"][data-status="completed"]`);
      // Found by the panel's next read of the session list, then followed step by step.
      await waitFor(page, `.session[data-session="${bonded.body['session_id']}"]:not([data-state="negotiating"]) .path`);

      mkdirSync(resolve('test-results'), { recursive: true });
      await page.screenshot({ path: SCREENSHOT, fullPage: true });
      console.log(`dashboard screenshot: ${SCREENSHOT}`);

      // Nothing refused by the Content-Security-Policy, nothing thrown; only the cut socket's failed reconnects.
      expect(errors.filter((e) => !/WebSocket connection to .* failed/.test(e))).toEqual([]);
      witness.unsubscribe();
      await context.close();
    } finally {
      await proxy.close();
    }
  });

  it('with API_KEYS set, asks for a key, keeps it for the tab and connects with it', async () => {
    const server = await startTestServer({ env: { API_KEYS: KEY } });
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, reducedMotion: 'reduce' });
    const { page, errors } = await open(context);
    await page.goto(`${server.url}/`);
    await waitFor(page, 'body[data-connection="unauthorized"]');
    expect(await page.locator('#key-form').isVisible()).toBe(true);
    expect(await page.locator('.tile').count()).toBe(0);

    await page.fill('#api-key', KEY);
    await page.click('#key-form button[type="submit"]');
    await live(page);
    await until(async () => (await page.locator('.tile').count()) === 15, '15 machine tiles');
    expect(await page.locator('#key-form').isVisible()).toBe(false);
    expect(await page.evaluate('sessionStorage.getItem("ops-supergraph.api-key")')).toBe(KEY);

    // A reload in the same tab connects with the kept key, without asking.
    await page.reload();
    await live(page);
    await until(async () => (await page.locator('.tile').count()) === 15, '15 machine tiles after a reload');

    expect(await page.locator('#principal').textContent()).toMatch(/· operator$/);

    // Forgetting it closes the connection: the server refuses the keyless socket with 4401.
    await page.click('#forget-key');
    await waitFor(page, 'body[data-connection="unauthorized"]');
    expect(errors.filter((e) => !/WebSocket/.test(e))).toEqual([]);
    await context.close();
  });

  it('shows who the key acts for and only the parts its scopes cover', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dashboard-keys-'));
    const file = join(dir, 'keys.json');
    const PARTNER = 'dashboard-partner-key-0001';
    writeFileSync(
      file,
      JSON.stringify([{ key: PARTNER, principal: 'fleet-partner', tenant: 'tenant-f', scopes: ['fleet:read', 'rental:read', 'features:read'] }]),
    );
    const server = await startTestServer({ env: { API_KEYS_FILE: file } });
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, reducedMotion: 'reduce' });
    const { page, errors } = await open(context);
    await page.goto(`${server.url}/`);
    await waitFor(page, 'body[data-connection="unauthorized"]');
    await page.fill('#api-key', PARTNER);
    await page.click('#key-form button[type="submit"]');
    await live(page);
    await until(async () => (await page.locator('.tile').count()) === 15, '15 machine tiles');
    expect(await page.locator('#principal').textContent()).toBe('fleet-partner · tenant-f');
    expect(await page.locator('#principal').getAttribute('title')).toBe('scopes: fleet:read, rental:read, features:read');
    // Bonding and optimization are not asked for: their notes say what they need; features is filled.
    await waitFor(page, '#bonding-note[data-withheld="true"]:not([hidden])');
    expect(await page.locator('#bonding-note').textContent()).toBe('Not shown to fleet-partner: this part needs bonding:use');
    expect(await page.locator('#optimization-note').textContent()).toBe('Not shown to fleet-partner: this part needs optimization:read');
    expect(await page.locator('#features-note').getAttribute('data-withheld')).toBe('false');
    expect(await page.locator('#rental-note').getAttribute('data-withheld')).toBe('false');
    expect(errors.filter((e) => !/WebSocket/.test(e))).toEqual([]);
    await context.close();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });
  it('falls back to Server-Sent Events when its WebSocket cannot connect, with a key, and follows events live over HTTP', async () => {
    const server = await startTestServer({ env: { API_KEYS: KEY } });
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, reducedMotion: 'reduce' });
    // A proxy that blocks WebSockets: every upgrade to /graphql is closed before graphql-ws can speak.
    let refusedSockets = 0;
    await context.routeWebSocket(/\/graphql$/, (ws) => {
      refusedSockets++;
      void ws.close({ code: 1008, reason: 'WebSockets are blocked here' });
    });
    await context.addInitScript(`sessionStorage.setItem('ops-supergraph.api-key', ${JSON.stringify(KEY)})`);
    const { page, errors } = await open(context);
    await page.goto(`${server.url}/`);
    await waitFor(page, 'body[data-connection="live"][data-transport="sse"]');
    expect(refusedSockets).toBeGreaterThanOrEqual(2);
    expect(await page.locator('#connection').textContent()).toBe('Live (HTTP)');
    await until(async () => (await page.locator('.tile[data-status="available"]').count()) === 15, '15 available machine tiles over SSE');
    expect(await page.locator('#principal').textContent()).toMatch(/· operator$/);
    // Streams are open over HTTP, and an event reaches the page through one.
    await until(async () => {
      const text = await (await fetch(`${server.url}/metrics`, { headers: { 'x-api-key': KEY } })).text();
      return Number(/^http_streams_open (\d+)/m.exec(text)?.[1] ?? 0) >= 2;
    }, 'the page to open its streams over HTTP');
    const quote = await rest(
      server.url,
      'POST',
      '/rental/pricing/quote',
      { machine_ids: ['EQ-005'], location_id: 'LOC-002', start_time: hoursFromNow(4), duration_hours: 8 },
      { 'x-api-key': KEY },
    );
    expect(quote.status).toBe(200);
    await waitFor(page, '.tile[data-machine="EQ-005"][data-status="reserved"]');
    await waitFor(page, '#feed li[data-stream="machines"][data-machine="EQ-005"][data-status="reserved"]');
    expect(errors.filter((e) => !/WebSocket/.test(e))).toEqual([]);
    await context.close();
    await server.close();
  });
});
