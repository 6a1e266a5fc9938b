import { GraphQLError } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { statusOf, isErrorCode } from '../../../platform/errors.js';
import type { RestRoute } from '../../../platform/rest.js';
import { subgraphs } from '../../../subgraphs/registry.js';
import { dwellFeatures, lockerFeatures, travelFeatures } from '../../support/prediction.js';
import { startTestServer } from '../../support/server.js';
import { differingPaths, FrozenClock, mask, routeOptionals, setPath, withoutPaths, withoutVariables, type Json } from '../../support/rest-equivalence.js';
import { until } from '../../support/wait.js';

/*
 * A REST path is a second door to a GraphQL operation: for the same request it must give the same answer as
 * that operation asked by a GraphQL client. For every route of every subgraph, each optional parameter (of
 * the body, the query and the headers, nested ones too) is sent omitted and given; the GraphQL side is the
 * operation the route runs, written as a client writes it: an omitted optional is left out of the request
 * (its variable undeclared, its argument or input field absent), so the schema's defaults apply, never a
 * null the REST mapping chose. REST goes to one server and GraphQL to a twin (same seeds, one frozen clock,
 * the same history), so mutations can be compared too; only fields that differ by nature (random ids,
 * measured milliseconds) are masked. A route, or an optional parameter, without a case here fails the test.
 */

type Input = { params?: Record<string, string>; query?: Record<string, string>; body?: Json; headers?: Record<string, string> };

interface Side {
  label: 'REST' | 'GraphQL';
  url: string;
  /** A GraphQL call for setting up the side's state (same on both sides); fails on errors. */
  run(query: string, variables?: Record<string, unknown>): Promise<Record<string, any>>;
}

type Value = Json | ((side: Side) => Json | Promise<Json>);
interface Given {
  value: Value;
  without?: string[];
  with?: Record<string, Json>;
}

interface RouteCase {
  /** The request with its required parameters (optional ones may be present: their omitted variant removes them). */
  base(side: Side): Input | Promise<Input>;
  /**
   * A value for each optional parameter; `without` drops other parameters of the base when this one is given,
   * and `with` sets others it needs (a label set's time window needs the label set).
   */
  given: Record<string, Value | Given>;
  /** Fields that differ between the twins for this request (random ids, measured times). */
  volatile?: (input: Input) => string[];
}

const START = Date.UTC(2026, 10, 25, 6, 0, 0);
const clock = new FrozenClock(START);
const startIn = (hours: number) => new Date(clock.now().getTime() + hours * 3_600_000).toISOString();

const once = <T>(make: (side: Side) => Promise<T>) => {
  const made = new Map<Side, Promise<T>>();
  return (side: Side) => {
    let p = made.get(side);
    if (!p) made.set(side, (p = make(side)));
    return p;
  };
};

let machine = 0;
/** A machine never quoted before on either side (the twins quote the same machines in the same order). */
const machineFor = new Map<Side, number>();
const nextMachine = (side: Side) => {
  const n = (machineFor.get(side) ?? 0) + 1;
  machineFor.set(side, n);
  machine = Math.max(machine, n);
  if (n > 15) throw new Error('the demo fleet has 15 machines');
  return `EQ-${String(n).padStart(3, '0')}`;
};
const quoteOn = async (side: Side) =>
  (
    await side.run('mutation($i: CreateQuoteInput!) { createQuote(input: $i) { id } }', {
      i: { machineIds: [nextMachine(side)], locationId: 'LOC-001', startTime: startIn(48), durationHours: 8 },
    })
  )['createQuote'].id as string;
const bookingOn = async (side: Side) =>
  (
    await side.run('mutation($i: ConfirmBookingInput!) { confirmBooking(input: $i) { id } }', {
      i: { quoteId: await quoteOn(side), customerName: 'Fixture BV' },
    })
  )['confirmBooking'].id as string;
const sessionOn = async (side: Side, userId: string, seed: number) =>
  (await side.run('mutation($u: String, $s: Int) { startBondingSession(userId: $u, seed: $s) { id } }', { u: userId, s: seed }))['startBondingSession']
    .id as string;

