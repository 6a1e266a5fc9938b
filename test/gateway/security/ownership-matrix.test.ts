import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  buildASTSchema,
  getNamedType,
  isCompositeType,
  isInputObjectType,
  isListType,
  isNonNullType,
  isObjectType,
  isScalarType,
  isEnumType,
  parse,
  type GraphQLArgument,
  type GraphQLField,
  type GraphQLInputType,
  type GraphQLObjectType,
} from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { readKeyFile } from '../../../gateway/security/auth.js';
import { createAuthorizer, securityRules, withoutSecurityDirectives } from '../../../gateway/security/authorization.js';
import { PRINCIPAL_HEADER, PrincipalSigner, SCOPES, type Principal } from '../../../platform/principal.js';
import { readSubgraphSdl, type OwnedType, type SubgraphModule } from '../../../platform/subgraph.js';
import { readCheckedInSupergraph } from '../../../schema/supergraph-file.js';
import { subgraphs } from '../../../subgraphs/registry.js';
import { gql, rest } from '../../support/http.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import { Collector, wsClient } from '../../support/ws.js';

/*
 * The ownership matrix, generated from the owned types the subgraphs declare (`owned` in each module), the
 * supergraph and the REST route tables. Two tenants each have a principal named `ci` (and tenant A a second
 * principal). For every owned type, tenant A makes one; then, as tenant B's `ci`, every root field, mutation,
 * REST route, subscription start and `_entities` call that takes such an id answers for A's exactly as for an
 * id no row has; every list leaves it out; every event stream, live and replayed from the first event, names
 * none of A's objects. And every field that declares a scope is refused, at the subgraph server itself, to a
 * signed principal without it. A new owned type, field or route is covered here without a test of its own.
 */

const composed = readCheckedInSupergraph();
const schema = buildASTSchema(parse(withoutSecurityDirectives(composed)), { assumeValidSDL: true });
const SECRET = randomBytes(24).toString('hex');
const signer = PrincipalSigner.from(SECRET)!;
const everyScope = SCOPES.filter((s) => s !== 'ops:admin' && s !== 'metrics:read' && s !== 'schema:read');
const KEYS = { a: 'owner-matrix-a-ci-000001', aOther: 'owner-matrix-a-other-0002', b: 'owner-matrix-b-ci-000003', operator: 'owner-matrix-operator-04' };
const B_PRINCIPAL: Principal = { id: 'ci', tenant: 'tenant-b', scopes: everyScope };

const owned: { module: SubgraphModule; type: OwnedType }[] = subgraphs.flatMap((module) => (module.owned ?? []).map((type) => ({ module, type })));
const ownedNames = new Set(owned.map((o) => o.type.type));

/**
 * REST routes known to take each owned type's id. The matrix finds the routes from the route tables itself (a
 * new one is covered without being listed); this list makes sure it still reaches the ones known.
 */
const ID_ROUTES: Readonly<Record<string, readonly string[]>> = {
  Quote: ['POST /rental/booking/confirm'],
  Booking: ['GET /rental/booking/:booking_id/track', 'POST /rental/booking/:booking_id/complete'],
  BondingSession: ['GET /bonding/api/bonding/status', 'POST /bonding/api/bonding/close', 'POST /bonding/api/qkd/generate'],
  QuantumRun: ['GET /optimization/quantum/runs/:run_id'],
};

const rootFields = (root: 'Query' | 'Mutation' | 'Subscription') => Object.values((schema.getType(root) as GraphQLObjectType).getFields());
const snake = (name: string) => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** A value for a required input of type `type` named `name`: the owned type's example input, or a plain one. */
function valueFor(type: GraphQLInputType, name: string, inputs: Readonly<Record<string, unknown>>, id: string, ids: readonly string[]): unknown {
  if (ids.includes(name)) return id;
  if (name in inputs) return inputs[name];
  const bare = isNonNullType(type) ? type.ofType : type;
  if (isListType(bare)) return [];
  if (isInputObjectType(bare)) {
    return Object.fromEntries(
      Object.values(bare.getFields())
        .filter((f) => (isNonNullType(f.type) && f.defaultValue === undefined) || ids.includes(f.name) || f.name in inputs)
        .map((f) => [f.name, valueFor(f.type, f.name, inputs, id, ids)]),
    );
  }
  if (isEnumType(bare)) return bare.getValues()[0]!.value;
  if (isScalarType(bare)) return bare.name === 'Int' || bare.name === 'Float' ? 1 : bare.name === 'Boolean' ? false : 'matrix';
  return null;
}

