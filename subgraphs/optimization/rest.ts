import { z } from 'zod';
import { domainError } from '../../platform/errors.js';
import { defineRoute, fault, type RestRoute } from '../../platform/rest.js';
import { text } from '../../platform/validate.js';
import { MAX_RUNS_PAGE } from './inputs.js';
import {
  optimizationFleet,
  optimizationHealth,
  optimizationOverview,
  optimizationRefined,
  optimizationRun,
  optimizationRuns,
  optimizationStatus,
  optimizationVerify,
} from './rest-schemas.js';
import type {
  OptimizationFleetQuery,
  OptimizationHealthQuery,
  OptimizationLatestRefinedQuery,
  OptimizationOverviewQuery,
  OptimizationRunQuery,
  OptimizationRunsQuery,
  OptimizationStatusQuery,
  OptimizationVerifyQuery,
} from './operation-types.js';

/*
 * The documented REST paths of the optimization service (under /optimization): all GET, no body, as the
 * specification lists them. Each runs a GraphQL operation through the gateway; answers are snake_case
 * with lower-case enum values, converted generically (snake below), so each is held to its documented
 * schema (rest-schemas.ts) by the check on every answer outside production rather than by its type.
 */

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

const ENUM_KEYS = new Set(['status', 'problem', 'type']);
const snakeKey = (k: string) => k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** camelCase keys to snake_case, enum values (status, problem, type) to lower case, all the way down. */
function snake(value: unknown): Json {
  if (Array.isArray(value)) return value.map(snake);
  if (value !== null && typeof value === 'object') {
    const out: { [key: string]: Json } = {};
    for (const [k, v] of Object.entries(value)) {
      out[snakeKey(k)] = ENUM_KEYS.has(k) && typeof v === 'string' && /^[A-Z_0-9]+$/.test(v) ? v.toLowerCase() : snake(v);
    }
    return out;
  }
  return value as Json;
}

const COORDS = 'latitude longitude';
const VESSEL = `mmsi name type lane position { ${COORDS} } speedOverGround courseOverGround heading timestamp`;
const VIOLATION = `vesselA { mmsi name } vesselB { mmsi name } distanceMeters`;
const VERIFY = `safe status minSeparationMeters tick timestamp vesselCount pairs solverPairs
  separationViolations { ${VIOLATION} } speedViolations { vessel { mmsi name } zoneId speedKnots limitKnots }
  closestPair { ${VIOLATION} } proof solver { name version queries { query result ms } }
  crossCheck { method separationViolations speedViolations agrees } durationMs`;
const FLEET = `tick timestamp vesselCount vessels { ${VESSEL} }
  speedZones { id name center { ${COORDS} } radiusMeters limitKnots }`;
const RESULT = `gammas betas energy optimalityRatio startRatio evaluations sampledMeanRatio bestSampleBits bestSampleEnergy
  bestSampleRatio optimumProbability distinctSamples topSamples { bits count energy } randomSampleBestRatio
  refined { bits energy ratio starts evaluations } baseline { energy ratio starts evaluations }
  optimum { energy worstEnergy bits method nodes bruteForceAgrees }
  timings { diagonalMs optimizeMs simulateMs sampleMs exactMs refineMs totalMs }`;
const RUN = `id status problem size qubits depth shots seed maxEvaluations refineTop fleetTick backend createdAt completedAt
  durationMs error instance { description variables edges { u v weight } } result { ${RESULT} }`;
const RUN_SUMMARY = `id status problem size qubits depth shots backend createdAt completedAt durationMs error
  result { energy optimalityRatio bestSampleRatio refined { ratio } baseline { ratio } optimum { energy method } }`;
const STATUS = `service version backend { name kind description maxQubits }
  limits { maxQubits maxDepth maxShots maxEvaluations maxConcurrentRuns maxEstimatedSeconds }
  fleet { seed vessels tick tickIntervalMs updatedAt } runs { total running completed failed }`;
const REFINED = `run { id problem size qubits depth shots backend } optimalityRatio bestSampleRatio refinedRatio baselineRatio completedAt`;

const limitQuery = z
  .string()
  .regex(/^\d{1,3}$/, `must be a whole number from 1 to ${MAX_RUNS_PAGE}`)
  .transform(Number)
  .pipe(z.number().min(1, 'must be at least 1').max(MAX_RUNS_PAGE, `must be at most ${MAX_RUNS_PAGE}`));

/** A page of runs, whichever run fields the operation selected (null only beside an error, which the engine answers). */
const runsBody = (page: { edges: { node: unknown }[]; pageInfo: { hasNextPage: boolean; endCursor: string | null }; totalCount: number } | null) => {
  if (!page) return fault('quantumRuns is null without an error');
  return {
    runs: page.edges.map((e) => snake(e.node)),
    next_cursor: page.pageInfo.hasNextPage ? page.pageInfo.endCursor : null,
    total: page.totalCount,
  };
};

