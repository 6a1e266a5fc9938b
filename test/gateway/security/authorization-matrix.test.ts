import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildASTSchema, getNamedType, isObjectType, parse, type GraphQLField } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAuthorizer, satisfies, withoutSecurityDirectives } from '../../../gateway/security/authorization.js';
import { SCOPES, type Principal, type Scope } from '../../../platform/principal.js';
import { composeServices } from '@apollo/composition';
import { undeclaredFields } from '../../../schema/compose.js';
import { readCheckedInSupergraph } from '../../../schema/supergraph-file.js';
import { OPERATIONS_DOC, withScopesTable } from '../../../tools/scopes-table.js';
import { readSubgraphSdl } from '../../../platform/subgraph.js';
import { subgraphs } from '../../../subgraphs/registry.js';
import { gql, hoursFromNow, rest } from '../../support/http.js';
import { setups, startTestServer, type TestServer } from '../../support/server.js';
import { Collector, wsClient } from '../../support/ws.js';

/*
 * The authorization matrix, generated from the supergraph and the REST route tables: every root field and
 * every REST route declares who may use it (a field or route without a declaration fails here, so a new
 * one cannot forget), and each is asked by a principal holding each single scope, by an operator and with
 * no credential; each gets what the declaration says: 403 FORBIDDEN, 401, or an answer that is neither.
 */

const composed = readCheckedInSupergraph();
const authorizer = createAuthorizer(composed);
const schema = buildASTSchema(parse(withoutSecurityDirectives(composed)), { assumeValidSDL: true });
const scoped = SCOPES.filter((s) => s !== 'ops:admin');
const keyOf = (scope: Scope) => `matrix-${scope.replace(':', '-')}-key-000000`;
const principalOf = (scope: Scope): Principal => ({ id: `holder-${scope}`, tenant: 'matrix', scopes: [scope] });
const OPERATOR = 'matrix-operator-key-00001';
/** A partner's key: rental only (no fleet, no prediction). */
const PARTNER = 'matrix-partner-key-000001';

interface RootField {
  root: 'Query' | 'Mutation' | 'Subscription';
  field: GraphQLField<unknown, unknown>;
}
const roots: RootField[] = (['Query', 'Mutation', 'Subscription'] as const).flatMap((root) => {
  const type = schema.getType(root);
  return type && isObjectType(type) ? Object.values(type.getFields()).map((field) => ({ root, field })) : [];
});

/** The smallest valid document that selects `field`: its required arguments as variables, `__typename` below. */
function documentFor({ root, field }: RootField): string {
  const required = field.args.filter((a) => a.type.toString().endsWith('!') && a.defaultValue === undefined);
  const vars = required.map((a) => `$${a.name}: ${a.type.toString()}`).join(', ');
  const args = required.map((a) => `${a.name}: $${a.name}`).join(', ');
  const selection = isObjectType(getNamedType(field.type)) || 'getFields' in getNamedType(field.type) ? ' { __typename }' : '';
  const keyword = root === 'Query' ? 'query' : root === 'Mutation' ? 'mutation' : 'subscription';
  return `${keyword} Matrix${vars ? `(${vars})` : ''} { ${field.name}${args ? `(${args})` : ''}${selection} }`;
}

const holders = (operation: string) => scoped.filter((scope) => authorizer.checkOperation(operation, principalOf(scope)) === null);

describe('every root field and REST route declares who may use it', () => {
  it('no root field without @requiresScopes or @authenticated', () => {
    const undeclared = roots.map((r) => `${r.root}.${r.field.name}`).filter((c) => !authorizer.rules.has(c));
    expect(undeclared).toEqual([]);
    expect(roots.length).toBeGreaterThan(50);
  });

  it('no REST route whose operation selects an undeclared root field, and each is open to a scope (or public)', () => {
    for (const module of subgraphs) {
      for (const route of module.routes) {
        const rootFields = roots.filter((r) => new RegExp(`[{\\s]${r.field.name}[\\s({]`).test(route.operation));
        expect(rootFields.length, `${route.method} ${module.restPrefix}${route.path}`).toBeGreaterThan(0);
        for (const r of rootFields) expect(authorizer.rules.has(`${r.root}.${r.field.name}`), `${route.path}: ${r.field.name}`).toBe(true);
        const open = holders(route.operation);
        expect(open.length, `${route.method} ${module.restPrefix}${route.path} is open to no single scope`).toBeGreaterThan(0);
        if (route.public) expect(open.length).toBe(scoped.length);
      }
    }
  });

  it('an operator satisfies every declaration; the anonymous caller only the public ones', () => {
    for (const [coordinate, requirement] of authorizer.rules) {
      expect(satisfies({ id: 'op', tenant: 'ops', scopes: ['ops:admin'] }, requirement), coordinate).toBe(true);
    }
  });
});

