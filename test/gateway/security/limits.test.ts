import { connect } from 'node:net';
import { Kind, parse, isListType, getNullableType, isObjectType, isInputObjectType, buildASTSchema } from 'graphql';
import { beforeAll, describe, expect, it } from 'vitest';
import { createLimiter, requestLimitsOf } from '../../../gateway/security/limits.js';
import { loadConfig } from '../../../gateway/config.js';
import { readCheckedInSupergraph } from '../../../schema/supergraph-file.js';
import { subgraphs } from '../../../subgraphs/registry.js';
import { gql, rest } from '../../support/http.js';
import { takesList } from '../../support/rest-equivalence.js';
import { startTestServer } from '../../support/server.js';
import { Collector, wsClient } from '../../support/ws.js';

/** A document of `n` copies of `unit` inside `{ ... }`. */
const repeated = (unit: string, n: number) => `{ ${unit.repeat(n)} }`;

describe('request limits', () => {
  let url: string;

  beforeAll(async () => {
    const server = await startTestServer({ env: { WS_MAX_SUBSCRIPTIONS: '2' } });
    url = server.url;
  });

  const refusals: [string, string, Record<string, unknown>, string, number][] = [
    ['tokens', repeated('machines { id } ', 400), {}, 'TOKEN_LIMIT_EXCEEDED', 1000],
    ['aliases', `{ ${Array.from({ length: 16 }, (_, i) => `a${i}: fleetSummary { available }`).join(' ')} }`, {}, 'ALIAS_LIMIT_EXCEEDED', 15],
    ['root fields', repeated('fleetSummary { available } ', 21), {}, 'ROOT_FIELD_LIMIT_EXCEEDED', 20],
    ['fields', `{ machines { ${'id '.repeat(250)} } }`, {}, 'FIELD_LIMIT_EXCEEDED', 200],
    ['directives', `{ machines { id ${'@include(if: true) '.repeat(51)} } }`, {}, 'DIRECTIVE_LIMIT_EXCEEDED', 50],
    [
      'cost',
      `{ ${Array.from({ length: 6 }, (_, i) => `b${i}: bookings(first: 100) { edges { node { machines { depot { id } } } } }`).join(' ')} }`,
      {},
      'COST_LIMIT_EXCEEDED',
      5000,
    ],
    [
      'list items',
      'query ($inputs: [DwellInput!]!) { predictDwellBatch(inputs: $inputs) { q50Minutes } }',
      // Items that are not even valid inputs: the list is refused before any is coerced or checked.
      { inputs: Array.from({ length: 1001 }, () => ({ not_a_field: 'x'.repeat(10) })) },
      'LIST_LIMIT_EXCEEDED',
      1000,
    ],
  ];

  it.each(refusals)('over HTTP, too many %s is 400 with the limit named', async (_name, query, variables, code, max) => {
    const res = await gql(url, query, variables);
    expect(res.status).toBe(400);
    expect(res.errors?.[0]?.extensions?.['code']).toBe(code);
    expect(res.errors?.[0]?.message).toContain(`limit is ${max}`);
    // An answer is never much larger than its request.
    expect(JSON.stringify(res).length).toBeLessThan(1000);
  });

  it('depth is counted through fragments, and a deep enough document is refused over HTTP', async () => {
    const deep = createLimiter(readCheckedInSupergraph(), { ...requestLimitsOf(loadConfig({})), maxDepth: 4 });
    const query = '{ bookings { edges { ...E } } } fragment E on BookingEdge { node { machines { id } } }';
    const refused = deep.check(query, {});
    expect('error' in refused && refused.error.extensions['code']).toBe('DEPTH_LIMIT_EXCEEDED');
    expect('error' in refused && refused.error.message).toContain('nests 5 levels');
    // The server's default (10) lets that document through.
    const ok = await gql(url, query);
    expect(ok.status).toBe(200);
    expect(ok.errors).toBeUndefined();
  });

  it('a fragment bomb is refused in one linear walk, not expanded', async () => {
    const levels = 40;
    const fragments = Array.from({ length: levels }, (_, i) =>
      i === levels - 1 ? `fragment F${i} on Machine { id }` : `fragment F${i} on Machine { ...F${i + 1} ...F${i + 1} }`,
    ).join(' ');
    const started = performance.now();
    const res = await gql(url, `{ machines { ...F0 } } ${fragments}`);
    expect(res.status).toBe(400);
    expect(res.errors?.[0]?.extensions?.['code']).toBe('FIELD_LIMIT_EXCEEDED');
    expect(res.errors?.[0]?.message).toMatch(/selects [\d,]+ fields/);
    expect(performance.now() - started).toBeLessThan(5000);
  });

  it('a batch at its maximum is accepted and costs what it declares', async () => {
    const limiter = createLimiter(readCheckedInSupergraph(), requestLimitsOf(loadConfig({})));
    const query = 'query ($inputs: [TravelInput!]!) { predictTravelTimeBatch(inputs: $inputs) { q50Minutes } }';
    expect('document' in limiter.check(query, { inputs: Array.from({ length: 1000 }, () => ({})) })).toBe(true);
    const over = limiter.check(query, { inputs: Array.from({ length: 1001 }, () => ({})) });
    expect('error' in over && over.error.message).toBe("predictTravelTimeBatch(inputs:) has 1,001 items; the limit is 1000 (the argument's @maxItems)");
  });

  it('a verdict is kept per document, operation name and variables: the same request gets the same one, other variables their own', () => {
    const limiter = createLimiter(readCheckedInSupergraph(), requestLimitsOf(loadConfig({})));
    const query = 'query Page($first: Int!) { bookings(first: $first) { edges { node { machines { depot { id } } } } } }';
    const small = limiter.check(query, { first: 10 }, 'Page');
    expect('document' in small).toBe(true);
    expect(limiter.check(query, { first: 10 }, 'Page')).toBe(small);
    // The same document whose slicing argument makes it cost more than the limit allows.
    const costly =
      `{ ${Array.from({ length: 6 }, (_, i) => `b${i}: bookings(first: $first) { edges { node { machines { depot { id } } } } }`).join(' ')} }`.replace(
        '{',
        'query Many($first: Int!) {',
      );
    expect('document' in limiter.check(costly, { first: 1 }, 'Many')).toBe(true);
    const over = limiter.check(costly, { first: 100 }, 'Many');
    expect('error' in over && over.error.extensions['code']).toBe('COST_LIMIT_EXCEEDED');
    expect(limiter.check(costly, { first: 100 }, 'Many')).toBe(over);
    expect('document' in limiter.check(costly, { first: 1 }, 'Many')).toBe(true);
    // Verdicts of one text share its one parse, whatever the variables (mutations carry new ids every time).
    const other = limiter.check(query, { first: 11 }, 'Page');
    expect(other).not.toBe(small);
    if (!('document' in other) || !('document' in small)) throw new Error('both requests are within the limits');
    expect(other.document).toBe(small.document);
  });

  it('GET /graphql is held to the same limits', async () => {
    const query = `{ machines { ${'id '.repeat(250)} } }`;
    const res = await fetch(`${url}/graphql?query=${encodeURIComponent(query)}`, { headers: { accept: 'application/json' } });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { errors: { extensions: { code: string } }[] };
    expect(body.errors[0]?.extensions.code).toBe('FIELD_LIMIT_EXCEEDED');
  });

  it('over WebSocket, a refused document is an error for that operation and the connection lives on', async () => {
    const ws = wsClient(url);
    try {
      const refused = new Collector(ws.client, `subscription { fleetSummaryChanged { ${'available '.repeat(250)} } }`);
      await refused.until((c) => c.error !== undefined, 10_000, 'the refusal');
      expect((refused.error as { extensions?: { code?: string } }[])[0]?.extensions?.code).toBe('FIELD_LIMIT_EXCEEDED');
      const tokens = new Collector(ws.client, repeated('machines { id } ', 400));
      await tokens.until((c) => c.error !== undefined, 10_000, 'the token refusal');
      expect((tokens.error as { extensions?: { code?: string } }[])[0]?.extensions?.code).toBe('TOKEN_LIMIT_EXCEEDED');
      const fine = new Collector(ws.client, '{ fleetSummary { total } }');
      await fine.until((c) => c.completed, 10_000, 'a query over the same socket');
      expect(fine.data[0]).toEqual({ fleetSummary: { total: 15 } });
    } finally {
      await ws.dispose();
    }
  });

  it('subscriptions per connection are capped; the extra one is refused, the connection kept', async () => {
    const ws = wsClient(url);
    try {
      const a = new Collector(ws.client, 'subscription { fleetSummaryChanged { total } }');
      const b = new Collector(ws.client, 'subscription { machineStatusChanged { machine { id } } }');
      const c = new Collector(ws.client, 'subscription { fleetSummaryChanged { available } }');
      await c.until((x) => x.error !== undefined, 10_000, 'the refusal of the third');
      const error = (c.error as { message: string; extensions?: { code?: string; limit?: { max: number } } }[])[0];
      expect(error?.extensions?.code).toBe('SUBSCRIPTION_LIMIT_EXCEEDED');
      expect(error?.extensions?.limit?.max).toBe(2);
      expect(error?.message).toContain('WS_MAX_SUBSCRIPTIONS');
      expect(JSON.stringify(a.error ?? null)).toBe('null');
      expect(JSON.stringify(b.error ?? null)).toBe('null');
      // Completing one frees its place.
      a.unsubscribe();
      const d = new Collector(ws.client, '{ fleetSummary { total } }');
      await d.until((x) => x.completed || x.error !== undefined, 10_000, 'a fresh operation');
      expect(d.error).toBeUndefined();
      expect(d.data[0]).toEqual({ fleetSummary: { total: 15 } });
    } finally {
      await ws.dispose();
    }
  });

  it('a resume cursor beyond the newest event, or beyond int8, is BAD_USER_INPUT', async () => {
    const ws = wsClient(url);
    try {
      for (const after of ['9223372036854775807', '9223372036854775808', '9999999999999999999']) {
        const c = new Collector(ws.client, `subscription { fleetSummaryChanged(after: "${after}") { total } }`);
        await c.until((x) => x.results.length > 0 || x.error !== undefined, 10_000, `the refusal of ${after}`);
        const errors = c.results[0]?.errors ?? (c.error as { extensions?: Record<string, unknown>; message: string }[]);
        expect(errors[0]?.extensions?.['code']).toBe('BAD_USER_INPUT');
        expect(errors[0]?.message).toMatch(/beyond the newest event|up to 9223372036854775807/);
      }
    } finally {
      await ws.dispose();
    }
  });
});