/** Whether an argument (or a field of its input object) carries an id of the owned type. */
const carriesId = (arg: GraphQLArgument, ids: readonly string[]): boolean => {
  if (ids.includes(arg.name)) return true;
  const bare = getNamedType(arg.type);
  return isInputObjectType(bare) && Object.keys(bare.getFields()).some((f) => ids.includes(f));
};

/** The smallest selection of a field's answer. */
const selectionOf = (field: GraphQLField<unknown, unknown>) => (isCompositeType(getNamedType(field.type)) ? ' { __typename }' : '');

/** A document running `field` with its arguments as variables, and the variables for an id. */
function operationFor(keyword: string, field: GraphQLField<unknown, unknown>, o: OwnedType, id: string) {
  const ids = [...o.idArguments, ...(getNamedType(field.type).name === o.type ? ['id'] : [])];
  const used = field.args.filter((a) => carriesId(a, ids) || (isNonNullType(a.type) && a.defaultValue === undefined));
  const vars = used.map((a) => `$${a.name}: ${a.type.toString()}`).join(', ');
  const args = used.map((a) => `${a.name}: $${a.name}`).join(', ');
  const variables = Object.fromEntries(used.map((a) => [a.name, valueFor(a.type, a.name, o.inputs ?? {}, id, ids)]));
  return { text: `${keyword} Matrix${vars ? `(${vars})` : ''} { ${field.name}${args ? `(${args})` : ''}${selectionOf(field)} }`, variables };
}

/** The fields (of a root) that take an id of `o`: an argument named as its ids, or `id` on a field returning it. */
const fieldsTaking = (root: 'Query' | 'Mutation' | 'Subscription', o: OwnedType) =>
  rootFields(root).filter((f) => f.args.some((a) => carriesId(a, [...o.idArguments, ...(getNamedType(f.type).name === o.type ? ['id'] : [])])));

/** Root Query fields listing `o` with no required argument: the type itself, or a connection of it. */
const listsOf = (o: OwnedType) =>
  rootFields('Query').filter((f) => {
    if (f.args.some((a) => isNonNullType(a.type) && a.defaultValue === undefined)) return false;
    const named = getNamedType(f.type);
    if (named.name === o.type) return isListType(isNonNullType(f.type) ? f.type.ofType : f.type);
    if (!isObjectType(named)) return false;
    const edges = named.getFields()['edges'];
    const node = edges && isObjectType(getNamedType(edges.type)) ? (getNamedType(edges.type) as GraphQLObjectType).getFields()['node'] : undefined;
    return node !== undefined && getNamedType(node.type).name === o.type;
  });

/** An answer with the given ids written as `<id>`, so A's and the unknown id's answers compare. */
const normalized = (value: unknown, ids: readonly string[]) => {
  let text = JSON.stringify(value);
  for (const id of ids) text = text.split(id).join('<id>');
  return JSON.parse(text) as unknown;
};

