import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditEntry } from '../../../gateway/security/audit.js';
import { safelistEnv } from '../../support/credentials.js';
import { hoursFromNow } from '../../support/http.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import { waitFor } from '../../support/wait.js';

/*
 * The MCP endpoint tried with the official SDK's client, as an agent would: the tools are the registered
 * documents of the clients its credential may act as, each call one operation through the pipeline (its
 * refusals, its audit line), `execute` only for a credential holding schema:free-text, the schema a resource
 * only with schema:read; sessions bound to their principal and bounded.
 */

const OPERATOR = 'mcp-operator-key-00000001';
/** Fleet and rental, no prediction, no free text, no schema:read. */
const PARTNER = 'mcp-partner-key-000000001';
/** schema:free-text and schema:read besides fleet. */
const EXPLORER = 'mcp-explorer-key-00000001';
const SESSIONS = ['a', 'b', 'c', 'd'].map((s) => `mcp-sessions-${s}-key-0000001`);

const FLEET = '# How many machines there are, and how many are free now.\nquery McpFleet { fleetSummary { total available } }';
const MODELS = 'query McpModels { predictionModels { ready } }';
const QUOTE =
  '# Quotes machines for a time and place (reserves them until the quote expires).\nmutation McpQuote($input: CreateQuoteInput!) { createQuote(input: $input) { id } }';
const CHANGES = 'subscription McpChanges { fleetSummaryChanged { cursor } }';
const PAGE = 'query McpPage($n: Int) { bookings(first: $n) { totalCount } }';

/** A quote of a machine no other quote of this suite holds (a quote reserves its machines). */
let quoted = 0;
const quoteInput = () => ({ machineIds: [`EQ-${String(++quoted).padStart(3, '0')}`], locationId: 'LOC-001', startTime: hoursFromNow(50), durationHours: 4 });

/** What the SDK's client answered, as plain JSON: the answer as it crossed the wire. */
const plain = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T;

/** An SDK client connected with `key`; its `end` ends the session (DELETE) and closes it. */
async function connect(url: string, key: string): Promise<Client & { end(): Promise<void> }> {
  const client = new Client({ name: 'mcp-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: { 'x-api-key': key } } });
  await client.connect(transport);
  return Object.assign(client, {
    end: async () => {
      await transport.terminateSession();
      await client.close();
    },
  });
}

/** A JSON-RPC request as a raw POST: status, session header and body. */
async function rpc(url: string, key: string, body: unknown, session?: string): Promise<{ status: number; session: string | null; body: any }> {
  const res = await fetch(`${url}/mcp`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'x-api-key': key,
      ...(session ? { 'mcp-session-id': session } : {}),
    },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, session: res.headers.get('mcp-session-id'), body: text ? (JSON.parse(text) as unknown) : null };
}

const initialize = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
};
const listTools = { jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} };