const aliceSession = once((side) => sessionOn(side, 'alice', 7));
const keySession = once((side) => sessionOn(side, 'carol', 9));
const ledgerBooking = once(bookingOn);
const completedRun = once(async (side) => {
  const started = await side.run('mutation($i: StartQuantumRunInput!) { startQuantumRun(input: $i) { id } }', {
    i: { problem: 'REGULAR3_MAXCUT', size: 8, depth: 1, seed: 3, maxEvaluations: 20 },
  });
  const id = started['startQuantumRun'].id as string;
  await until(
    async () => (await side.run('query($id: ID!) { quantumRun(id: $id) { status } }', { id }))['quantumRun'].status !== 'RUNNING',
    `run ${id} on ${side.label}`,
  );
  return id;
});
const firstPageCursor = (path: string) =>
  once(async (side) => {
    const res = await fetch(`${side.url}${path}?limit=1`);
    const body = (await res.json()) as { next_cursor: string | null };
    if (!body.next_cursor) throw new Error(`${path} has a single page on ${side.label}`);
    return body.next_cursor;
  });

const entity = (id: string, at: string): Json => ({ policy_id: id, event_timestamp: at });
const RUN_VOLATILE = ['id', 'duration_ms', 'result.timings', 'created_at', 'completed_at'];
const REFINED_VOLATILE = ['run.id', 'completed_at'];
const VERIFY_VOLATILE = ['duration_ms', 'solver.queries[].ms'];