export const optimizationRoutes: RestRoute[] = [
  defineRoute<undefined, undefined, undefined, OptimizationHealthQuery>({
    method: 'GET',
    path: '/health',
    summary: 'Backend health: database, fleet simulation, solver',
    operation: 'query OptimizationHealth { optimizationHealth { status ready database fleetTick solverLoaded } }',
    variables: () => ({}),
    result: (d) => ({ service: 'optimization', version: '1.0', ...(snake(d.optimizationHealth) as object) }),
    response: optimizationHealth,
  }),
  defineRoute<undefined, undefined, undefined, OptimizationStatusQuery>({
    method: 'GET',
    path: '/status',
    summary: 'Service status: simulator backend, limits, fleet clock, run counts',
    operation: `query OptimizationStatus { optimizationStatus { ${STATUS} } }`,
    variables: () => ({}),
    result: (d) => snake(d.optimizationStatus),
    response: optimizationStatus,
  }),
  defineRoute<undefined, undefined, undefined, OptimizationOverviewQuery>({
    method: 'GET',
    path: '/overview',
    summary: 'Status, safety proof, fleet snapshot and recent runs in one payload',
    operation: `query OptimizationOverview {
      optimizationStatus { ${STATUS} }
      fleetSafety { ${VERIFY} }
      vesselFleet { ${FLEET} }
      quantumRuns(first: 10) { edges { node { ${RUN_SUMMARY} } } pageInfo { hasNextPage endCursor } totalCount }
      latestRefinedResult { ${REFINED} }
    }`,
    variables: () => ({}),
    result: (d) => ({
      status: snake(d.optimizationStatus),
      verify: snake(d.fleetSafety),
      fleet: snake(d.vesselFleet),
      quantum: { ...runsBody(d.quantumRuns), latest_refined: snake(d.latestRefinedResult) },
    }),
    response: optimizationOverview,
  }),
  defineRoute<undefined, { min_separation_m?: number | undefined }, undefined, OptimizationVerifyQuery>({
    method: 'GET',
    path: '/verify',
    summary: 'Formal safety proof for the fleet constraints (?min_separation_m=50..5000, default 463)',
    operation: `query OptimizationVerify($min: Float) { fleetSafety(minSeparationMeters: $min) { ${VERIFY} } }`,
    query: z.object({
      min_separation_m: z
        .string()
        .regex(/^\d{1,4}(\.\d{1,3})?$/, 'must be a number of metres from 50 to 5000')
        .transform(Number)
        .pipe(z.number().min(50, 'must be at least 50').max(5000, 'must be at most 5000'))
        .optional(),
    }),
    variables: ({ query }) => ({ min: query.min_separation_m }),
    fieldNames: { minSeparationMeters: 'min_separation_m' },
    result: (d) => snake(d.fleetSafety),
    response: optimizationVerify,
  }),
  defineRoute<undefined, undefined, undefined, OptimizationFleetQuery>({
    method: 'GET',
    path: '/fleet',
    summary: 'AIS fleet snapshot: every vessel at the newest tick',
    operation: `query OptimizationFleet { vesselFleet { ${FLEET} } }`,
    variables: () => ({}),
    result: (d) => snake(d.vesselFleet),
    response: optimizationFleet,
  }),
  defineRoute<undefined, { limit: number; cursor?: string | undefined }, undefined, OptimizationRunsQuery>({
    method: 'GET',
    path: '/quantum/runs',
    summary: `Recent quantum runs, newest first (?limit=1..${MAX_RUNS_PAGE}, default 20; ?cursor=next_cursor)`,
    operation: `query OptimizationRuns($first: Int!, $after: String) {
      quantumRuns(first: $first, after: $after) { edges { node { ${RUN} } } pageInfo { hasNextPage endCursor } totalCount }
    }`,
    query: z.object({ limit: limitQuery.default(20), cursor: text().min(1).optional() }),
    variables: ({ query }) => ({ first: query.limit, after: query.cursor }),
    fieldNames: { after: 'cursor', first: 'limit' },
    result: (d) => runsBody(d.quantumRuns),
    response: optimizationRuns,
  }),
  defineRoute<undefined, undefined, { run_id: string }, OptimizationRunQuery>({
    method: 'GET',
    path: '/quantum/runs/:run_id',
    summary: 'One quantum run with its full result',
    operation: `query OptimizationRun($id: ID!) { quantumRun(id: $id) { ${RUN} } }`,
    params: z.object({ run_id: text() }),
    variables: ({ params }) => ({ id: params.run_id }),
    fieldNames: { id: 'run_id' },
    result: (d) => {
      if (!d.quantumRun) throw domainError('NOT_FOUND', 'Quantum run not found');
      return snake(d.quantumRun);
    },
    response: optimizationRun,
    errors: ['NOT_FOUND'],
  }),
  defineRoute<undefined, undefined, undefined, OptimizationLatestRefinedQuery>({
    method: 'GET',
    path: '/quantum/latest/refined',
    summary: 'Latest refined optimality ratio, beside the raw and baseline ratios',
    operation: `query OptimizationLatestRefined { latestRefinedResult { ${REFINED} } }`,
    variables: () => ({}),
    result: (d) => {
      if (!d.latestRefinedResult) throw domainError('NOT_FOUND', 'No quantum run has completed yet');
      return snake(d.latestRefinedResult);
    },
    response: optimizationRefined,
    errors: ['NOT_FOUND'],
  }),
];
