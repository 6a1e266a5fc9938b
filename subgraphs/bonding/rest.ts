import { z } from 'zod';
import { domainError } from '../../platform/errors.js';
import { defineRoute, fault, oneOf, type RestRoute } from '../../platform/rest.js';
import { text } from '../../platform/validate.js';
import { MAX_PATHS, int, kindToEnum, restKind, seed, sessionId, userId } from './inputs.js';
import {
  bondingHealth,
  bondingKey,
  bondingRecommendation,
  bondingSession,
  type BondingHealth,
  type BondingKey,
  type BondingRecommendation,
  type BondingSession,
} from './rest-schemas.js';
import type {
  BondingCloseMutation,
  BondingHealthQuery,
  BondingOptimizeQuery,
  BondingQkdMutation,
  BondingStartMutation,
  BondingStatusQuery,
} from './operation-types.js';

/*
 * The documented REST paths of the bonding service (under /bonding), each run as a GraphQL operation
 * through the gateway. Bodies are snake_case; enum values lower case (path kinds as "5g", "fiber", ...);
 * answers are typed by their documented schemas (rest-schemas.ts).
 */

type SessionData = NonNullable<BondingStatusQuery['currentBondingSession']>;
type PathData = SessionData['paths'][number];
type PlaneData = SessionData['planes']['data'];
type RecommendationData = BondingOptimizeQuery['recommendPaths'];
type PairData = NonNullable<RecommendationData['pair']>;

const PAIR = `a b jointOutage availability outageA outageB correlation sharedRisk combinedCapacityMbps protectedRateMbps
  expectedGoodputMbps maxLatencyMs`;
const RECOMMENDATION = `feasible explanation pair { ${PAIR} } runnerUp { ${PAIR} }
  weights { pathId weight outage expectedGoodputMbps } expectedGoodputMbps
  ruledOut { constraint limit count examples } pathsConsidered pathsUsable pairsTotal pairsEvaluated method elapsedMs`;
const PLANE = 'health lastAction lastActionAt';
const SESSION = `id userId state stateReason seed tick simulatedSeconds createdAt updatedAt closedAt
  paths { id kind sharedRisk latencyMs jitterMs lossPct capacityMbps up outageProbability }
  planes { data { ${PLANE} } control { ${PLANE} } security { ${PLANE} } intelligence { ${PLANE} } }
  recommendation { ${RECOMMENDATION} }
  lastKey { keyId status fingerprint bits qber eavesdropperDetected createdAt }`;
const KEY = `sessionId status reason keyId fingerprint bits rawBits siftedBits sampleBits qber qberUpperBound qberThreshold
  errorsCorrected leakedBits secureBits finalBits residualErrors eavesdropperDetected attempts kem kdf key simulated
  createdAt elapsedMs`;