describe('default deny, declared in the SDLs', () => {
  it("composition refuses a root field or a field added to another subgraph's entity without a requirement, naming it", () => {
    const base = (extra: string) => `type Query { a: Int @requiresScopes(scopes: [["fleet:read"]]) ${extra} }`;
    const owner = {
      name: 'owner',
      sdl: `${base('')} type Thing @key(fields: "id") { id: ID! name: String } extend type Query { thing: Thing @authenticated }`,
    };
    const adds = { name: 'adds', sdl: `${base('b: Int')} type Thing @key(fields: "id") { id: ID! price: Int seen: Int @external }` };
    expect(undeclaredFields([owner, adds])).toEqual(['adds: Query.b', 'adds: Thing.price']);
    // Declared (or public by declaration) and the owner's own fields: nothing to say.
    const fixed = { name: 'adds', sdl: `${base('b: Int @requiresScopes(scopes: [[]])')} type Thing @key(fields: "id") { id: ID! price: Int @authenticated }` };
    expect(undeclaredFields([owner, fixed])).toEqual([]);
    expect(undeclaredFields(subgraphs.map((m) => ({ name: m.name, sdl: readSubgraphSdl(m.name) })))).toEqual([]);
  });

  it("at run time too, a supergraph whose field added to another subgraph's entity declares nothing does not load, through an interface object as well", () => {
    const link = 'extend schema @link(url: "https://specs.apollo.dev/federation/v2.5", import: ["@key", "@requiresScopes", "@interfaceObject", "@external"])';
    const compose = (adds: string) => {
      const result = composeServices([
        {
          name: 'owner',
          url: 'http://127.0.0.1:1/graphql',
          typeDefs: parse(`${link}
            type Query { things: [Thing!]! @requiresScopes(scopes: [[]]) media: [Media!]! @requiresScopes(scopes: [[]]) }
            type Thing @key(fields: "id") { id: ID! name: String }
            interface Media @key(fields: "id") { id: ID! title: String }
            type Book implements Media @key(fields: "id") { id: ID! title: String }`),
        },
        { name: 'adds', url: 'http://127.0.0.1:2/graphql', typeDefs: parse(`${link} ${adds}`) },
      ]);
      if (result.errors) throw new Error(result.errors.map((e) => e.message).join('; '));
      return result.supergraphSdl;
    };
    const declared = '@requiresScopes(scopes: [["features:read"]])';
    expect(() => createAuthorizer(compose(`type Thing @key(fields: "id") { id: ID! price: Int ${declared} }`))).not.toThrow();
    expect(() => createAuthorizer(compose('type Thing @key(fields: "id") { id: ID! price: Int }'))).toThrow(/declare nothing: Thing\.price$/);
    expect(() => createAuthorizer(compose(`type Media @key(fields: "id") @interfaceObject { id: ID! reviews: Int ${declared} }`))).not.toThrow();
    expect(() => createAuthorizer(compose('type Media @key(fields: "id") @interfaceObject { id: ID! reviews: Int }'))).toThrow(
      /declare nothing: .*Media\.reviews/,
    );
    // Composition names it as well.
    expect(
      undeclaredFields([
        { name: 'owner', sdl: 'interface Media @key(fields: "id") { id: ID! }' },
        { name: 'adds', sdl: 'type Media @key(fields: "id") @interfaceObject { id: ID! reviews: Int }' },
      ]),
    ).toEqual(['adds: Media.reviews']);
  });

  it('deny by default at run time too: a supergraph whose root field declares nothing does not load; a root field without a rule is refused to everyone; an interface field is judged by every type that implements it', () => {
    const scoped = (scope: string) => `@requiresScopes(scopes: [["${scope}"]])`;
    // A file not composed here (a reload) cannot bring in an undeclared root field.
    expect(() => createAuthorizer(`type Query { a: Int ${scoped('fleet:read')} b: Int }`)).toThrow(/these declare nothing: Query\.b/);
    // The schema served has a root field the rules know nothing of: nobody runs it, operators included.
    const sdl = `type Query { a: Int ${scoped('fleet:read')} node: Node @requiresScopes(scopes: [[]]) }
      interface Node { id: ID! }
      type Open implements Node { id: ID! }
      type Secret implements Node { id: ID! ${scoped('features:read')} }`;
    const served = buildASTSchema(parse(`${sdl.replace(/@requiresScopes\(scopes: \[\[[^\]]*\]\]\)/g, '')} extend type Query { b: Int }`));
    const judge = createAuthorizer(sdl, { schema: served });
    const reader: Principal = { id: 'r', tenant: 't', scopes: ['fleet:read'] };
    const operator: Principal = { id: 'operator-1', tenant: 'operators', scopes: ['ops:admin'] };
    for (const who of [reader, operator]) {
      const denied = judge.denials(parse('{ b }'), who);
      expect(
        denied.map((d) => d.coordinate),
        who.id,
      ).toEqual(['Query.b']);
      expect(judge.check(parse('{ b }'), who)?.message, who.id).toContain('never declared');
    }
    expect(judge.denials(parse('{ a }'), reader)).toEqual([]);
    // `Node.id` may resolve on Secret: it needs what Secret.id needs.
    expect(judge.denials(parse('{ node { id } }'), reader).map((d) => d.coordinate)).toEqual(['Node.id']);
    expect(judge.denials(parse('{ node { id } }'), { ...reader, scopes: ['features:read'] })).toEqual([]);
    expect(judge.denials(parse('{ node { ... on Open { id } } }'), reader)).toEqual([]);
  });

  it('the scopes table of docs/operations.md is the one generated from the SDLs (npm run compose)', () => {
    expect(readFileSync(OPERATIONS_DOC, 'utf8')).toBe(withScopesTable(readFileSync(OPERATIONS_DOC, 'utf8'), composed));
    expect(readFileSync(OPERATIONS_DOC, 'utf8')).toContain('`Machine.utilizationFeatures`');
  });
});