describe('connection timeouts', () => {
  let url: string;

  beforeAll(async () => {
    // Small timeouts, on a server of their own: nothing else here may be slow enough to meet them.
    const server = await startTestServer({ env: { HTTP_HEADERS_TIMEOUT_MS: '300', HTTP_REQUEST_TIMEOUT_MS: '600' } });
    url = server.url;
  });

  /** Sends raw bytes on a fresh socket and resolves with everything the server wrote before closing. */
  const raw = (chunks: string) =>
    new Promise<string>((resolve, reject) => {
      const { hostname, port } = new URL(url);
      const socket = connect(Number(port), hostname, () => socket.write(chunks));
      let answer = '';
      socket.on('data', (d) => (answer += d.toString()));
      socket.on('close', () => resolve(answer));
      socket.on('error', reject);
      setTimeout(() => socket.destroy(new Error(`no answer; got ${answer}`)), 15_000).unref();
    });

  it('a body that stalls is answered 408 after HTTP_REQUEST_TIMEOUT_MS and the socket closed', async () => {
    const answer = await raw('POST /rental/pricing/quote HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"machine');
    expect(answer).toMatch(/^HTTP\/1\.1 408/);
    expect(answer).toContain('"code":"REQUEST_TIMEOUT"');
  });

  it('headers that stall are answered 408 after HTTP_HEADERS_TIMEOUT_MS', async () => {
    const answer = await raw('GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ');
    expect(answer).toMatch(/^HTTP\/1\.1 408/);
  });
});