describe('every entity type is owned or shared, and every owned row carries its owner', () => {
  it('classifies each @key type of the supergraph', () => {
    const entities = new Set(subgraphs.flatMap((m) => [...readSubgraphSdl(m.name).matchAll(/^type (\w+) @key/gm)].map((x) => x[1]!)));
    const classified = new Set([...ownedNames, ...subgraphs.flatMap((m) => m.shared ?? [])]);
    expect([...entities].filter((t) => !classified.has(t))).toEqual([]);
    expect(ownedNames).toEqual(new Set(['Quote', 'Booking', 'BondingSession', 'QuantumRun']));
  });

  it('refuses a keys file that claims a reserved name, naming the entry', () => {
    const dir = mkdtempSync(join(tmpdir(), 'reserved-'));
    try {
      for (const [entry, pattern] of [
        [{ principal: 'sandbox', tenant: 't' }, /entry 0: principal "sandbox" is reserved/],
        [{ principal: 'operator-7', tenant: 't' }, /entry 0: principal "operator-7" is reserved/],
        [{ principal: 'app', tenant: 'demo' }, /entry 0: tenant "demo" is reserved/],
        [{ principal: 'app', tenant: 'operators' }, /entry 0: tenant "operators" is reserved/],
      ] as const) {
        const file = join(dir, 'keys.json');
        writeFileSync(file, JSON.stringify([{ key: 'reserved-name-key-00001', scopes: ['fleet:read'], ...entry }]));
        expect(() => readKeyFile(file), JSON.stringify(entry)).toThrow(pattern);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the ownership matrix (pglite, distributed)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ownership-'));
  let server: TestServer;
  let url: string;
  /** What each owned type's rows tenant A (and its other principal) made, and tenant B's own. */
  const made = new Map<string, { a: string; aOther: string; b: string }>();
  const runAs =
    (key: string) =>
    async (operation: string, variables: Record<string, unknown> = {}) => {
      const res = await gql(url, operation, variables, { 'x-api-key': key });
      if (res.errors) throw new Error(`${operation}: ${JSON.stringify(res.errors)}`);
      return res.data!;
    };
  beforeAll(async () => {
    const file = join(dir, 'keys.json');
    writeFileSync(
      file,
      JSON.stringify([
        { key: KEYS.a, principal: 'ci', tenant: 'tenant-a', scopes: everyScope },
        { key: KEYS.aOther, principal: 'other', tenant: 'tenant-a', scopes: everyScope },
        { key: KEYS.b, principal: 'ci', tenant: 'tenant-b', scopes: everyScope },
      ]),
    );
    server = await startTestServer({
      mode: 'distributed',
      env: {
        API_KEYS_FILE: file,
        API_KEYS: KEYS.operator,
        PRINCIPAL_SECRET: SECRET,
        OPTIMIZATION_MAX_CONCURRENT_RUNS: '8',
        OPTIMIZATION_MAX_CONCURRENT_RUNS_PER_TENANT: '4',
      },
    });
    url = server.url;
    for (const { type } of owned) {
      made.set(type.type, { a: await type.make(runAs(KEYS.a)), aOther: await type.make(runAs(KEYS.aOther)), b: await type.make(runAs(KEYS.b)) });
    }
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('stores every owned row with its owner: tenant and principal', async () => {
    for (const { module, type } of owned) {
      const ids = made.get(type.type)!;
      // Distributed on PGlite: each subgraph server has a database of its own.
      const db = server.subgraphServers.get(module.name)?.runtime.db ?? server.db;
      const res = await db.query<{ id: string; tenant: string; principal: string }>(
        `SELECT id::text AS id, ${type.owner.tenant} AS tenant, ${type.owner.principal} AS principal FROM ${type.table} WHERE id::text = ANY($1)`,
        [[ids.a, ids.b]],
      );
      const byId = new Map(res.rows.map((r) => [r.id, r]));
      expect(byId.get(ids.a), type.type).toMatchObject({ tenant: 'tenant-a', principal: 'ci' });
      expect(byId.get(ids.b), type.type).toMatchObject({ tenant: 'tenant-b', principal: 'ci' });
    }
  });

  for (const { type: o } of owned) {
    describe(`${o.type}`, () => {
      // Tenant B's `ci` never sees tenant A's `ci`'s; at principal grain neither does A's other principal.
      const viewersOf = () => (o.grain === 'principal' ? [KEYS.b, KEYS.aOther] : [KEYS.b]);

      it("every root field and mutation that takes its id answers for another owner's exactly as for an unknown id", async () => {
        const ids = made.get(o.type)!;
        const fields = [...fieldsTaking('Query', o).map((f) => ['query', f] as const), ...fieldsTaking('Mutation', o).map((f) => ['mutation', f] as const)];
        expect(fields.length, `${o.type}: some field takes its id`).toBeGreaterThan(0);
        for (const [keyword, field] of fields) {
          for (const key of viewersOf()) {
            const theirs = operationFor(keyword, field, o, ids.a);
            const unknown = operationFor(keyword, field, o, o.unknownId);
            const [x, y] = [
              await gql(url, theirs.text, theirs.variables, { 'x-api-key': key }),
              await gql(url, unknown.text, unknown.variables, { 'x-api-key': key }),
            ];
            const label = `${keyword} ${field.name} as ${key}`;
            expect(x.status, label).toBe(y.status);
            expect(normalized({ data: x.data, errors: x.errors }, [ids.a, o.unknownId]), label).toEqual(
              normalized({ data: y.data, errors: y.errors }, [ids.a, o.unknownId]),
            );
          }
        }
        // The owner reaches its own through the same root fields (the paths are alive).
        for (const field of fieldsTaking('Query', o)) {
          const mine = operationFor('query', field, o, ids.a);
          const res = await gql(url, mine.text, mine.variables, { 'x-api-key': KEYS.a });
          expect(res.errors, `${field.name} as its owner`).toBeUndefined();
        }
      });

      it("every list leaves another owner's out", async () => {
        const ids = made.get(o.type)!;
        for (const field of listsOf(o)) {
          const connection = getNamedType(field.type).name !== o.type;
          const text = `{ ${field.name}${connection ? ' { edges { node { id } } }' : ' { id }'} }`;
          for (const key of viewersOf()) {
            const seen = JSON.stringify((await gql(url, text, {}, { 'x-api-key': key })).data);
            expect(seen, `${field.name} as ${key}`).not.toContain(ids.a);
          }
          expect(JSON.stringify((await gql(url, text, {}, { 'x-api-key': KEYS.a })).data), `${field.name} as its owner`).toContain(ids.a);
        }
      });

      it("every REST route that takes its id answers for another owner's exactly as for an unknown id", async () => {
        const ids = made.get(o.type)!;
        const names = o.idArguments.map(snake);
        const routes: string[] = [];
        for (const module of subgraphs) {
          for (const route of module.routes) {
            const shape = (schemaOf: z.ZodType | undefined) => (schemaOf instanceof z.ZodObject ? Object.keys(schemaOf.shape) : []);
            const inParams = shape(route.params).filter((k) => names.includes(k));
            const inQuery = shape(route.query).filter((k) => names.includes(k));
            const inBody = shape(route.body).filter((k) => names.includes(k));
            if (inParams.length + inQuery.length + inBody.length === 0) continue;
            routes.push(`${route.method} ${module.restPrefix}${route.path}`);
            const request = (id: string) => {
              let path = `${module.restPrefix}${route.path}`;
              for (const p of inParams) path = path.replace(`:${p}`, encodeURIComponent(id));
              if (inQuery.length > 0) path += `?${inQuery.map((q) => `${q}=${encodeURIComponent(id)}`).join('&')}`;
              const extra = Object.fromEntries(
                shape(route.body)
                  .filter((k) => k in (o.inputs ?? {}))
                  .map((k) => [k, o.inputs![k]]),
              );
              const body = inBody.length > 0 ? { ...extra, ...Object.fromEntries(inBody.map((k) => [k, id])) } : route.method === 'GET' ? undefined : extra;
              return { path, body };
            };
            for (const key of viewersOf()) {
              const theirs = request(ids.a);
              const unknown = request(o.unknownId);
              const x = await rest(url, route.method, theirs.path, theirs.body, { 'x-api-key': key });
              const y = await rest(url, route.method, unknown.path, unknown.body, { 'x-api-key': key });
              const label = `${route.method} ${module.restPrefix}${route.path} as ${key}`;
              expect(x.status, label).toBe(y.status);
              expect([200, 201], label).not.toContain(x.status);
              expect(normalized(x.body, [ids.a, o.unknownId]), label).toEqual(normalized(y.body, [ids.a, o.unknownId]));
            }
          }
        }
        expect(ID_ROUTES, `${o.type}: its REST routes listed in ID_ROUTES`).toHaveProperty([o.type]);
        expect(routes, `${o.type}: REST routes taking its id`).toEqual(expect.arrayContaining([...ID_ROUTES[o.type]!]));
      });

      it("a subscription started on another owner's id is refused as on an unknown one", async () => {
        const ids = made.get(o.type)!;
        for (const field of fieldsTaking('Subscription', o)) {
          for (const key of viewersOf()) {
            const answers: string[] = [];
            for (const id of [ids.a, o.unknownId]) {
              const ws = wsClient(url, { 'x-api-key': key });
              const op = operationFor('subscription', field, o, id);
              const c = new Collector(ws.client, op.text.replace('{ __typename }', '{ cursor }'), op.variables);
              await c.until((x) => x.results.length > 0 || x.error !== undefined || x.completed);
              answers.push(JSON.stringify(normalized(c.results[0] ?? c.error, [ids.a, o.unknownId])));
              await ws.dispose();
            }
            expect(answers[0], `${field.name} as ${key}`).toBe(answers[1]);
            expect(answers[0], `${field.name} as ${key}`).toContain('NOT_FOUND');
          }
        }
      });

      it("_entities on its subgraph server: another owner's reference resolves as an unknown one", async () => {
        const ids = made.get(o.type)!;
        const module = owned.find((x) => x.type === o)!.module;
        const target = server.subgraphServers.get(module.name)!.graphqlUrl;
        const ask = async (id: string, principal: Principal) => {
          const body = JSON.stringify({
            query: `query($r: [_Any!]!) { _entities(representations: $r) { ... on ${o.type} { id } } }`,
            variables: { r: [{ __typename: o.type, id }] },
          });
          const header = signer.sign(principal, { subgraph: module.name, method: 'POST', path: new URL(target).pathname, body });
          const res = await fetch(target, { method: 'POST', headers: { 'content-type': 'application/json', [PRINCIPAL_HEADER]: header }, body });
          return { status: res.status, body: (await res.json()) as { data?: unknown } };
        };
        const theirs = await ask(ids.a, B_PRINCIPAL);
        // The whole answer, what it says of the state it read included, with the id asked for written as `<id>`.
        expect(normalized(theirs, [ids.a, o.unknownId])).toEqual(normalized(await ask(o.unknownId, B_PRINCIPAL), [ids.a, o.unknownId]));
        expect(theirs.body.data).toEqual({ _entities: [null] });
        expect((await ask(ids.a, { id: 'ci', tenant: 'tenant-a', scopes: everyScope })).body.data).toEqual({ _entities: [{ id: ids.a }] });
      });
    });
  }

  it("event streams, replayed from the first event and live, name none of another tenant's objects; fleet state still reaches everyone", async () => {
    // The subscription fields whose events can name an owned object (an id field, or an owned type).
    const eventFields = rootFields('Subscription').filter((f) => !f.args.some((a) => isNonNullType(a.type) && a.defaultValue === undefined));
    const naming = eventFields.filter((f) => {
      const event = getNamedType(f.type) as GraphQLObjectType;
      return Object.values(event.getFields()).some((x) =>
        owned.some(({ type }) => type.idArguments.includes(x.name) || getNamedType(x.type).name === type.type),
      );
    });
    expect(naming.map((f) => f.name).sort()).toEqual(['machineStatusChanged', 'quantumRunCompleted']);
    const selection = (f: GraphQLField<unknown, unknown>) =>
      Object.values((getNamedType(f.type) as GraphQLObjectType).getFields())
        .map((x) =>
          isCompositeType(getNamedType(x.type))
            ? `${x.name} { ${'id' in (getNamedType(x.type) as GraphQLObjectType).getFields() ? 'id' : '__typename'} }`
            : x.name,
        )
        .join(' ');
    const open = (key: string, f: GraphQLField<unknown, unknown>) => {
      const ws = wsClient(url, { 'x-api-key': key });
      return { ws, c: new Collector(ws.client, `subscription { ${f.name}(after: "0") { ${selection(f)} } }`) };
    };
    const streams = naming.map((f) => ({ f, b: open(KEYS.b, f), ops: open(KEYS.operator, f) }));
    // Live: each tenant makes one more of every owned type after the streams opened.
    const live = { a: [] as string[], b: [] as string[] };
    for (const { type } of owned) {
      live.a.push(await type.make(runAs(KEYS.a)));
      live.b.push(await type.make(runAs(KEYS.b)));
    }
    const aIds = [...[...made.values()].flatMap((m) => [m.a, m.aOther]), ...live.a];
    const bIds = [...[...made.values()].map((m) => m.b), ...live.b];
    for (const { f, b, ops } of streams) {
      const text = (c: Collector) => JSON.stringify(c.results);
      // The operator sees A's objects in this stream (so the check means something), and B its own newest one.
      await ops.c.until(
        (c) => live.a.some((id) => text(c).includes(id)) && live.b.some((id) => text(c).includes(id)),
        undefined,
        `${f.name}: the operator's stream`,
      );
      await b.c.until((c) => live.b.some((id) => text(c).includes(id)), undefined, `${f.name}: B's own live event`);
      expect(b.c.error, f.name).toBeUndefined();
      for (const id of aIds) expect(text(b.c), `${f.name} carries ${id} to tenant B`).not.toContain(id);
      expect(
        bIds.some((id) => text(b.c).includes(id)),
        f.name,
      ).toBe(true);
    }
    // A machine A reserved changed status in B's stream too (fleet state), its quote and booking null.
    const machines = streams.find((s) => s.f.name === 'machineStatusChanged')!;
    const events = machines.b.c.results.map(
      (r) => (r.data as { machineStatusChanged: { quoteId: string | null; bookingId: string | null } }).machineStatusChanged,
    );
    expect(events.filter((e) => e.quoteId === null && e.bookingId === null).length).toBeGreaterThan(0);
    for (const s of streams) {
      await s.b.ws.dispose();
      await s.ops.ws.dispose();
    }
  });

  it('quantum-run slots: one tenant holds at most its own share, another still starts', async () => {
    const capped = await startTestServer({
      env: { API_KEYS_FILE: join(dir, 'keys.json'), OPTIMIZATION_MAX_CONCURRENT_RUNS: '3', OPTIMIZATION_MAX_CONCURRENT_RUNS_PER_TENANT: '1' },
    });
    const start = (key: string) =>
      gql(
        capped.url,
        'mutation { startQuantumRun(input: { problem: REGULAR3_MAXCUT, size: 20, depth: 2, maxEvaluations: 20, shots: 100 }) { id } }',
        {},
        { 'x-api-key': key },
      );
    const [first, second] = await Promise.all([start(KEYS.a), start(KEYS.aOther)]);
    const refused = [first, second].filter((r) => r.errors);
    expect(refused).toHaveLength(1);
    expect(refused[0]!.errors![0]!.extensions!['code']).toBe('RATE_LIMITED');
    expect(refused[0]!.errors![0]!.message).toContain('Tenant tenant-a');
    const other = await start(KEYS.b);
    expect(other.errors).toBeUndefined();
    await capped.close();
  });
});

describe('every declared field is refused at the subgraph server to a signed principal without its scope', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ mode: 'distributed', env: { API_KEYS: KEYS.operator, PRINCIPAL_SECRET: SECRET } });
  });

  it('root fields and entity fields of each subgraph SDL', async () => {
    let checked = 0;
    for (const module of subgraphs) {
      const sdl = readSubgraphSdl(module.name);
      const authorizer = createAuthorizer(sdl, { schema: server.subgraphs.get(module.name)!.schema });
      const target = server.subgraphServers.get(module.name)!.graphqlUrl;
      for (const [coordinate, requirement] of securityRules(sdl)) {
        if (!requirement.scopes || requirement.scopes.some((all) => all.length === 0)) continue;
        const [typeName, fieldName] = coordinate.split('.') as [string, string];
        const type = server.subgraphs.get(module.name)!.schema.getType(typeName) as GraphQLObjectType;
        const field = type.getFields()[fieldName]!;
        const required = field.args.filter((a) => isNonNullType(a.type) && a.defaultValue === undefined);
        const args = required.length ? `(${required.map((a) => `${a.name}: $${a.name}`).join(', ')})` : '';
        const vars = required.map((a) => `$${a.name}: ${a.type.toString()}`).join(', ');
        const inner = `${fieldName}${args}${selectionOf(field)}`;
        const root = typeName === 'Query' ? 'query' : typeName === 'Mutation' ? 'mutation' : typeName === 'Subscription' ? null : 'entity';
        if (root === null) continue; // subscriptions: tested over graphql-ws in test/gateway/security/between-processes.test.ts
        const query =
          root === 'entity'
            ? `query($r: [_Any!]!${vars ? `, ${vars}` : ''}) { _entities(representations: $r) { ... on ${typeName} { ${inner} } } }`
            : `${root}${vars ? `(${vars})` : ''} { ${inner} }`;
        const body = JSON.stringify({ query, variables: root === 'entity' ? { r: [{ __typename: typeName, id: 'x' }] } : {} });
        // A principal holding every scope but the ones this field names.
        const lacking: Principal = { id: 'lacking', tenant: 't', scopes: everyScope.filter((s) => !requirement.scopes!.flat().includes(s)) };
        expect(authorizer.refusal(parse(query), undefined, lacking, {}), coordinate).not.toBeNull();
        const header = signer.sign(lacking, { subgraph: module.name, method: 'POST', path: new URL(target).pathname, body });
        const res = await fetch(target, { method: 'POST', headers: { 'content-type': 'application/json', [PRINCIPAL_HEADER]: header }, body });
        const answer = (await res.json()) as { errors?: { extensions?: { code?: string; denied?: { field: string }[] } }[] };
        expect(res.status, `${module.name}: ${coordinate}`).toBe(403);
        expect(
          answer.errors?.[0]?.extensions?.denied?.map((d) => d.field),
          coordinate,
        ).toContain(coordinate);
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(50);
  });
});
