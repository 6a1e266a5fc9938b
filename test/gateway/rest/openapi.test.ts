import { parse } from 'graphql';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import Fastify, { type FastifyInstance } from 'fastify';
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { openApiPath } from '../../../gateway/rest/openapi.js';
import { registerRestRoutes } from '../../../gateway/rest/engine.js';
import { createPipeline, graphqlValidation } from '../../../gateway/pipeline/pipeline.js';
import { DEMO_PRINCIPAL } from '../../../platform/principal.js';
import { defineRoute } from '../../../platform/rest.js';
import { subgraphs } from '../../../subgraphs/registry.js';
import { gql, hoursFromNow, rest } from '../../support/http.js';
import { dwellFeatures, travelFeatures } from '../../support/prediction.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import { until, waitFor } from '../../support/wait.js';

type Doc = {
  openapi: string;
  paths: Record<
    string,
    Record<
      string,
      {
        operationId: string;
        security?: unknown[];
        parameters?: { name: string; in: string; required?: boolean }[];
        responses: Record<string, { content?: Record<string, { schema: object }> }>;
      }
    >
  >;
  components: { schemas: Record<string, object> };
};

describe('the OpenAPI document of the REST façade', () => {
  let server: TestServer;
  let doc: Doc;
  /** Checks an answer against the document's schema for it, with a JSON Schema validator (not zod). */
  let check: (method: string, path: string, status: string, body: unknown, type?: string) => void;
  beforeAll(async () => {
    server = await startTestServer();
    const res = await rest<Doc>(server.url, 'GET', '/openapi.json');
    expect(res.status).toBe(200);
    doc = res.body;
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    // Instants as the document's description promises them (UTC, milliseconds), not any date-time.
    ajv.addFormat('date-time', /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    ajv.addFormat('uuid', /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    ajv.addFormat('email', true).addFormat('uri', true);
    ajv.addSchema({ $id: 'doc', components: doc.components });
    check = (method, path, status, body, type = 'application/json') => {
      const schema = doc.paths[path]?.[method]?.responses[status]?.content?.[type]?.schema;
      expect(schema, `${method} ${path} ${status} ${type}`).toBeDefined();
      const validate = ajv.compile(JSON.parse(JSON.stringify(schema).replaceAll('"#/components/', '"doc#/components/')) as object);
      const valid = validate(body);
      expect(validate.errors ?? [], `${method} ${path} ${status}`).toEqual([]);
      expect(valid).toBe(true);
    };
  });

  it('is made after the server listens, off the start (gateway/http/warm-up.ts); /health says when, and the document is the one served', async () => {
    const warmUp = await waitFor(async () => {
      const health = await rest<{ warm_up?: { done: boolean; pending: string[]; ms: number | null } }>(server.url, 'GET', '/health');
      return health.body.warm_up?.done ? health.body.warm_up : null;
    }, 'the warm-up to be done');
    expect(warmUp.pending).toEqual([]);
    expect(warmUp.ms).toBeGreaterThanOrEqual(0);
    expect((await rest<Doc>(server.url, 'GET', '/openapi.json')).body).toEqual(doc);
  });

  it('is a valid OpenAPI 3.1 document', async () => {
    expect(doc.openapi).toBe('3.1.0');
    const result = await new Validator().validate(doc);
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
    // Every other path names the scopes its operation needs, on either scheme, and may answer 403.
    expect(doc.paths['/rental/pricing/quote']?.['post']?.security).toEqual([{ apiKey: ['rental:book'] }, { bearer: ['rental:book'] }]);
    expect(doc.paths['/rental/fleet/summary']?.['get']?.security).toEqual([{ apiKey: ['fleet:read'] }, { bearer: ['fleet:read'] }]);
    for (const [path, operations] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        if (path === '/rental/pricing/keys') continue;
        expect(operation.security?.length, `${method} ${path}`).toBe(2);
      }
    }
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
    const quote = await rest(server.url, 'POST', '/rental/pricing/quote', {
      machine_ids: ['EQ-004'],
      location_id: 'LOC-002',
      start_time: hoursFromNow(30),
      duration_hours: 6,
    });
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
    expect(doc.paths['/rental/booking/confirm']?.['post']?.parameters).toContainEqual(
      expect.objectContaining({ name: 'Idempotency-Key', in: 'header', required: false }),
    );
  });

  it('describes the prediction answers: a forecast, a batch, a cold-chain margin, an input error', async () => {
    const dwell = await rest(server.url, 'POST', '/prediction/predict/dwell_advanced', dwellFeatures);
    expect(dwell.status).toBe(200);
    check('post', '/prediction/predict/dwell_advanced', '200', dwell.body);
    const batch = await rest(server.url, 'POST', '/prediction/predict/travel_time/batch', { instances: [travelFeatures, travelFeatures] });
    expect(batch.status).toBe(200);
    check('post', '/prediction/predict/travel_time/batch', '200', batch.body);
    const margin = await rest(server.url, 'POST', '/prediction/predict/cold_chain_margin', {
      dwell: dwellFeatures,
      travel: travelFeatures,
      ischaemic_remaining_min: dwellFeatures.ischaemic_remaining_min,
    });
    expect(margin.status).toBe(200);
    check('post', '/prediction/predict/cold_chain_margin', '200', margin.body);
    const bad = await rest(server.url, 'POST', '/prediction/predict/travel_time', { ...travelFeatures, traffic: 7 });
    expect(bad.status).toBe(400);
    check('post', '/prediction/predict/travel_time', '400', bad.body, 'application/problem+json');
  });

  it('describes the bonding answers: a session started, its state, a key, a recommendation, an unknown session', async () => {
    const started = await rest(server.url, 'POST', '/bonding/api/bonding/start?user_id=contract-test&seed=7');
    expect(started.status).toBe(200);
    check('post', '/bonding/api/bonding/start', '200', started.body);
    const id = String(started.body['session_id']);
    const key = await rest(server.url, 'POST', '/bonding/api/qkd/generate', { session_id: id, bits: 256, seed: 7 });
    expect(key.status).toBe(200);
    check('post', '/bonding/api/qkd/generate', '200', key.body);
    const status = await rest(server.url, 'GET', `/bonding/api/bonding/status?session_id=${id}`);
    expect(status.status).toBe(200);
    expect(status.body['last_key']).not.toBeNull();
    check('get', '/bonding/api/bonding/status', '200', status.body);
    const optimized = await rest(server.url, 'POST', '/bonding/api/quantum/optimize', {
      paths: [
        { id: 'fiber-a', kind: 'fiber', latency_ms: 8, loss_pct: 0.01, capacity_mbps: 1000, shared_risk: ['conduit:main-st'] },
        { id: 'lte-a', kind: 'lte', latency_ms: 45, loss_pct: 0.5, capacity_mbps: 60 },
        { id: 'dsl-a', kind: 'dsl', latency_ms: 20, loss_pct: 0.1, capacity_mbps: 80, up: false },
      ],
      constraints: { max_latency_ms: 100 },
    });
    expect(optimized.status).toBe(200);
    check('post', '/bonding/api/quantum/optimize', '200', optimized.body);
    const closed = await rest(server.url, 'POST', `/bonding/api/bonding/close?session_id=${id}`);
    check('post', '/bonding/api/bonding/close', '200', closed.body);
    const unknown = await rest(server.url, 'GET', '/bonding/api/bonding/status?session_id=BS-000000000000');
    expect(unknown.status).toBe(404);
    check('get', '/bonding/api/bonding/status', '404', unknown.body, 'application/problem+json');
  });

  it('describes the features answers: a materialization, online lookups, a training frame in JSON and CSV', async () => {
    const materialized = await rest(server.url, 'POST', '/features/offline', {});
    expect(materialized.status).toBe(200);
    check('post', '/features/offline', '200', materialized.body);
    const policy = await rest(server.url, 'GET', '/features/online/policy/P-000001');
    expect(policy.status).toBe(200);
    check('get', '/features/online/policy/{policy_id}', '200', policy.body);
    const claim = await rest(server.url, 'GET', '/features/online/claim/C-000001');
    expect(claim.status).toBe(200);
    check('get', '/features/online/claim/{claim_id}', '200', claim.body);
    // The frame is written as a stream, which the per-answer check does not see: this is its check.
    const entities = [
      { policy_id: 'P-000001', event_timestamp: '2023-06-01T00:00:00Z', label: 1 },
      { claim_id: 'C-000001', event_timestamp: '2025-06-01T12:00:00+02:00' },
    ];
    const frame = await rest(server.url, 'POST', '/features/pit-training', { entities, engine: 'both' });
    expect(frame.status).toBe(200);
    expect(frame.body['comparison']).not.toBeNull();
    check('post', '/features/pit-training', '200', frame.body);
    const csv = await fetch(`${server.url}/features/pit-training`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/csv' },
      body: JSON.stringify({ entities }),
    });
    expect(csv.status).toBe(200);
    expect(csv.headers.get('content-type')).toContain('text/csv');
    check('post', '/features/pit-training', '200', await csv.text(), 'text/csv');
    const audit = await rest(server.url, 'POST', '/features/leakage-audit', { label_set: 'fraud' });
    expect(audit.status).toBe(200);
    check('post', '/features/leakage-audit', '200', audit.body);
  });

  it('describes the optimization answers: a completed run, the run list, the latest refined result, a proof', async () => {
    const started = await gql(server.url, 'mutation($input: StartQuantumRunInput!) { startQuantumRun(input: $input) { id } }', {
      input: { problem: 'REGULAR3_MAXCUT', size: 6, depth: 1, shots: 64, maxEvaluations: 5, refineTop: 2 },
    });
    expect(started.errors).toBeUndefined();
    const id = String(started.data!['startQuantumRun']['id']);
    let run: Record<string, unknown> = {};
    await until(async () => {
      run = (await rest(server.url, 'GET', `/optimization/quantum/runs/${id}`)).body;
      return run['status'] !== 'running';
    }, `run ${id} to end`);
    expect(run['status']).toBe('completed');
    check('get', '/optimization/quantum/runs/{run_id}', '200', run);
    const runs = await rest(server.url, 'GET', '/optimization/quantum/runs?limit=5');
    check('get', '/optimization/quantum/runs', '200', runs.body);
    const latest = await rest(server.url, 'GET', '/optimization/quantum/latest/refined');
    expect(latest.status).toBe(200);
    check('get', '/optimization/quantum/latest/refined', '200', latest.body);
    const overview = await rest(server.url, 'GET', '/optimization/overview');
    expect(overview.body['quantum']['latest_refined']).not.toBeNull();
    check('get', '/optimization/overview', '200', overview.body);
    const verify = await rest(server.url, 'GET', '/optimization/verify?min_separation_m=300');
    expect(verify.status).toBe(200);
    check('get', '/optimization/verify', '200', verify.body);
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
    const app = actingAsDemo(Fastify({ logger: false }));
    const route = defineRoute<undefined, undefined, undefined, { n: number }>({
      method: 'GET',
      path: '/drift',
      summary: 'An answer that strays from its schema',
      operation: '{ n }',
      variables: () => ({}),
      result: (d) => ({ count: String(d.n) }),
      response: z.strictObject({ count: z.number() }),
    });
    registerRestRoutes(app, '/t', [route], async () => ({ data: { n: 3 } }), { pipeline: parsingPipeline(), checkAnswers: true });
    const res = await app.inject({ method: 'GET', url: '/t/drift' });
    expect(res.statusCode).toBe(500);
    const unchecked = actingAsDemo(Fastify({ logger: false }));
    registerRestRoutes(unchecked, '/t', [route], async () => ({ data: { n: 3 } }), { pipeline: parsingPipeline(), checkAnswers: false });
    expect((await unchecked.inject({ method: 'GET', url: '/t/drift' })).json()).toEqual({ count: '3' });
  });
});

/** A pipeline whose intake only parses (this suite's operation `{ n }` is no field of the supergraph). */
function parsingPipeline() {
  const notApplied = { notApplied: 'a bare app of this suite' };
  return createPipeline(
    {
      documents: notApplied,
      limits: { check: (query) => ({ document: parse(query) }) },
      validation: graphqlValidation(),
      authorization: {},
      rate: notApplied,
      audit: notApplied,
      usage: notApplied,
    },
    [],
  );
}

/** A bare fastify app whose requests act for the demo principal, as the gateway's authentication would make them. */
function actingAsDemo(app: FastifyInstance): FastifyInstance {
  app.decorateRequest('principal', null);
  app.addHook('onRequest', async (request) => {
    request.principal = DEMO_PRINCIPAL;
  });
  return app;
}
