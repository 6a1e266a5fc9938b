import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import Fastify from 'fastify';
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { openApiPath } from '../gateway/openapi.js';
import { registerRestRoutes } from '../gateway/rest-engine.js';
import { defineRoute } from '../platform/rest.js';
import { subgraphs } from '../subgraphs/registry.js';
import { hoursFromNow, rest } from './support/http.js';
import { startTestServer, type TestServer } from './support/server.js';

type Doc = {
  openapi: string;
  paths: Record<string, Record<string, { operationId: string; security?: unknown[]; responses: Record<string, { content?: Record<string, { schema: object }> }> }>>;
  components: { schemas: Record<string, object> };
};

describe('the OpenAPI document of the REST façade', () => {
  let server: TestServer;
  let doc: Doc;
  beforeAll(async () => {
    server = await startTestServer();
    const res = await rest<Doc>(server.url, 'GET', '/openapi.json');
    expect(res.status).toBe(200);
    doc = res.body;
  });

  it('is a valid OpenAPI 3.1 document', async () => {
    expect(doc.openapi).toBe('3.1.0');
    const result = await new Validator().validate(doc as unknown as Record<string, unknown>);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it('holds every route of every subgraph, each with a documented answer, and nothing the server does not serve', () => {
    const documented = new Set<string>();
    for (const [path, operations] of Object.entries(doc.paths)) for (const method of Object.keys(operations)) documented.add(`${method.toUpperCase()} ${path}`);
    const served = new Set<string>();
    for (const module of subgraphs) {
      for (const route of module.routes) {
        const key = `${route.method} ${openApiPath(module.restPrefix + route.path)}`;
        served.add(key);
        expect(route.response, `${key} declares no response schema`).toBeDefined();
        expect(server.app.hasRoute({ method: route.method, url: module.restPrefix + route.path }), key).toBe(true);
      }
    }
    expect([...documented].sort()).toEqual([...served].sort());
    expect(served.size).toBeGreaterThanOrEqual(40);
    // The signing keys stay public when keys are configured.
    expect(doc.paths['/rental/pricing/keys']?.['get']?.security).toEqual([]);
  });

  it('documents problem details under every error status, SERVICE_UNAVAILABLE with Retry-After', () => {
    for (const [path, operations] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        const statuses = Object.keys(operation.responses);
        expect(statuses, `${method} ${path}`).toContain('200');
        expect(statuses, `${method} ${path}`).toContain('503');
        for (const status of statuses.filter((s) => s !== '200')) {
          expect(operation.responses[status]?.content?.['application/problem+json'], `${method} ${path} ${status}`).toBeDefined();
        }
      }
    }
  });

  it('describes the answers the server really gives (checked with a JSON Schema validator, not zod)', async () => {
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    ajv.addFormat('date-time', true).addFormat('email', true).addFormat('uri', true).addFormat('uuid', true);
    ajv.addSchema({ $id: 'doc', components: doc.components } as object);
    const check = (method: string, path: string, status: string, body: unknown, type = 'application/json') => {
      const schema = doc.paths[path]?.[method]?.responses[status]?.content?.[type]?.schema;
      expect(schema, `${method} ${path} ${status} ${type}`).toBeDefined();
      const validate = ajv.compile(JSON.parse(JSON.stringify(schema).replaceAll('"#/components/', '"doc#/components/')) as object);
      const valid = validate(body);
      expect(validate.errors ?? [], `${method} ${path} ${status}`).toEqual([]);
      expect(valid).toBe(true);
    };

    // Every path that takes no input, as served.
    let checked = 0;
    for (const module of subgraphs) {
      for (const route of module.routes.filter((r) => r.method === 'GET' && !r.params && !r.query)) {
        const path = module.restPrefix + route.path;
        const res = await rest(server.url, 'GET', path);
        // A path that names the latest of something answers 404 while there is none yet.
        expect([200, 404], path).toContain(res.status);
        check('get', path, String(res.status), res.body, res.status === 200 ? 'application/json' : 'application/problem+json');
        checked++;
      }
    }
    expect(checked).toBeGreaterThanOrEqual(5);

    // A quote, a booking, its tracking and its completion; an error of each kind a partner meets.
    const quote = await rest(server.url, 'POST', '/rental/pricing/quote', { machine_ids: ['EQ-004'], location_id: 'LOC-002', start_time: hoursFromNow(30), duration_hours: 6 });
    expect(quote.status).toBe(200);
    check('post', '/rental/pricing/quote', '200', quote.body);
    const booking = await rest(server.url, 'POST', '/rental/booking/confirm', { quote_id: quote.body['quote_id'], customer_name: 'Contract test' });
    expect(booking.status).toBe(200);
    check('post', '/rental/booking/confirm', '200', booking.body);
    const id = String(booking.body['booking_id']);
    const track = await rest(server.url, 'GET', `/rental/booking/${id}/track`);
    check('get', '/rental/booking/{booking_id}/track', '200', track.body);
    const done = await rest(server.url, 'POST', `/rental/booking/${id}/complete`);
    check('post', '/rental/booking/{booking_id}/complete', '200', done.body);
    const again = await rest(server.url, 'POST', `/rental/booking/${id}/complete`);
    expect(again.status).toBe(409);
    check('post', '/rental/booking/{booking_id}/complete', '409', again.body, 'application/problem+json');
    const bad = await rest(server.url, 'POST', '/rental/pricing/quote', { machine_ids: [], location_id: 'nowhere' });
    expect(bad.status).toBe(400);
    check('post', '/rental/pricing/quote', '400', bad.body, 'application/problem+json');
    const page = await rest(server.url, 'GET', '/rental/bookings?limit=5');
    check('get', '/rental/bookings', '200', page.body);
  });

  it('serves a reference page that loads nothing from elsewhere', async () => {
    const page = await fetch(`${server.url}/docs`);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(html).toContain('spec-url="/openapi.json"');
    expect(html).not.toMatch(/https?:\/\//);
    const script = await fetch(`${server.url}/docs/rapidoc-min.js`);
    expect(script.status).toBe(200);
    expect(script.headers.get('content-type')).toContain('javascript');
    expect((await script.arrayBuffer()).byteLength).toBeGreaterThan(100_000);
  });
});

describe('answers outside their documented schema', () => {
  it('are a fault of the server (500, logged), so a drift between code and contract fails the suite', async () => {
    const app = Fastify({ logger: false });
    const route = defineRoute<undefined, undefined, undefined, { n: number }>({
      method: 'GET',
      path: '/drift',
      summary: 'An answer that strays from its schema',
      operation: '{ n }',
      variables: () => ({}),
      result: (d) => ({ count: String(d.n) }),
      response: z.strictObject({ count: z.number() }),
    });
    registerRestRoutes(app, '/t', [route], async () => ({ data: { n: 3 } }), { checkAnswers: true });
    const res = await app.inject({ method: 'GET', url: '/t/drift' });
    expect(res.statusCode).toBe(500);
    const unchecked = Fastify({ logger: false });
    registerRestRoutes(unchecked, '/t', [route], async () => ({ data: { n: 3 } }), { checkAnswers: false });
    expect((await unchecked.inject({ method: 'GET', url: '/t/drift' })).json()).toEqual({ count: '3' });
  });
});
