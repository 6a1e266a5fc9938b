import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDashboard } from '../../../gateway/dashboard/build.js';
import { dashboardBuilt } from '../../../gateway/dashboard/plugin.js';
import { hoursFromNow, rest } from '../../support/http.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import { until } from '../../support/wait.js';

/*
 * The GraphQL explorer (GraphiQL at /graphiql, where a browser opening /graphql is sent), in headless
 * Chromium against real servers: a query run, a subscription's event after a mutation, a refusal for a field
 * out of the caller's scope, the caller's trusted documents offered, and nothing loaded from another host.
 */

const CHROMIUM = process.env['CHROMIUM_PATH'] || '/usr/bin/chromium';
const noBrowser = existsSync(CHROMIUM) ? null : `no Chromium at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)`;
if (noBrowser) console.warn(`explorer browser tests skipped: ${noBrowser}`);

const BROWSER_ACCEPT = 'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8';

beforeAll(async () => {
  if (!dashboardBuilt()) await buildDashboard();
});

describe('the explorer, served', () => {
  let demo: TestServer;
  beforeAll(async () => {
    demo = await startTestServer();
  });

  it('sends a browser at /graphql to /graphiql in demo mode, a page from this origin only; GraphQL clients are answered as before', async () => {
    const sent = await fetch(`${demo.url}/graphql`, { headers: { accept: BROWSER_ACCEPT }, redirect: 'manual' });
    expect(sent.status).toBe(303);
    // Relative: the page is found behind a proxy that mounts the gateway under a path.
    expect(sent.headers.get('location')).toBe('graphiql');
    const page = await fetch(`${demo.url}/graphiql`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toContain('text/html');
    const policy = page.headers.get('content-security-policy')!;
    expect(policy).toContain("script-src 'self'");
    expect(policy).toContain("frame-ancestors 'none'");
    const html = await page.text();
    expect(html).not.toMatch(/(src|href)="https?:\/\//);
    // A GraphQL client's Accept (or none) still gets its answer at /graphql, and so does a GET that names its
    // operation whatever it accepts (Java's HttpURLConnection ranks text/html first by default).
    for (const accept of ['application/graphql-response+json', '*/*', 'text/html, image/gif, image/jpeg, *; q=.2, */*; q=.2']) {
      const res = await fetch(`${demo.url}/graphql?query=${encodeURIComponent('{ fleetSummary { total } }')}`, {
        headers: { accept, 'apollo-require-preflight': '1' },
      });
      expect(res.status, accept).toBe(200);
    }
  });

  it('is off by default once credentials are configured: a browser at /graphql is refused, /graphiql does not exist', async () => {
    const locked = await startTestServer({ env: { API_KEYS: 'explorer-off-key-0001' } });
    expect((await fetch(`${locked.url}/graphql`, { headers: { accept: 'text/html', 'x-api-key': 'explorer-off-key-0001' } })).status).toBe(406);
    expect((await fetch(`${locked.url}/graphiql`, { headers: { 'x-api-key': 'explorer-off-key-0001' } })).status).toBe(404);
    await locked.close();
  });
});

describe.skipIf(noBrowser !== null)('the explorer in headless Chromium', () => {
  let browser: Browser;
  let demo: TestServer;
  let keyed: TestServer;
  const dir = mkdtempSync(join(tmpdir(), 'explorer-'));
  const READER = 'explorer-reader-key-0001';
  const NARROW = 'explorer-narrow-key-0002';

  beforeAll(async () => {
    const documents = join(dir, 'documents');
    const { mkdirSync } = await import('node:fs');
    mkdirSync(documents, { recursive: true });
    writeFileSync(join(documents, 'ops-console.json'), JSON.stringify({ 'fleet-total-1': 'query FleetTotal { fleetSummary { total available } }' }));
    writeFileSync(join(documents, 'clients.json'), JSON.stringify({ 'ops-console': { principals: ['tenant-e/*'] } }));
    const keys = join(dir, 'keys.json');
    writeFileSync(
      keys,
      JSON.stringify([
        { key: READER, principal: 'reader', tenant: 'tenant-e', scopes: ['fleet:read', 'schema:read', 'schema:free-text'] },
        { key: NARROW, principal: 'narrow', tenant: 'tenant-e', scopes: ['fleet:read', 'schema:free-text'] },
      ]),
    );
    [browser, demo, keyed] = await Promise.all([
      chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] }),
      startTestServer(),
      startTestServer({ env: { API_KEYS_FILE: keys, GRAPHQL_EXPLORER: 'on', TRUSTED_DOCUMENTS: 'safelist', TRUSTED_DOCUMENTS_DIR: documents } }),
    ]);
  });
  afterAll(async () => {
    await browser?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /**
   * A fresh page (no stored tabs or history), with every request it makes and every console error kept;
   * `blockSockets`: every WebSocket to /graphql closed before graphql-ws can speak, as a proxy that does not pass
   * them would.
   */
  async function open(url: string, options: { blockSockets?: boolean } = {}): Promise<{ page: Page; foreign: string[]; errors: string[] }> {
    const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    if (options.blockSockets) await context.routeWebSocket(/\/graphql$/, (ws) => ws.close());
    const page = await context.newPage();
    const foreign: string[] = [];
    const errors: string[] = [];
    const origin = new URL(url).origin;
    page.on('request', (request) => {
      const target = request.url();
      if (!target.startsWith(origin) && !target.startsWith('data:') && !target.startsWith('blob:')) foreign.push(target);
    });
    page.on('console', (message) => {
      if (message.type() === 'error') errors.push(message.text());
    });
    page.on('pageerror', (error) => errors.push(error.message));
    await page.goto(url);
    await page.locator('.graphiql-container').waitFor();
    return { page, foreign, errors };
  }

  /** Puts `headers` in the headers editor (its tab shown first when it is not). */
  async function typeHeaders(page: Page, headers: Record<string, string>): Promise<void> {
    const tab = page.locator('.graphiql-editor-tools button', { hasText: 'Headers' });
    if (!(await tab.getAttribute('class'))?.includes('active')) await tab.click();
    await typeInto(page, '.graphiql-editor-tool', JSON.stringify(headers));
  }

  /** Replaces an editor's text (the query editor, or the headers editor once its tab is shown). */
  async function typeInto(page: Page, editor: string, text: string): Promise<void> {
    await page.locator(`${editor} .monaco-editor`).filter({ visible: true }).first().click();
    await page.keyboard.press('ControlOrMeta+A');
    await page.keyboard.press('Delete');
    await page.keyboard.insertText(text);
  }

  /** The response pane's text (the editor lays spaces out as no-break spaces). */
  const response = async (page: Page) => (await page.locator('.graphiql-response').innerText()).replaceAll('\u00a0', ' ');

  /** Waits for the response pane to match, and gives its text (the last text seen, when it never does). */
  async function answered(page: Page, pattern: RegExp, what: string): Promise<string> {
    let last = '';
    await until(async () => pattern.test((last = await response(page))), what, { detail: () => last.slice(0, 600) });
    return last;
  }

  async function run(page: Page): Promise<void> {
    await page.locator('.graphiql-execute-button').click();
  }

  it('runs a query typed into the editor, with the schema from introspection and nothing from another host', async () => {
    const { page, foreign, errors } = await open(`${demo.url}/graphql`);
    expect(new URL(page.url()).pathname).toBe('/graphiql');
    await typeInto(page, '.graphiql-query-editor', 'query Fleet { fleetSummary { total } }');
    await run(page);
    await answered(page, /"total": 15/, 'the query answered in the response pane');
    // The docs explorer has the schema: introspection answered.
    await page.locator('button[aria-label="Show Documentation Explorer"]').click();
    await until(async () => (await page.locator('.graphiql-doc-explorer').innerText()).includes('Query'), 'the docs explorer to show the schema');
    expect(foreign).toEqual([]);
    expect(errors).toEqual([]);
    await page.context().close();
  });

  it("shows a subscription's event after a mutation, over graphql-ws", async () => {
    const { page } = await open(`${demo.url}/graphiql`);
    await typeInto(page, '.graphiql-query-editor', 'subscription Machines { machineStatusChanged { machine { id } status } }');
    await demo.live.opened(() => run(page));
    const quote = await rest(demo.url, 'POST', '/rental/pricing/quote', {
      machine_ids: ['EQ-002'],
      location_id: 'LOC-001',
      start_time: hoursFromNow(72),
      duration_hours: 4,
    });
    expect(quote.status).toBe(200);
    await answered(page, /"id": "EQ-002"[\s\S]*"status": "RESERVED"/, 'the event in the response pane');
    expect(await page.locator('body').getAttribute('data-transport')).toBe('websocket');
    await page.context().close();
  });

  it('falls back to Server-Sent Events for a subscription when no WebSocket can be opened, and shows @defer answers as they arrive', async () => {
    const { page } = await open(`${demo.url}/graphiql`, { blockSockets: true });
    await typeInto(page, '.graphiql-query-editor', 'subscription Fleet { fleetSummaryChanged { reserved } }');
    await demo.live.opened(() => run(page));
    expect(await page.locator('body').getAttribute('data-transport')).toBe('sse');
    expect(await page.locator('#explorer-note').innerText()).toMatch(/Server-Sent Events/);
    const quote = await rest(demo.url, 'POST', '/rental/pricing/quote', {
      machine_ids: ['EQ-003'],
      location_id: 'LOC-001',
      start_time: hoursFromNow(96),
      duration_hours: 4,
    });
    expect(quote.status).toBe(200);
    await answered(page, /"reserved": [1-9]/, 'the event over SSE in the response pane');
    // The subscription runs until stopped: the button stops it first.
    await run(page);
    await until(async () => !/stop/i.test((await page.locator('.graphiql-execute-button').getAttribute('aria-label')) ?? ''), 'the subscription stopped');
    await typeInto(page, '.graphiql-query-editor', 'query Deferred { fleetSummary { total } ... @defer(label: "machines") { machines { id } } }');
    await run(page);
    const answer = await answered(page, /"EQ-001"/, 'the deferred part in the response pane');
    expect(answer).toMatch(/"total": 15/);
    await page.context().close();
  });

  it('says why there is no schema for a credential without schema:read, and still runs its operations', async () => {
    const { page } = await open(`${keyed.url}/graphiql`);
    await typeHeaders(page, { 'x-api-key': NARROW });
    await page.locator('button[aria-label^="Re-fetch GraphQL schema"]').click();
    await until(async () => (await page.locator('body').getAttribute('data-schema')) === 'refused', 'the schema refused');
    expect(await page.locator('#explorer-note').innerText()).toMatch(/No schema or docs for this credential: .*schema:read/);
    await typeInto(page, '.graphiql-query-editor', '{ fleetSummary { total } }');
    await run(page);
    await answered(page, /"total": 15/, 'the query answered without a schema');
    await page.context().close();
  });

  it('carries the credential typed into the headers, answers a field out of scope with FORBIDDEN, and offers the caller its trusted documents', async () => {
    const { page } = await open(`${keyed.url}/graphiql`);
    await typeHeaders(page, { 'x-api-key': READER });
    await typeInto(page, '.graphiql-query-editor', '{ fleetSummary { total } bondingSessions { id } }');
    await run(page);
    const answer = await answered(page, /FORBIDDEN/, 'the refusal in the response pane');
    // The pane wraps long lines: compared with its whitespace collapsed.
    expect(answer.replace(/\s+/g, ' ')).toMatch(/Principal reader may not run this operation: bondingSessions \(Query.bondingSessions\) needs bonding:use/);
    // The Documents tab lists the registered documents of the clients the caller may act as.
    await page.locator('button[aria-label="Show Trusted documents"]').click();
    let listed = '';
    await until(async () => (listed = await page.locator('.explorer-documents').innerText()).includes('FleetTotal'), 'the documents listed', {
      detail: () => listed,
    });
    await page.locator('.explorer-documents button', { hasText: 'FleetTotal' }).click();
    await run(page);
    await answered(page, /"available"/, 'the registered document answered');
    // The credential stays in the page: nothing of it in the browser's storage.
    const stored = await page.evaluate<string>('JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }) + document.cookie');
    expect(stored).not.toContain(READER);
    await page.context().close();
  });
});
