import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApolloClient, ApolloLink, gql as parseQuery, HttpLink, InMemoryCache } from '@apollo/client';
import { createPersistedQueryLink } from '@apollo/client/link/persisted-queries';
import { generatePersistedQueryManifest } from '@apollo/generate-persisted-query-manifest';
import { generatePersistedQueryIdsFromManifest } from '@apollo/persisted-query-lists';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rest } from '../../support/http.js';
import { startTestServer, type TestServer } from '../../support/server.js';

/*
 * Production clients send registered operations: automatic persisted queries (Apollo Client's
 * persisted-query link), trusted documents from manifests (written by @apollo/generate-persisted-query-manifest,
 * or Relay's `{ id: text }`) named by hash, `documentId` or `doc_id`, and a safelist that refuses free text to
 * principals without `schema:free-text`, never REST.
 */

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
const MODELS = 'query Models { predictionModels { ready seed dwell { version coverage80 } } }';
const FLEET = 'query Fleet { fleetSummary { total } }';

interface Answer {
  status: number;
  headers: Headers;
  body: { data?: Record<string, unknown> | null; errors?: { message: string; extensions?: { code?: string } }[]; code?: string; detail?: string };
}

async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await fetch(`${url}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Answer['body'] };
}

async function get(url: string, params: Record<string, unknown>, headers: Record<string, string> = {}): Promise<Answer> {
  const search = new URLSearchParams(Object.entries(params).map(([k, v]): [string, string] => [k, typeof v === 'string' ? v : JSON.stringify(v)]));
  const res = await fetch(`${url}/graphql?${search.toString()}`, { headers: { 'apollo-require-preflight': 'true', ...headers } });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Answer['body'] };
}

const codeOf = (answer: Answer) => answer.body.errors?.[0]?.extensions?.code ?? answer.body.code;

async function metric(url: string, key: string, pattern: RegExp): Promise<number> {
  const text = await (await fetch(`${url}/metrics`, { headers: { 'x-api-key': key } })).text();
  const line = text.split('\n').find((l) => pattern.test(l));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

describe('automatic persisted queries (demo mode)', () => {
  let url: string;
  beforeAll(async () => {
    ({ url } = await startTestServer());
  });

  it('Apollo Client with the persisted-query link: the text is sent once, later requests send the hash alone', async () => {
    const sent: { hash: boolean; query: boolean }[] = [];
    const fetchSpy: typeof fetch = async (input, init) => {
      const body = typeof init?.body === 'string' ? (JSON.parse(init.body) as { query?: string; extensions?: { persistedQuery?: unknown } }) : {};
      sent.push({ hash: body.extensions?.persistedQuery !== undefined, query: typeof body.query === 'string' });
      return fetch(input, init);
    };
    const client = () =>
      new ApolloClient({
        link: ApolloLink.from([createPersistedQueryLink({ sha256 }), new HttpLink({ uri: `${url}/graphql`, fetch: fetchSpy })]),
        cache: new InMemoryCache(),
      });
    const first = await client().query({ query: parseQuery(FLEET) });
    expect((first.data as { fleetSummary: { total: number } }).fleetSummary.total).toBeGreaterThan(0);
    // The hash alone (not found), then hash and text.
    expect(sent).toEqual([
      { hash: true, query: false },
      { hash: true, query: true },
    ]);
    const second = await client().query({ query: parseQuery(FLEET) });
    expect(second.data).toEqual(first.data);
    expect(sent.slice(2)).toEqual([{ hash: true, query: false }]);
    expect(await metric(url, '', /^graphql_persisted_query_requests_total\{outcome="hit"\}/)).toBeGreaterThanOrEqual(1);
  });

  it('an unknown hash answers PERSISTED_QUERY_NOT_FOUND with 200 as Apollo Server does; a wrong or malformed hash is refused and nothing is kept', async () => {
    const unknown = await post(url, { extensions: { persistedQuery: { version: 1, sha256Hash: sha256('{ __typename }x') } } });
    expect(unknown.status).toBe(200);
    expect(codeOf(unknown)).toBe('PERSISTED_QUERY_NOT_FOUND');
    expect(unknown.body.errors?.[0]?.message).toBe('PersistedQueryNotFound');

    const text = '{ machines { id } }';
    const wrong = await post(url, { query: text, extensions: { persistedQuery: { version: 1, sha256Hash: sha256('{ depots { id } }') } } });
    expect(wrong.status).toBe(400);
    expect(wrong.body.errors?.[0]?.message).toContain('does not match');
    // The text was not registered under either hash.
    for (const hash of [sha256(text), sha256('{ depots { id } }')]) {
      expect(codeOf(await post(url, { extensions: { persistedQuery: { version: 1, sha256Hash: hash } } }))).toBe('PERSISTED_QUERY_NOT_FOUND');
    }
    for (const [bad, says] of [
      [{ version: 1, sha256Hash: 'abc' }, '64 hexadecimal'],
      [{ version: 2, sha256Hash: sha256(text) }, 'version'],
      ['nope', 'object'],
    ] as const) {
      const answer = await post(url, { query: text, extensions: { persistedQuery: bad } });
      expect(answer.status, JSON.stringify(bad)).toBe(400);
      expect(codeOf(answer)).toBe('BAD_REQUEST');
      expect(answer.body.errors?.[0]?.message).toContain(says);
    }
  });

  it('a hashed query sent by GET is cacheable for as long as its fields declare, and varies by credential', async () => {
    const hash = sha256(MODELS);
    const register = await post(url, { query: MODELS, extensions: { persistedQuery: { version: 1, sha256Hash: hash } } });
    expect(register.status).toBe(200);
    const byHash = await get(url, { extensions: { persistedQuery: { version: 1, sha256Hash: hash } } });
    expect(byHash.status).toBe(200);
    expect(byHash.body.data).toEqual(register.body.data);
    expect(byHash.headers.get('cache-control')).toBe('private, max-age=300');
    expect(byHash.headers.get('vary')).toMatch(/authorization, x-api-key/);
    // A field without a hint (fleetSummary is live) makes the answer uncacheable; free text by GET is not a registered document.
    const fleetHash = sha256(FLEET);
    await post(url, { query: FLEET, extensions: { persistedQuery: { version: 1, sha256Hash: fleetHash } } });
    expect((await get(url, { extensions: { persistedQuery: { version: 1, sha256Hash: fleetHash } } })).headers.get('cache-control')).toBe('no-store');
    expect((await get(url, { query: MODELS })).headers.get('cache-control')).toBe('no-store');
  });
});

describe('trusted documents with a safelist', () => {
  const dir = mkdtempSync(join(tmpdir(), 'trusted-'));
  const documentsDir = join(dir, 'documents');
  let url: string;
  let server: TestServer;
  const PARTNER = 'trusted-partner-key-00001';
  const OTHER = 'trusted-other-key-000002';
  const EXPLORER = 'trusted-explorer-key-0003';
  const OPERATOR = 'trusted-operator-key-04';
  let manifest: { format: string; operations: { id: string; name: string; type: string; body: string }[] };

  beforeAll(async () => {
    // The dashboard team's operations, as files in its repository, and the manifest Apollo's generator writes.
    const sources = join(dir, 'src');
    rmSync(sources, { recursive: true, force: true });
    const { mkdirSync } = await import('node:fs');
    mkdirSync(sources, { recursive: true });
    mkdirSync(documentsDir, { recursive: true });
    writeFileSync(join(sources, 'fleet.graphql'), `${FLEET}\n`);
    writeFileSync(join(sources, 'models.graphql'), `${MODELS}\n`);
    manifest = await generatePersistedQueryManifest({ documents: [join(sources, '*.graphql')] }, undefined);
    expect(manifest.operations.map((o) => o.name).sort()).toEqual(['Fleet', 'Models']);
    writeFileSync(join(documentsDir, 'dashboard-web.json'), JSON.stringify(manifest));
    writeFileSync(join(documentsDir, 'relay-app.json'), JSON.stringify({ 'relay-fleet-1': 'query RelayFleet { fleetSummary { total available } }' }));
    writeFileSync(
      join(documentsDir, 'clients.json'),
      JSON.stringify({ 'dashboard-web': { principals: ['tenant-p/partner'] }, 'relay-app': { principals: ['tenant-p/*'] } }),
    );
    const keys = join(dir, 'keys.json');
    writeFileSync(
      keys,
      JSON.stringify([
        { key: PARTNER, principal: 'partner', tenant: 'tenant-p', scopes: ['fleet:read', 'prediction:read', 'rental:read'] },
        { key: OTHER, principal: 'other', tenant: 'tenant-q', scopes: ['fleet:read', 'prediction:read'] },
        { key: EXPLORER, principal: 'explorer', tenant: 'tenant-p', scopes: ['fleet:read', 'schema:free-text'] },
      ]),
    );
    server = await startTestServer({
      env: { API_KEYS_FILE: keys, API_KEYS: OPERATOR, TRUSTED_DOCUMENTS: 'safelist', TRUSTED_DOCUMENTS_DIR: documentsDir },
    });
    url = server.url;
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const as = (key: string, client?: string) => ({ 'x-api-key': key, ...(client ? { 'apollographql-client-name': client } : {}) });

  it('free text is refused with 403 PERSISTED_QUERY_NOT_IN_LIST to a principal without schema:free-text; it runs for schema:free-text and operators', async () => {
    const refused = await post(url, { query: '{ machines { id } }' }, as(PARTNER));
    expect(refused.status).toBe(403);
    expect(codeOf(refused)).toBe('PERSISTED_QUERY_NOT_IN_LIST');
    // APQ is free text too: nothing is registered for a refused request.
    const apq = await post(
      url,
      { query: '{ machines { id } }', extensions: { persistedQuery: { version: 1, sha256Hash: sha256('{ machines { id } }') } } },
      as(PARTNER),
    );
    expect(apq.status).toBe(403);
    for (const key of [EXPLORER, OPERATOR]) {
      const ran = await post(url, { query: '{ machines { id } }' }, as(key));
      expect(ran.status, key).toBe(200);
      expect((ran.body.data?.['machines'] as unknown[]).length).toBeGreaterThan(0);
    }
  });

  it("Apollo Client with ids from the generated manifest runs the dashboard's documents; the text of a registered document runs too", async () => {
    const client = new ApolloClient({
      link: ApolloLink.from([
        createPersistedQueryLink(generatePersistedQueryIdsFromManifest({ loadManifest: () => manifest })),
        new HttpLink({ uri: `${url}/graphql`, headers: as(PARTNER, 'dashboard-web') }),
      ]),
      cache: new InMemoryCache(),
    });
    const fleet = await client.query({ query: parseQuery(FLEET) });
    expect((fleet.data as { fleetSummary: { total: number } }).fleetSummary.total).toBeGreaterThan(0);
    const models = manifest.operations.find((o) => o.name === 'Models')!;
    const byText = await post(url, { query: models.body }, as(PARTNER, 'dashboard-web'));
    expect(byText.status).toBe(200);
    expect(await metric(url, OPERATOR, /^graphql_trusted_document_requests_total\{client="dashboard-web",operation="Fleet"\}/)).toBeGreaterThanOrEqual(1);
    expect(await metric(url, OPERATOR, /^graphql_trusted_document_requests_total\{client="dashboard-web",operation="Models"\}/)).toBeGreaterThanOrEqual(1);
  });

  it('a Relay-style doc_id runs for the principals of its client; a registered GET is cacheable; an unknown id is a clear error', async () => {
    const relay = await post(url, { doc_id: 'relay-fleet-1', variables: {} }, as(PARTNER, 'relay-app'));
    expect(relay.status).toBe(200);
    expect(relay.body.data?.['fleetSummary']).toHaveProperty('available');
    const byDocumentId = await post(url, { documentId: 'relay-fleet-1' }, as(PARTNER));
    expect(byDocumentId.body.data).toEqual(relay.body.data);

    const models = manifest.operations.find((o) => o.name === 'Models')!;
    const cached = await get(url, { documentId: models.id }, as(PARTNER, 'dashboard-web'));
    expect(cached.status).toBe(200);
    expect(cached.headers.get('cache-control')).toBe('private, max-age=300');

    const unknown = await post(url, { doc_id: 'relay-nope' }, as(PARTNER, 'relay-app'));
    expect(unknown.status).toBe(400);
    expect(codeOf(unknown)).toBe('PERSISTED_QUERY_NOT_FOUND');
    expect(unknown.body.errors?.[0]?.message).toContain('relay-nope');
  });

  it('GET /graphql/documents lists the documents of the clients a caller may act as, and whether it may send text', async () => {
    type Listed = { mode: string; freeText: boolean; documents: { client: string; id: string; name: string | null; type: string; text: string }[] };
    const list = async (key?: string) => {
      const res = await fetch(`${url}/graphql/documents`, { headers: key ? { 'x-api-key': key } : {} });
      return { status: res.status, cache: res.headers.get('cache-control'), body: res.status === 200 ? ((await res.json()) as Listed) : null };
    };
    const named = (listed: Listed | null) =>
      (listed?.documents ?? [])
        .filter((d) => d.client !== 'rest')
        .map((d) => `${d.client}/${d.name}`)
        .sort();
    expect((await list()).status).toBe(401);
    const partner = await list(PARTNER);
    expect(partner).toMatchObject({ status: 200, cache: 'private, no-store', body: { mode: 'safelist', freeText: false } });
    expect(named(partner.body)).toEqual(['dashboard-web/Fleet', 'dashboard-web/Models', 'relay-app/RelayFleet']);
    const fleet = partner.body!.documents.find((d) => d.name === 'Fleet')!;
    expect(fleet).toMatchObject({ type: 'query', text: manifest.operations.find((o) => o.name === 'Fleet')!.body });
    // REST routes are documents of their own, listed (with the fields they name) only to those who may read the
    // schema; another tenant sees no client's documents.
    expect(partner.body!.documents.some((d) => d.client === 'rest')).toBe(false);
    expect((await list(OPERATOR)).body!.documents.some((d) => d.client === 'rest')).toBe(true);
    expect(named((await list(OTHER)).body)).toEqual([]);
    const explorer = await list(EXPLORER);
    expect(explorer.body).toMatchObject({ freeText: true });
    expect(named(explorer.body)).toEqual(['relay-app/RelayFleet']);
  });

  it('a principal the client is not tied to may not use its documents', async () => {
    const other = await post(url, { doc_id: 'relay-fleet-1' }, as(OTHER, 'relay-app'));
    expect(other.status).toBe(403);
    expect(codeOf(other)).toBe('FORBIDDEN');
    const noClient = await post(url, { doc_id: 'relay-fleet-1' }, as(OTHER));
    expect(noClient.status).toBe(400);
    expect(codeOf(noClient)).toBe('PERSISTED_QUERY_NOT_FOUND');
  });

  it('a reload (SIGHUP) serves a new manifest; a manifest that does not load leaves the documents served before', async () => {
    const relay = join(documentsDir, 'relay-app.json');
    writeFileSync(
      relay,
      JSON.stringify({ 'relay-fleet-1': 'query RelayFleet { fleetSummary { total available } }', 'relay-depots-1': 'query RelayDepots { depots { id } }' }),
    );
    expect(server.reloadDocuments()).toEqual({ ok: true, clients: 3 });
    expect((await post(url, { doc_id: 'relay-depots-1' }, as(PARTNER, 'relay-app'))).status).toBe(200);

    writeFileSync(relay, JSON.stringify({ 'relay-broken': '{ depots { nope } }' }));
    const failed = server.reloadDocuments();
    expect(failed.ok).toBe(false);
    expect(!failed.ok && failed.error).toMatch(/relay-app\.json: operation id relay-broken: not valid/);
    expect((await post(url, { doc_id: 'relay-depots-1' }, as(PARTNER, 'relay-app'))).status).toBe(200);
  });

  it('REST paths are documents of their own: a safelist never breaks a partner', async () => {
    const machines = await rest(url, 'GET', '/rental/fleet/machines', undefined, { 'x-api-key': PARTNER });
    expect(machines.status).toBe(200);
  });
});

describe('manifests refused at start', () => {
  const dir = mkdtempSync(join(tmpdir(), 'manifests-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it.each([
    ['not JSON', '{ nope', /bad\.json: not JSON/],
    ['an invalid operation', JSON.stringify({ 'q-1': '{ noSuchField }' }), /bad\.json: operation id q-1: not valid against the served schema: .*noSuchField/],
    ['text that does not parse', JSON.stringify({ 'q-2': 'query {' }), /bad\.json: operation id q-2: does not parse/],
    [
      'a manifest whose name disagrees with its text',
      JSON.stringify({ format: 'apollo-persisted-query-manifest', operations: [{ id: 'x', name: 'A', type: 'query', body: 'query B { depots { id } }' }] }),
      /bad\.json: operation A \(id x\): the manifest names it A, its text B/,
    ],
  ])('%s: the start fails naming the file and the operation', async (_what, text, message) => {
    const folder = mkdtempSync(join(dir, 'case-'));
    writeFileSync(join(folder, 'bad.json'), text);
    writeFileSync(join(folder, 'clients.json'), JSON.stringify({ bad: { principals: ['*'] } }));
    await expect(startTestServer({ env: { API_KEYS: 'manifest-operator-key', TRUSTED_DOCUMENTS: 'safelist', TRUSTED_DOCUMENTS_DIR: folder } })).rejects.toThrow(
      message,
    );
  });
});
