import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../support/server.js';

/*
 * /docs in headless Chromium: the page renders /openapi.json with the renderer `npm run build` took from
 * the registry's tarball (tools/build.mjs), under the page's CSP, with nothing loaded from elsewhere.
 */

/** Debian's `chromium` (.ci/run installs it when apt-get can), or CHROMIUM_PATH. */
const CHROMIUM = process.env['CHROMIUM_PATH'] || '/usr/bin/chromium';
const noBrowser = existsSync(CHROMIUM) ? null : `no Chromium at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)`;
if (noBrowser) console.warn(`API reference browser test skipped: ${noBrowser}`);

describe.skipIf(noBrowser !== null)('the API reference page in headless Chromium', () => {
  let server: TestServer;
  let browser: Browser;
  beforeAll(async () => {
    server = await startTestServer();
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
  });
  afterAll(async () => {
    await browser?.close();
  });

  it('renders every REST path of /openapi.json, loading nothing from anywhere else, with no error', async () => {
    const page = await browser.newPage();
    const errors: string[] = [];
    const elsewhere: string[] = [];
    page.on('console', (message) => {
      if (message.type() === 'error') errors.push(message.text());
    });
    page.on('pageerror', (error) => errors.push(String(error)));
    page.on('request', (request) => {
      if (!request.url().startsWith(server.url)) elsewhere.push(request.url());
    });
    page.on('response', (response) => {
      if (response.status() >= 400) errors.push(`${response.status()} ${response.url()}`);
    });
    const spec = (await (await fetch(`${server.url}/openapi.json`)).json()) as { paths: Record<string, unknown> };
    const paths = Object.keys(spec.paths);
    expect(paths).toContain('/rental/fleet/summary');
    await page.goto(`${server.url}/docs`);
    // RapiDoc renders into its shadow DOM; wait until every path is shown there.
    await page.waitForFunction(
      (wanted) => {
        // In the page (this suite compiles without the DOM's types).
        const page = globalThis as unknown as { document: { querySelector(selector: string): { shadowRoot: { textContent: string | null } | null } | null } };
        const text = page.document.querySelector('rapi-doc')?.shadowRoot?.textContent ?? '';
        return wanted.every((path) => text.includes(path));
      },
      paths,
      { timeout: 60_000 },
    );
    expect(errors).toEqual([]);
    expect(elsewhere).toEqual([]);
    await page.close();
  });
});