const CASES: Record<string, RouteCase> = {
  // rental
  'GET /rental/health': { base: () => ({}), given: {} },
  'GET /rental/fleet/machines': { base: () => ({}), given: {} },
  'GET /rental/fleet/locations': { base: () => ({}), given: {} },
  'GET /rental/fleet/summary': { base: () => ({}), given: {} },
  'GET /rental/pricing/keys': { base: () => ({}), given: {}, volatile: () => ['keys[].kid', 'keys[].x'] },
  'POST /rental/pricing/quote': {
    base: (side) => ({ body: { machine_ids: [nextMachine(side)], location_id: 'LOC-002', start_time: startIn(30), duration_hours: 6 } }),
    given: {},
    volatile: () => ['quote_id', 'signature'],
  },
  'POST /rental/booking/confirm': {
    base: async (side) => ({ body: { quote_id: await quoteOn(side), customer_name: 'Havenbedrijf' } }),
    given: { 'headers.Idempotency-Key': 'equivalence-key-0001' },
    volatile: () => ['booking_id', 'quote_id'],
  },
  'GET /rental/booking/:booking_id/track': {
    base: async (side) => ({ params: { booking_id: await ledgerBooking(side) } }),
    given: {},
    volatile: () => ['booking_id'],
  },
  'POST /rental/booking/:booking_id/complete': {
    base: async (side) => ({ params: { booking_id: await bookingOn(side) } }),
    given: {},
    volatile: () => ['booking_id', 'quote_id'],
  },
  'GET /rental/bookings': {
    base: async (side) => (await ledgerBooking(side), {}),
    given: { 'query.limit': '1', 'query.cursor': firstPageCursor('/rental/bookings') },
    volatile: () => ['bookings[].booking_id', 'bookings[].quote_id', 'next_cursor'],
  },

  // prediction
  'GET /prediction/health': { base: () => ({}), given: {} },
  'POST /prediction/predict/dwell_advanced': { base: () => ({ body: DWELL }), given: {} },
  'POST /prediction/predict/dwell_advanced/batch': {
    base: () => ({ body: { instances: [DWELL, { ...(DWELL as Record<string, Json>), floor_number: 12 }] } }),
    given: {},
  },
  'POST /prediction/predict/travel_time': { base: () => ({ body: TRAVEL }), given: {} },
  'POST /prediction/predict/travel_time/batch': {
    base: () => ({ body: { instances: [TRAVEL, { ...(TRAVEL as Record<string, Json>), distance_km: 150 }] } }),
    given: {},
  },
  'POST /prediction/predict/locker_advanced': { base: () => ({ body: LOCKER }), given: {} },
  'POST /prediction/predict/locker_advanced/batch': { base: () => ({ body: { instances: [LOCKER] } }), given: {} },
  'POST /prediction/predict/cold_chain_margin': { base: () => ({ body: { dwell: DWELL, travel: TRAVEL, ischaemic_remaining_min: 240 } }), given: {} },

  // bonding
  'GET /bonding/health': { base: () => ({}), given: {} },
  'GET /bonding/api/bonding/status': {
    base: async (side) => (await sessionOnce(side), await aliceSession(side), {}),
    given: { 'query.user_id': 'alice', 'query.session_id': async (side) => aliceSession(side) },
    volatile: () => ['session_id', 'recommendation.elapsed_ms'],
  },
  'POST /bonding/api/bonding/start': {
    base: () => ({ query: { seed: '41' } }),
    given: { 'query.user_id': 'dave', 'query.seed': '42' },
    // Without a seed the link model is drawn at random: only what does not come from it compares.
    volatile: (input) => [
      'session_id',
      'recommendation.elapsed_ms',
      ...(input.query?.['seed'] ? [] : ['seed', 'paths', 'recommendation', 'state_reason', 'planes']),
    ],
  },
  'POST /bonding/api/bonding/close': {
    base: async (side) => ({ query: { session_id: await sessionOn(side, 'erin', 3) } }),
    given: {},
    volatile: () => ['session_id', 'recommendation.elapsed_ms'],
  },
  'POST /bonding/api/quantum/optimize': {
    base: (): Input => ({
      body: {
        paths: [
          { id: 'fiber-a', kind: 'fiber', latency_ms: 8, loss_pct: 0.1, capacity_mbps: 900, shared_risk: ['conduit:a'] },
          { id: 'lte-b', kind: 'lte', latency_ms: 45, loss_pct: 0.8, capacity_mbps: 60 },
          { id: 'sat-c', kind: 'satellite', latency_ms: 600, loss_pct: 1.5, capacity_mbps: 150 },
        ] as Json[],
      },
    }),
    given: {
      'body.paths[].kind': 'fiber',
      'body.paths[].jitter_ms': 3,
      'body.paths[].up': true,
      'body.paths[].outage_probability': 0.02,
      'body.paths[].shared_risk': ['weather'],
      'body.constraints': { max_latency_ms: 100 },
      'body.constraints.max_latency_ms': 50,
      'body.constraints.max_jitter_ms': 10,
      'body.constraints.max_loss_pct': 1,
      'body.constraints.min_combined_capacity_mbps': 100,
      'body.risk_groups': [{ id: 'weather', outage_probability: 0.01 }],
    },
    volatile: () => ['elapsed_ms'],
  },
  'POST /bonding/api/qkd/generate': {
    base: async (side) => ({ body: { session_id: await keySession(side), bits: 128, seed: 5 } }),
    given: { 'body.noise': 0.04, 'body.intercept_fraction': 0.1, 'body.seed': 6 },
    // Without a seed the run draws from node:crypto: only its shape compares.
    // The hybrid key binds the session id, which differs between the twins.
    volatile: (input) => [
      'session_id',
      'key_id',
      'elapsed_ms',
      'key',
      'fingerprint',
      ...((input.body as Record<string, Json>)['seed'] === undefined
        ? [
            'status',
            'reason',
            'fingerprint',
            'raw_bits',
            'sifted_bits',
            'sample_bits',
            'qber',
            'qber_upper_bound',
            'errors_corrected',
            'leaked_bits',
            'secure_bits',
            'final_bits',
            'residual_errors',
            'eavesdropper_detected',
            'attempts',
            'key',
          ]
        : []),
    ],
  },

  // features
  'GET /features/health': { base: () => ({}), given: {}, volatile: () => ['uptime_s', 'checks.*.ms'] },
  'GET /features/online/policy/:policy_id': { base: async (side) => (await materialized(side), { params: { policy_id: 'P-000003' } }), given: {} },
  'GET /features/online/claim/:claim_id': { base: async (side) => (await materialized(side), { params: { claim_id: await someClaim(side) } }), given: {} },
  'POST /features/offline': {
    base: () => ({ body: {} }),
    given: { 'body.as_of': '2025-06-01T00:00:00.000Z', 'body.views': ['policy_profile'], 'body.engine': 'typescript' },
    volatile: () => ['milliseconds', 'materialization_id'],
  },
  'POST /features/pit-training': {
    // The second row is ten months after the world's last monthly claims snapshot: the views' TTLs decide
    // whether it is joined (they must apply whenever the caller sets none).
    base: () => ({ body: { entities: [entity('P-000003', '2024-03-01T00:00:00Z'), entity('P-000004', '2026-11-20T00:00:00Z')] } }),
    given: {
      'body.entities': [entity('P-000005', '2025-12-20T00:00:00Z'), entity('P-000006', '2023-07-01T12:00:00Z')],
      'body.entities[].policy_id': 'P-000007',
      'body.entities[].claim_id': async (side) => someClaim(side),
      'body.entities[].machine_id': 'EQ-001',
      'body.entities[].label': 1,
      'body.label_set': { value: 'underwriting', without: ['body.entities'] },
      'body.views': ['policy_profile', 'policy_claims_history'],
      'body.ttl': 'P400D',
      'body.engine': 'both',
      // On the fraud label set the claim reports' late corrections make the two rules differ.
      'body.availability': { value: 'event_time', without: ['body.entities'], with: { 'body.label_set': 'fraud', 'body.limit': 400 } },
      'body.from': { value: '2024-01-01T00:00:00Z', without: ['body.entities'], with: { 'body.label_set': 'fraud' } },
      'body.to': { value: '2025-01-01T00:00:00Z', without: ['body.entities'], with: { 'body.label_set': 'fraud' } },
      'body.limit': { value: 25, without: ['body.entities'], with: { 'body.label_set': 'fraud' } },
      'query.views': 'policy_profile,policy_claims_history',
      'query.engine': 'typescript',
      'query.ttl': 'P400D',
      'query.availability': 'event_time',
    },
    volatile: () => ['runs[].milliseconds'],
  },
  'POST /features/leakage-audit': {
    base: () => ({ body: { label_set: 'fraud' } }),
    given: { 'body.views': ['claim_report', 'claim_settlement'], 'body.test_from': '2025-01-01T00:00:00Z' },
  },
  'GET /features/feature-importance': { base: () => ({}), given: {} },
  'GET /features/views': { base: () => ({}), given: {} },

  // optimization
  'GET /optimization/health': { base: () => ({}), given: {} },
  'GET /optimization/status': { base: () => ({}), given: {} },
  'GET /optimization/overview': {
    base: async (side) => (await completedRun(side), {}),
    given: {},
    volatile: () => [
      ...VERIFY_VOLATILE.map((p) => `verify.${p}`),
      ...['id', 'duration_ms', 'created_at', 'completed_at'].map((p) => `quantum.runs[].${p}`),
      ...REFINED_VOLATILE.map((p) => `quantum.latest_refined.${p}`),
      'quantum.next_cursor',
    ],
  },
  'GET /optimization/verify': { base: () => ({}), given: { 'query.min_separation_m': '900' }, volatile: () => VERIFY_VOLATILE },
  'GET /optimization/fleet': { base: () => ({}), given: {} },
  'GET /optimization/quantum/runs': {
    base: async (side) => (await completedRun(side), await secondRun(side), {}),
    given: { 'query.limit': '1', 'query.cursor': firstPageCursor('/optimization/quantum/runs') },
    volatile: () => [...RUN_VOLATILE.map((p) => `runs[].${p}`), 'next_cursor'],
  },
  'GET /optimization/quantum/runs/:run_id': {
    base: async (side) => ({ params: { run_id: await completedRun(side) } }),
    given: {},
    volatile: () => RUN_VOLATILE,
  },
  'GET /optimization/quantum/latest/refined': { base: async (side) => (await completedRun(side), {}), given: {}, volatile: () => REFINED_VOLATILE },
};