describe.each(setups)('the matrix against a running gateway ($name)', ({ backend, mode }) => {
  let url: string;
  let server: TestServer;
  const dir = mkdtempSync(join(tmpdir(), 'matrix-'));
  beforeAll(async () => {
    const file = join(dir, 'keys.json');
    writeFileSync(
      file,
      JSON.stringify([
        ...scoped.map((scope) => ({ key: keyOf(scope), principal: `holder-${scope}`, tenant: 'matrix', scopes: [scope] })),
        { key: PARTNER, principal: 'matrix-partner', tenant: 'partner', scopes: ['rental:read', 'rental:book'] },
      ]),
    );
    server = await startTestServer({
      backend,
      mode,
      env: { API_KEYS_FILE: file, API_KEYS: OPERATOR, PRINCIPAL_SECRET: 'matrix-principal-secret-0123456789abcdef' },
    });
    ({ url } = server);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('GraphQL root fields: 403 FORBIDDEN without their scope, nothing of the kind with it, 401 without a credential', async () => {
    for (const r of roots.filter((x) => x.root !== 'Subscription')) {
      const document = documentFor(r);
      const allowed = holders(document);
      const denied = scoped.find((s) => !allowed.includes(s));
      const coordinate = `${r.root}.${r.field.name}`;
      if (denied) {
        const res = await gql(url, document, {}, { 'x-api-key': keyOf(denied) });
        expect(res.status, `${coordinate} as ${denied}`).toBe(403);
        expect(res.errors?.[0]?.extensions?.['code'], coordinate).toBe('FORBIDDEN');
      }
      for (const key of [...allowed.slice(0, 1).map(keyOf), OPERATOR]) {
        const res = await gql(url, document, {}, { 'x-api-key': key });
        const codes = (res.errors ?? []).map((e) => e.extensions?.['code']);
        expect(codes, `${coordinate} with ${key}`).not.toContain('FORBIDDEN');
        expect(codes, `${coordinate} with ${key}`).not.toContain('UNAUTHENTICATED');
      }
      expect((await gql(url, document)).status, coordinate).toBe(401);
    }
  });

  it('a query with fields its principal may not use answers the rest: those null, FORBIDDEN at their paths', async () => {
    const partner = { 'x-api-key': PARTNER };
    const quote = await gql(
      url,
      `mutation($i: CreateQuoteInput!) { createQuote(input: $i) { id } }`,
      {
        i: { machineIds: ['EQ-005'], locationId: 'LOC-001', startTime: hoursFromNow(50), durationHours: 2 },
      },
      partner,
    );
    expect(quote.errors).toBeUndefined();
    const confirm = (selection: string) =>
      gql(
        url,
        `mutation($q: ID!) { confirmBooking(input: { quoteId: $q, customerName: "Partner BV" }) ${selection} }`,
        { q: quote.data!['createQuote'].id },
        partner,
      );
    // A mutation is refused whole when it selects a denied field: nothing changes.
    const refused = await confirm('{ id deliveryForecast { q50Minutes } }');
    expect(refused.status).toBe(403);
    expect(refused.errors?.[0]?.extensions?.['code']).toBe('FORBIDDEN');
    const booked = await confirm('{ id status }');
    expect(booked.errors).toBeUndefined();
    const id = booked.data!['confirmBooking'].id as string;

    const query = `query($id: ID!) { booking(id: $id) { id deliveryForecast { q50Minutes } status } machine(id: "EQ-005") { id } }`;
    const res = await gql(url, query, { id }, partner);
    expect(res.status).toBe(200);
    expect(res.data).toEqual({ booking: { id, deliveryForecast: null, status: 'CONFIRMED' }, machine: null });
    expect(Object.keys(res.data!['booking'])).toEqual(['id', 'deliveryForecast', 'status']);
    expect(res.errors?.map((e) => [e.path, e.extensions?.['code'], e.extensions?.['denied']])).toEqual([
      [['booking', 'deliveryForecast'], 'FORBIDDEN', ['Booking.deliveryForecast']],
      [['machine'], 'FORBIDDEN', ['Query.machine']],
    ]);
    expect(res.errors?.[0]?.message).toContain('prediction:read');
    // The same query by an operator: everything answered.
    const whole = await gql(url, query, { id }, { 'x-api-key': OPERATOR });
    expect(whole.errors).toBeUndefined();
    expect(whole.data!['booking'].deliveryForecast.q50Minutes).toBeGreaterThan(0);
    expect(whole.data!['machine']).toEqual({ id: 'EQ-005' });
    // A denied non-null root field would null the whole answer: refused whole, nothing runs.
    const nulled = await gql(url, `{ bookings { totalCount } fleetSummary { __typename } }`, {}, partner);
    expect(nulled.status).toBe(403);
    expect(nulled.errors?.[0]?.extensions?.['denied']).toEqual([{ path: ['fleetSummary'], field: 'Query.fleetSummary', requires: [['fleet:read']] }]);

    // Over WebSocket, the same answer as over HTTP.
    const ws = wsClient(url, partner);
    const c = new Collector(ws.client, query, { id });
    await c.until((x) => x.completed || x.error !== undefined);
    expect(c.results).toEqual([{ data: res.data, errors: res.errors }]);
    await ws.dispose();
  });

  it('subscriptions: refused as the operation starts without their scope; open with it', async () => {
    for (const r of roots.filter((x) => x.root === 'Subscription')) {
      const document = documentFor(r);
      const allowed = holders(document);
      const denied = scoped.find((s) => !allowed.includes(s))!;
      const refused = wsClient(url, { 'x-api-key': keyOf(denied) });
      const c = new Collector(refused.client, document);
      await c.until((x) => x.results.length > 0 || x.error !== undefined || x.completed);
      expect(JSON.stringify(c.results[0]?.errors ?? c.error), r.field.name).toContain('FORBIDDEN');
      await refused.dispose();
      const accepted = wsClient(url, { 'x-api-key': keyOf(allowed[0]!) });
      if (r.field.args.some((a) => a.type.toString().endsWith('!'))) {
        // Without its required variables the operation fails on their values, after authorization.
        const ok = new Collector(accepted.client, document);
        await ok.until((x) => x.results.length > 0 || x.error !== undefined || x.completed);
        expect(JSON.stringify(ok.results[0]?.errors ?? ok.error ?? ''), r.field.name).not.toMatch(/FORBIDDEN|UNAUTHENTICATED/);
        expect(JSON.stringify(ok.results[0]?.errors ?? ok.error ?? ''), r.field.name).toMatch(/BAD_USER_INPUT|was not provided/);
      } else {
        // A live stream opens: the gateway registers it upstream.
        const ok = await server.live.opened(() => new Collector(accepted.client, document));
        expect(ok.error, r.field.name).toBeUndefined();
        expect(ok.results, r.field.name).toEqual([]);
      }
      await accepted.dispose();
    }
  });

  it('REST routes: 403 before any input is read without their scope; never 401/403 with it; public ones open', async () => {
    for (const module of subgraphs) {
      for (const route of module.routes) {
        const path = `${module.restPrefix}${route.path}`.replace(/:(\w+)/g, 'x');
        const allowed = holders(route.operation);
        const denied = scoped.find((s) => !allowed.includes(s));
        const label = `${route.method} ${module.restPrefix}${route.path}`;
        if (denied) {
          const res = await rest(url, route.method, path, route.method === 'GET' ? undefined : {}, { 'x-api-key': keyOf(denied) });
          expect(res.status, `${label} as ${denied}`).toBe(403);
          expect(res.body['code'], label).toBe('FORBIDDEN');
        }
        const res = await rest(url, route.method, path, route.method === 'GET' ? undefined : {}, { 'x-api-key': keyOf(allowed[0]!) });
        expect([401, 403], `${label} as ${allowed[0]}: ${JSON.stringify(res.body)}`).not.toContain(res.status);
        const anonymous = await rest(url, route.method, path, route.method === 'GET' ? undefined : {});
        if (route.public) expect([401, 403], label).not.toContain(anonymous.status);
        else expect(anonymous.status, label).toBe(401);
      }
    }
  });
});