const lower = <S extends string>(s: S) => s.toLowerCase() as Lowercase<S>;
const restKindOf = (k: PathData['kind']) => (k === 'FIVE_G' ? '5g' : lower(k));
/** A camelCase name in snake_case, as a type (`expectedGoodputMbps` -> `expected_goodput_mbps`). */
type Snake<S extends string> = S extends `${infer H}${infer T}` ? `${H extends Lowercase<H> ? H : `_${Lowercase<H>}`}${Snake<T>}` : S;
const snake = <S extends string>(s: S) => s.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`) as Snake<S>;
/** camelCase keys to snake_case, one level (values kept). */
const snakeKeys = <T extends object>(o: T) =>
  Object.fromEntries(Object.entries(o).map(([k, v]) => [snake(k), v])) as { [K in keyof T & string as Snake<K>]: T[K] };

type PlaneBody = BondingSession['planes']['data'];
const plane = (p: PlaneData): PlaneBody => ({ health: lower(p.health), last_action: p.lastAction, last_action_at: p.lastActionAt });
const pair = (p: PairData | null) => (p ? snakeKeys(p) : null);

const recommendationBody = (r: RecommendationData): BondingRecommendation => ({
  feasible: r.feasible,
  explanation: r.explanation,
  pair: pair(r.pair),
  runner_up: pair(r.runnerUp),
  weights: r.weights.map((w) => ({ path_id: w.pathId, weight: w.weight, outage: w.outage, expected_goodput_mbps: w.expectedGoodputMbps })),
  expected_goodput_mbps: r.expectedGoodputMbps,
  ruled_out: r.ruledOut.map((x) => ({
    constraint: oneOf(snake(x.constraint), ['up', 'max_latency_ms', 'max_jitter_ms', 'max_loss_pct', 'min_combined_capacity_mbps'], 'ruled_out.constraint'),
    limit: x.limit,
    count: x.count,
    examples: x.examples,
  })),
  paths_considered: r.pathsConsidered,
  paths_usable: r.pathsUsable,
  pairs_total: r.pairsTotal,
  pairs_evaluated: r.pairsEvaluated,
  method: r.method,
  elapsed_ms: r.elapsedMs,
});

const sessionBody = (s: SessionData): BondingSession => ({
  session_id: s.id,
  user_id: s.userId,
  state: lower(s.state),
  state_reason: s.stateReason,
  seed: s.seed,
  tick: s.tick,
  simulated_seconds: s.simulatedSeconds,
  created_at: s.createdAt,
  updated_at: s.updatedAt,
  closed_at: s.closedAt,
  paths: s.paths.map((p) => ({
    id: p.id,
    kind: restKindOf(p.kind),
    shared_risk: p.sharedRisk,
    latency_ms: p.latencyMs,
    jitter_ms: p.jitterMs,
    loss_pct: p.lossPct,
    capacity_mbps: p.capacityMbps,
    up: p.up,
    outage_probability: p.outageProbability,
  })),
  planes: {
    data: plane(s.planes.data),
    control: plane(s.planes.control),
    security: plane(s.planes.security),
    intelligence: plane(s.planes.intelligence),
  },
  recommendation: recommendationBody(s.recommendation),
  last_key: s.lastKey ? { ...snakeKeys(s.lastKey), status: lower(s.lastKey.status) } : null,
});

/** A query-string integer, checked as the GraphQL argument would be. */
const queryInt = (schema: z.ZodType<number, number>) =>
  z
    .string()
    .regex(/^\d{1,10}$/, 'must be a whole number')
    .transform(Number)
    .pipe(schema);

const restPath = z.object({
  id: text(),
  kind: restKind.optional(),
  latency_ms: z.number(),
  jitter_ms: z.number().optional(),
  loss_pct: z.number(),
  capacity_mbps: z.number(),
  up: z.boolean().optional(),
  outage_probability: z.number().optional(),
  shared_risk: z.array(text()).max(16, 'must have at most 16 items').optional(),
});
type RestPath = z.infer<typeof restPath>;

const optimizeBody = z.object({
  paths: z.array(restPath).max(MAX_PATHS, `must have at most ${MAX_PATHS} items`),
  constraints: z
    .object({
      max_latency_ms: z.number().optional(),
      max_jitter_ms: z.number().optional(),
      max_loss_pct: z.number().optional(),
      min_combined_capacity_mbps: z.number().optional(),
    })
    .optional(),
  risk_groups: z
    .array(z.object({ id: text(), outage_probability: z.number() }))
    .max(MAX_PATHS, `must have at most ${MAX_PATHS} items`)
    .optional(),
});
type OptimizeBody = z.infer<typeof optimizeBody>;

const qkdBody = z.object({
  session_id: text(),
  bits: int(64, 4096),
  noise: z.number().optional(),
  intercept_fraction: z.number().optional(),
  seed: seed.optional(),
});
type QkdBody = z.infer<typeof qkdBody>;

const pathVariable = (p: RestPath) => ({
  id: p.id,
  kind: p.kind ? kindToEnum(p.kind) : undefined,
  latencyMs: p.latency_ms,
  jitterMs: p.jitter_ms,
  lossPct: p.loss_pct,
  capacityMbps: p.capacity_mbps,
  up: p.up,
  outageProbability: p.outage_probability,
  sharedRisk: p.shared_risk,
});

export const bondingRoutes: readonly RestRoute[] = [
  defineRoute<undefined, undefined, undefined, BondingHealthQuery>({
    method: 'GET',
    path: '/health',
    summary: 'Backend health: open sessions by state and how keys are made',
    operation: 'query BondingHealth { bondingOverview { openSessions negotiating bonded degraded down keySource tickMs simulatedSecondsPerTick } }',
    variables: () => ({}),
    result: ({ bondingOverview: o }): BondingHealth => ({
      status: 'ok',
      service: 'bonding',
      version: '1.0',
      sessions: { open: o.openSessions, negotiating: o.negotiating, bonded: o.bonded, degraded: o.degraded, down: o.down },
      key_source: o.keySource,
      link_model: { tick_ms: o.tickMs, simulated_seconds_per_tick: o.simulatedSecondsPerTick },
    }),
    response: bondingHealth,
  }),
  defineRoute<undefined, { user_id?: string | undefined; session_id?: string | undefined }, undefined, BondingStatusQuery>({
    method: 'GET',
    path: '/api/bonding/status',
    summary: "A session's state: ?session_id=, else the newest session of ?user_id= (default: the sandbox user)",
    operation: `query BondingStatus($userId: String, $sessionId: ID) { currentBondingSession(userId: $userId, sessionId: $sessionId) { ${SESSION} } }`,
    query: z.object({ user_id: userId.optional(), session_id: sessionId.optional() }),
    variables: ({ query }) => ({ userId: query.user_id, sessionId: query.session_id }),
    result: (d) => {
      if (!d.currentBondingSession) throw domainError('NOT_FOUND', 'No bonding session found: start one with POST /bonding/api/bonding/start');
      return sessionBody(d.currentBondingSession);
    },
    response: bondingSession,
    errors: ['NOT_FOUND'],
  }),
  defineRoute<undefined, { user_id?: string | undefined; seed?: number | undefined }, undefined, BondingStartMutation>({
    method: 'POST',
    path: '/api/bonding/start',
    summary: 'Starts a bonding session for ?user_id= (default: the sandbox user); ?seed= makes its link model reproducible',
    operation: `mutation BondingStart($userId: String, $seed: Int) { startBondingSession(userId: $userId, seed: $seed) { ${SESSION} } }`,
    query: z.object({ user_id: userId.optional(), seed: queryInt(seed).optional() }),
    variables: ({ query }) => ({ userId: query.user_id, seed: query.seed }),
    result: (d) => sessionBody(d.startBondingSession),
    response: bondingSession,
    errors: ['CONFLICT'],
  }),
  defineRoute<undefined, { session_id: string }, undefined, BondingCloseMutation>({
    method: 'POST',
    path: '/api/bonding/close',
    summary: 'Closes the session ?session_id= (terminal)',
    operation: `mutation BondingClose($id: ID!) { closeBondingSession(id: $id) { ${SESSION} } }`,
    query: z.object({ session_id: sessionId }),
    variables: ({ query }) => ({ id: query.session_id }),
    fieldNames: { id: 'session_id' },
    result: (d) => sessionBody(d.closeBondingSession),
    response: bondingSession,
    errors: ['NOT_FOUND', 'CONFLICT'],
  }),
  defineRoute<OptimizeBody, undefined, undefined, BondingOptimizeQuery>({
    method: 'POST',
    path: '/api/quantum/optimize',
    summary: 'The redundant ("Bell-state") path pair with the lowest joint outage under the constraints, split weights, goodput',
    operation: `query BondingOptimize($paths: [PathInput!]!, $constraints: PathConstraintsInput, $riskGroups: [RiskGroupInput!]) {
      recommendPaths(paths: $paths, constraints: $constraints, riskGroups: $riskGroups) { ${RECOMMENDATION} } }`,
    body: optimizeBody,
    variables: ({ body }) => ({
      paths: body.paths.map(pathVariable),
      constraints: body.constraints
        ? {
            maxLatencyMs: body.constraints.max_latency_ms,
            maxJitterMs: body.constraints.max_jitter_ms,
            maxLossPct: body.constraints.max_loss_pct,
            minCombinedCapacityMbps: body.constraints.min_combined_capacity_mbps,
          }
        : undefined,
      riskGroups: body.risk_groups?.map((g) => ({ id: g.id, outageProbability: g.outage_probability })),
    }),
    result: (d) => recommendationBody(d.recommendPaths),
    response: bondingRecommendation,
  }),
  defineRoute<QkdBody, undefined, undefined, BondingQkdMutation>({
    method: 'POST',
    path: '/api/qkd/generate',
    summary: 'BB84 key generation (simulated) combined with ML-KEM-768 into a hybrid session key',
    operation: `mutation BondingQkd($input: QuantumKeyInput!) { generateQuantumKey(input: $input) { ${KEY} } }`,
    body: qkdBody,
    variables: ({ body }) => ({
      input: {
        sessionId: body.session_id,
        bits: body.bits,
        noise: body.noise,
        interceptFraction: body.intercept_fraction,
        seed: body.seed,
      },
    }),
    result: (d): BondingKey => {
      const key = d.generateQuantumKey;
      return {
        ...snakeKeys(key),
        status: lower(key.status),
        kem: oneOf(key.kem, ['ML-KEM-768'], 'kem'),
        kdf: oneOf(key.kdf, ['HKDF-SHA256'], 'kdf'),
        simulated: key.simulated === true ? true : fault('simulated is false: every key here is simulated'),
      };
    },
    response: bondingKey,
    errors: ['NOT_FOUND', 'CONFLICT'],
  }),
];