const sessionOnce = once((side) => sessionOn(side, 'sandbox', 11));
const secondRun = once(async (side) => {
  const started = await side.run('mutation($i: StartQuantumRunInput!) { startQuantumRun(input: $i) { id } }', {
    i: { problem: 'REGULAR3_MAXCUT', size: 6, depth: 1, seed: 4, maxEvaluations: 10 },
  });
  const id = started['startQuantumRun'].id as string;
  await until(
    async () => (await side.run('query($id: ID!) { quantumRun(id: $id) { status } }', { id }))['quantumRun'].status !== 'RUNNING',
    `run ${id} on ${side.label}`,
  );
  return id;
});
const materialized = once(async (side) => side.run('mutation { materialize(input: {}) { id } }'));
const someClaim = once(async (side) => {
  const frame = await side.run('query { pitTraining(input: { labelSet: FRAUD, limit: 1 }) { rows { claimId } } }');
  return frame['pitTraining'].rows[0].claimId as string;
});

const DWELL = dwellFeatures as Json;
const TRAVEL = travelFeatures as Json;
const LOCKER = lockerFeatures as Json;

const allRoutes = subgraphs.flatMap((m) => m.routes.map((route) => ({ key: `${route.method} ${m.restPrefix}${route.path}`, prefix: m.restPrefix, route })));