describe('the MCP endpoint (keys file, TRUSTED_DOCUMENTS=safelist)', () => {
  let server: TestServer;
  let url: string;
  const audits: AuditEntry[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'mcp-'));
  const quotes = () => audits.filter((a) => a.operation === 'createQuote').length;

  beforeAll(async () => {
    const operations = [FLEET, MODELS, QUOTE, CHANGES, PAGE].map((body, i) => ({
      id: `mcp-doc-${i}`,
      body,
      name: /(query|mutation|subscription) (\w+)/.exec(body)![2]!,
    }));
    const credentials = safelistEnv(
      dir,
      [
        { key: PARTNER, principal: 'mcp-partner', tenant: 'agents', scopes: ['fleet:read', 'rental:read', 'rental:book'] },
        { key: EXPLORER, principal: 'mcp-explorer', tenant: 'agents', scopes: ['fleet:read', 'schema:free-text', 'schema:read'] },
        ...SESSIONS.map((key, i) => ({ key, principal: `mcp-sessions-${i}`, tenant: 'sessions', scopes: ['fleet:read'] })),
      ],
      [{ client: 'agent-app', principals: ['agents/*'], operations }],
    );
    server = await startTestServer({
      env: {
        ...credentials,
        API_KEYS: OPERATOR,
        MCP_MAX_SESSIONS: '6',
        MCP_SESSIONS_PER_PRINCIPAL: '2',
        MCP_SESSION_IDLE_S: '5',
        STATE_CACHE_MB: '0',
      },
      audit: (entry) => audits.push(entry),
    });
    ({ url } = server);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("lists the registered queries and mutations of the caller's clients as tools: described by their comment, input from their variables", async () => {
    const client = await connect(url, PARTNER);
    const { tools } = plain(await client.listTools());
    const byName = new Map(tools.map((t) => [t.name, t]));
    expect([...byName.keys()]).toEqual(expect.arrayContaining(['McpFleet', 'McpModels', 'McpQuote', 'McpPage', 'RentalMachines']));
    // A subscription answers more than once: no tool. Free text needs schema:free-text.
    expect(byName.has('McpChanges')).toBe(false);
    expect(byName.has('execute')).toBe(false);
    expect(byName.get('McpFleet')?.description).toBe('How many machines there are, and how many are free now.');
    const quote = byName.get('McpQuote')!.inputSchema as { required?: string[]; properties: Record<string, unknown>; $defs?: Record<string, any> };
    expect(quote.required).toEqual(['input']);
    expect(quote.$defs?.['CreateQuoteInput']?.required).toEqual(expect.arrayContaining(['machineIds', 'locationId', 'startTime', 'durationHours']));
    const page = byName.get('McpPage')!.inputSchema as unknown as { properties: { n: { anyOf: { type: string }[] } }; required?: string[] };
    expect(page.properties.n.anyOf.map((s) => s.type)).toEqual(['integer', 'null']);
    expect(page.required).toBeUndefined();
    await client.end();
  });

  it('a tool call is an operation through the pipeline: its answer, its audit line; a field out of scope is refused', async () => {
    const client = await connect(url, PARTNER);
    const fleet = plain(await client.callTool({ name: 'McpFleet', arguments: {} }));
    expect(fleet.isError).toBeFalsy();
    expect((fleet.structuredContent as { data: { fleetSummary: { total: number } } }).data.fleetSummary.total).toBeGreaterThan(0);
    const quote = plain(await client.callTool({ name: 'McpQuote', arguments: { input: quoteInput() } }));
    expect(quote.isError).toBeFalsy();
    expect((quote.structuredContent as { data: { createQuote: { id: string } } }).data.createQuote.id).toMatch(/\S/);
    expect(audits.find((a) => a.operation === 'createQuote' && a.principal === 'mcp-partner')).toMatchObject({ tenant: 'agents', outcome: 'ok' });
    const models = plain(await client.callTool({ name: 'McpModels', arguments: {} }));
    expect(models.isError).toBe(true);
    expect((models.structuredContent as { errors: { extensions: { code: string } }[] }).errors[0]!.extensions.code).toBe('FORBIDDEN');
    await client.end();
  });

  it('an unknown tool, `execute` without schema:free-text, arguments that do not match: JSON-RPC -32602, nothing run', async () => {
    const client = await connect(url, PARTNER);
    const before = quotes();
    const failure = async (name: string, args: Record<string, unknown>) => {
      const error: unknown = await client.callTool({ name, arguments: args }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(error instanceof McpError, name).toBe(true);
      expect((error as McpError).code, name).toBe(-32602);
      return (error as McpError).message;
    };
    expect(await failure('NoSuchTool', {})).toMatch(/Unknown tool: NoSuchTool/);
    expect(await failure('execute', { query: '{ fleetSummary { total } }' })).toMatch(/Unknown tool: execute/);
    expect(await failure('McpQuote', { input: { ...quoteInput(), machineIds: 'EQ-015', durationHours: 'four' } })).toMatch(/durationHours/);
    expect(await failure('McpQuote', {})).toMatch(/\$input/);
    expect(await failure('McpFleet', { extra: 1 })).toMatch(/"extra" is not an argument of McpFleet/);
    expect(quotes()).toBe(before);
    await client.end();
  });

  it('schema:free-text gets `execute` (text through the pipeline); schema:read gets the schema as a resource', async () => {
    const explorer = await connect(url, EXPLORER);
    expect(plain(await explorer.listTools()).tools.map((t) => t.name)).toContain('execute');
    const ran = plain(await explorer.callTool({ name: 'execute', arguments: { query: 'query Free { fleetSummary { total } }' } }));
    expect(ran.isError).toBeFalsy();
    expect((ran.structuredContent as { data: { fleetSummary: { total: number } } }).data.fleetSummary.total).toBeGreaterThan(0);
    // Bookings need rental:read, which it does not hold: the operation is refused, as over POST.
    const refusedText = plain(
      await explorer.callTool({ name: 'execute', arguments: { query: 'query Free($n: Int) { bookings(first: $n) { totalCount } }', variables: { n: 1 } } }),
    );
    expect(refusedText.isError).toBe(true);
    expect((refusedText.structuredContent as { errors: { extensions: { code: string } }[] }).errors[0]!.extensions.code).toBe('FORBIDDEN');
    const resources = plain(await explorer.listResources());
    expect(resources.resources.map((r) => r.uri)).toEqual(['graphql://schema']);
    const schema = plain(await explorer.readResource({ uri: 'graphql://schema' }));
    expect((schema.contents[0] as { text: string }).text).toMatch(/type Query \{/);
    await explorer.end();

    const partner = await connect(url, PARTNER);
    expect(plain(await partner.listResources()).resources).toEqual([]);
    const refused: unknown = await partner.readResource({ uri: 'graphql://schema' }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(refused instanceof McpError).toBe(true);
    await partner.end();
  });

  it('sessions: bound to their principal, at most two per principal, six in all (the least recently used closed), closed when idle; no credential is 401, GET is 405', async () => {
    // Another principal naming a session is answered as if it did not exist.
    const opened = await rpc(url, SESSIONS[0]!, initialize);
    expect(opened.status).toBe(200);
    expect(opened.session).toMatch(/\S/);
    expect((await rpc(url, SESSIONS[1]!, listTools, opened.session!)).status).toBe(404);
    expect((await rpc(url, SESSIONS[0]!, listTools, opened.session!)).status).toBe(200);
    // A third session of one principal closes its least recently used.
    const second = await rpc(url, SESSIONS[0]!, initialize);
    const third = await rpc(url, SESSIONS[0]!, initialize);
    expect([second.status, third.status]).toEqual([200, 200]);
    expect((await rpc(url, SESSIONS[0]!, listTools, opened.session!)).status).toBe(404);
    expect((await rpc(url, SESSIONS[0]!, listTools, third.session!)).status).toBe(200);
    // Six in all: when the process is full, a new session closes the least recently used of all (no set of
    // credentials can hold the endpoint); its client gets 404 and starts again.
    const others = [];
    for (const key of SESSIONS.slice(1)) for (let i = 0; i < 2; i++) others.push(await rpc(url, key, initialize));
    expect(others.map((o) => o.status)).toEqual([200, 200, 200, 200, 200, 200]);
    expect((await rpc(url, SESSIONS[0]!, listTools, second.session!)).status).toBe(404);
    expect((await rpc(url, SESSIONS[0]!, listTools, third.session!)).status).toBe(404);
    expect((await rpc(url, SESSIONS[3]!, listTools, others.at(-1)!.session!)).status).toBe(200);
    // Watched on /metrics: a request on a session would keep it from idling.
    const open = async () => {
      const text = await (await fetch(`${url}/metrics`, { headers: { 'x-api-key': OPERATOR } })).text();
      return Number(/^mcp_sessions (\d+)/m.exec(text)?.[1]);
    };
    expect(await open()).toBe(6);
    await waitFor(async () => (await open()) === 0, 'the idle MCP sessions closed');
    expect((await rpc(url, SESSIONS[3]!, listTools, others.at(-1)!.session!)).status).toBe(404);
    expect((await rpc(url, SESSIONS[3]!, initialize)).status).toBe(200);
    // One message per request: a JSON-RPC batch is refused, nothing run.
    const batched = await rpc(url, PARTNER, [initialize, listTools]);
    expect(batched.status).toBe(400);

    const anonymous = await fetch(`${url}/mcp`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(initialize) });
    expect(anonymous.status).toBe(401);
    const stream = await fetch(`${url}/mcp`, { headers: { 'x-api-key': PARTNER, accept: 'text/event-stream' } });
    expect(stream.status).toBe(405);
    // A request without a session that is not an initialize is a clear 400.
    expect((await rpc(url, PARTNER, listTools)).status).toBe(400);
  });
});