describe('declared sizes and costs', () => {
  const schema = buildASTSchema(parse(readCheckedInSupergraph()), { assumeValidSDL: true });
  const internal = (name: string) => name.startsWith('__') || name.startsWith('join__') || name.startsWith('link__');

  it('every list field of the supergraph declares its size, and every list argument or input field its maximum', () => {
    const undeclared: string[] = [];
    for (const type of Object.values(schema.getTypeMap())) {
      if (internal(type.name)) continue;
      if (isObjectType(type)) {
        for (const field of Object.values(type.getFields())) {
          const directives = field.astNode?.directives?.map((d) => d.name.value) ?? [];
          if (
            isListType(getNullableType(field.type)) &&
            !directives.includes('listSize') &&
            !field.args.some((a) => a.astNode?.directives?.some((d) => d.name.value === 'maxItems'))
          ) {
            undeclared.push(`${type.name}.${field.name}: list without @listSize`);
          }
          for (const arg of field.args) {
            if (isListType(getNullableType(arg.type)) && !arg.astNode?.directives?.some((d) => d.name.value === 'maxItems')) {
              undeclared.push(`${type.name}.${field.name}(${arg.name}:) without @maxItems`);
            }
          }
        }
      }
      if (isInputObjectType(type)) {
        for (const field of Object.values(type.getFields())) {
          if (isListType(getNullableType(field.type)) && !field.astNode?.directives?.some((d) => d.name.value === 'maxItems')) {
            undeclared.push(`${type.name}.${field.name} without @maxItems`);
          }
        }
      }
    }
    expect(undeclared).toEqual([]);
  });

  it("every REST route's operation is within the default document limits, cost included where no body sizes it", () => {
    // A REST path is a second door to its operation: a GraphQL client asking the same must not be refused.
    // Routes whose size comes from their body (batches, entity rows, path lists) are bounded by their own
    // rules (zod, BODY_LIMIT_BYTES) and do not pass the GraphQL limiter; their cost is left out, the shape
    // limits still hold. Every other route is judged with the cost limit too, its pages at their largest.
    const limits = requestLimitsOf(loadConfig({}));
    const costed = createLimiter(readCheckedInSupergraph(), limits);
    const uncosted = createLimiter(readCheckedInSupergraph(), { ...limits, maxCost: Number.POSITIVE_INFINITY });
    let judgedWithCost = 0;
    for (const module of subgraphs) {
      for (const route of module.routes) {
        // Batch routes at their largest: every list variable at 1,000 items; pages at 100.
        const variables: Record<string, unknown> = {};
        for (const definition of parse(route.operation).definitions) {
          if (definition.kind !== Kind.OPERATION_DEFINITION) continue;
          for (const v of definition.variableDefinitions ?? []) {
            if (v.type.kind === Kind.NON_NULL_TYPE && v.type.type.kind === Kind.LIST_TYPE)
              variables[v.variable.name.value] = Array.from({ length: 1000 }, () => ({}));
            if (v.variable.name.value === 'first') variables['first'] = 100;
          }
        }
        const bodySized = takesList(route.body);
        if (!bodySized) judgedWithCost++;
        const checked = (bodySized ? uncosted : costed).check(route.operation, variables);
        expect('error' in checked ? `${module.name} ${route.method} ${route.path}: ${checked.error.message}` : 'ok').toBe('ok');
      }
    }
    expect(judgedWithCost).toBeGreaterThan(30);
  });
});