describe('every REST route answers as the GraphQL operation it runs, each optional omitted and given', () => {
  const sides: Side[] = [];
  beforeAll(async () => {
    // The link models and the fleet step on wall-clock timers: slow enough here that neither twin steps.
    const env = { FEATURES_POLICIES: '300', OPTIMIZATION_MAX_CONCURRENT_RUNS: '4', BONDING_TICK_MS: '600000', FLEET_TICK_MS: '3600000' };
    const [a, b] = await Promise.all([startTestServer({ clock, env }), startTestServer({ clock, env })]);
    for (const [label, server] of [
      ['REST', a],
      ['GraphQL', b],
    ] as const) {
      sides.push({
        label,
        url: server.url,
        async run(query, variables = {}) {
          const res = await fetch(`${server.url}/graphql`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ query, variables }),
          });
          const body = (await res.json()) as { data?: Record<string, any>; errors?: unknown[] };
          if (body.errors) throw new Error(`setup on ${label} failed: ${JSON.stringify(body.errors)}`);
          return body.data!;
        },
      });
    }
  });
  afterAll(() => undefined);

  it('has a case for every route and a value for every optional parameter', () => {
    const missing = allRoutes.filter((r) => !CASES[r.key]).map((r) => r.key);
    expect(missing, 'routes without an equivalence case').toEqual([]);
    const stale = Object.keys(CASES).filter((k) => !allRoutes.some((r) => r.key === k));
    expect(stale, 'cases for routes that do not exist').toEqual([]);
    const uncovered = allRoutes.flatMap((r) =>
      routeOptionals(r.route)
        .filter((p) => !(p in CASES[r.key]!.given))
        .map((p) => `${r.key} ${p}`),
    );
    expect(uncovered, 'optional parameters without a value to give').toEqual([]);
    // The walk sees nested optionals: the bonding paths' own and the constraints'.
    expect(routeOptionals(allRoutes.find((r) => r.key === 'POST /bonding/api/quantum/optimize')!.route)).toEqual(
      expect.arrayContaining(['body.paths[].jitter_ms', 'body.constraints', 'body.constraints.max_loss_pct', 'body.risk_groups']),
    );
  });

  for (const { key, prefix, route } of allRoutes) {
    const spec = CASES[key];
    if (!spec) continue;
    it(key, async () => {
      const [restSide, graphqlSide] = sides as [Side, Side];
      const optionals = routeOptionals(route);
      const variants: { name: string; path: string | null }[] = [
        { name: 'as given in the base request', path: null },
        ...optionals.flatMap((path) => [
          { name: `${path} omitted`, path: `-${path}` },
          { name: `${path} given`, path },
        ]),
      ];
      const mismatches: string[] = [];
      for (const variant of variants) {
        const [rest, graphql] = await Promise.all([request(restSide, variant.path), request(graphqlSide, variant.path)]);
        const restAnswer = await askRest(restSide.url, prefix, route, rest.input);
        const graphqlAnswer = await askGraphQL(graphqlSide.url, route, graphql);
        const masks = spec.volatile?.(rest.input) ?? [];
        const restMasked = JSON.stringify(
          mask(
            restAnswer,
            masks.map((p) => `body.${p}`),
          ),
        );
        const graphqlMasked = JSON.stringify(
          mask(
            graphqlAnswer,
            masks.map((p) => `body.${p}`),
          ),
        );
        if (restMasked !== graphqlMasked) {
          mismatches.push(`${variant.name}:\n  REST    ${restMasked.slice(0, 600)}\n  GraphQL ${graphqlMasked.slice(0, 600)}`);
        }
      }
      expect(mismatches, `${key}: REST and GraphQL disagree`).toEqual([]);

      /** The variant's request on one side, with the GraphQL variables of the given and the omitted forms. */
      async function request(side: Side, variant: string | null): Promise<{ input: Input; given: Input | null }> {
        const path = variant?.replace(/^-/, '') ?? null;
        let input = (await spec!.base(side)) as Json;
        // A nested optional is judged with its parents given (a field of an item needs the list).
        const parents = path
          ? optionals.filter(
              (p) =>
                p !== path &&
                path.startsWith(`${p.replace(/\[\]$/, '')}`) &&
                /[.[]/.test(path.slice(p.replace(/\[\]$/, '').length, p.replace(/\[\]$/, '').length + 1)),
            )
          : [];
        for (const parent of parents) input = await give(side, input, parent);
        if (!path) return { input: input as Input, given: null };
        // The omitted form's reference keeps the parameters the given form would drop: the variables the
        // parameter itself controls are those that differ between the two.
        if (variant!.startsWith('-')) return { input: setPath(input, path, undefined) as Input, given: (await give(side, input, path, false)) as Input };
        return { input: (await give(side, input, path)) as Input, given: null };
      }

      async function give(side: Side, input: Json, path: string, dropOthers = true): Promise<Json> {
        const entry = spec!.given[path];
        const { value, without = [], with: others = {} } = isGiven(entry) ? entry : { value: entry as Value };
        let out = input;
        if (dropOthers) for (const w of without) out = setPath(out, w, undefined)!;
        for (const [other, v] of Object.entries(others)) out = setPath(out, other, v)!;
        const resolved = typeof value === 'function' ? await value(side) : value;
        return setPath(out, path, resolved)!;
      }
    });
  }
});

const isGiven = (entry: unknown): entry is Given => typeof entry === 'object' && entry !== null && !Array.isArray(entry) && 'value' in entry;

/** The REST answer: status and JSON body (or the problem's code). */
async function askRest(url: string, prefix: string, route: RestRoute, input: Input): Promise<{ status: number; body: unknown }> {
  const path = route.path.replace(/:(\w+)/g, (_, name: string) => encodeURIComponent(input.params?.[name] ?? ''));
  const query = new URLSearchParams(input.query ?? {}).toString();
  const res = await fetch(`${url}${prefix}${path}${query ? `?${query}` : ''}`, {
    method: route.method,
    headers: { ...(input.headers ?? {}), ...(route.body ? { 'content-type': 'application/json' } : {}), accept: 'application/json' },
    ...(route.body ? { body: JSON.stringify(input.body ?? {}) } : {}),
  });
  const body = (await res.json()) as Record<string, unknown>;
  return res.status === 200 ? { status: 200, body } : { status: res.status, body: { code: body['code'] } };
}

/**
 * The same request asked as a GraphQL client asks it: the route's operation and variables, without the
 * variables and input fields that only an omitted optional would have set; answered through the route's
 * own mapping of `data` (its result, or the problem a GraphQL error maps to).
 */
async function askGraphQL(url: string, route: RestRoute, request: { input: Input; given: Input | null }): Promise<{ status: number; body: unknown }> {
  const variablesOf = (input: Input) =>
    route.variables({
      body: parse(route.body, input.body ?? {}),
      query: parse(route.query, input.query ?? {}),
      params: parse(route.params, input.params ?? {}),
    });
  let variables = variablesOf(request.input);
  let operation = route.operation;
  if (request.given) {
    const controlled = differingPaths(variables, variablesOf(request.given));
    const edited = withoutPaths(variables, controlled);
    variables = edited.variables;
    operation = withoutVariables(operation, edited.dropped);
  }
  // What JSON carries: a client cannot send `undefined`.
  variables = JSON.parse(JSON.stringify(variables)) as Record<string, unknown>;
  const res = await fetch(`${url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json', ...(request.input.headers ?? {}) },
    body: JSON.stringify({ query: operation, variables }),
  });
  const answer = (await res.json()) as { data?: Record<string, unknown> | null; errors?: { extensions?: { code?: unknown } }[] };
  const code = answer.errors?.[0]?.extensions?.code;
  if (answer.errors?.length) return { status: isErrorCode(code) ? statusOf(code) : 500, body: { code } };
  try {
    return { status: 200, body: route.result(answer.data ?? {}) };
  } catch (error) {
    if (error instanceof GraphQLError && isErrorCode(error.extensions['code']))
      return { status: statusOf(error.extensions['code']), body: { code: error.extensions['code'] } };
    throw error;
  }
}

function parse(schema: RestRoute['body'], value: unknown): unknown {
  if (!schema) return undefined;
  const checked = schema.safeParse(value);
  if (!checked.success) throw new Error(`the case's request is not valid for the route: ${JSON.stringify(checked.error.issues.slice(0, 3))}`);
  return checked.data;
}