describe('refusals run nothing and stay small', () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  beforeAll(async () => {
    server = await startTestServer();
  });

  it('a refused document reaches no subgraph', async () => {
    const before = await rest(server.url, 'GET', '/rental/fleet/summary');
    const input = 'input: { machineIds: ["EQ-001"], locationId: "LOC-001", startTime: "2030-01-01T08:00:00Z", durationHours: 8 }';
    const res = await gql(server.url, `mutation { createQuote(${input}) { id machines { ${'id '.repeat(200)} } } }`);
    expect(res.status).toBe(400);
    expect(res.errors?.[0]?.extensions?.['code']).toBe('FIELD_LIMIT_EXCEEDED');
    const after = await rest(server.url, 'GET', '/rental/fleet/summary');
    expect(after.body).toEqual(before.body);
  });

  it('a document with a hundred mistakes lists 25 and counts the rest', async () => {
    const query = `{ machines { ${Array.from({ length: 100 }, (_, i) => `nope${i}`).join(' ')} } }`;
    const res = await gql(server.url, query);
    expect(res.status).toBe(400);
    expect(res.errors).toHaveLength(26);
    expect(res.errors?.[25]?.message).toBe('75 more errors not listed');
    expect(res.errors?.[25]?.extensions).toEqual({ code: 'GRAPHQL_VALIDATION_FAILED', omitted: 75 });
    // Bounded whatever the document: 25 short errors and a count.
    expect(JSON.stringify(res).length).toBeLessThan(8_000);
  });
});
