import { sequenceCursor } from '../../platform/cursor.js';
import { mapEvents } from '../../platform/event-hub.js';
import { viewerOf } from '../../platform/ownership.js';
import { DateTimeScalar } from '../../platform/scalars.js';
import { parseInput } from '../../platform/validate.js';
import { createLoaders, type OptimizationContext, type PositionsEventView, type RunEventView } from './context.js';
import { LANES, SPEED_ZONES } from './fleet.js';
import { minSeparation, mmsiArg, mmsiFilter, runId, runsFirst, startRunInput, trackLast } from './inputs.js';
import { TOPICS, type PositionsEventPayload, type RunEventPayload } from './records.js';
import type { Resolvers } from './schema-types.js';
import { BACKEND } from './statevector.js';
import { DEFAULT_MIN_SEPARATION_M } from './verify.js';

/** An internal lower-case value as its GraphQL enum value. */
const upper = <T extends string>(s: T) => s.toUpperCase() as Uppercase<T>;
const coordinates = (p: { latitude: number; longitude: number }) => ({ latitude: p.latitude, longitude: p.longitude });
/** Cursors of the quantum runs, by run sequence number. */
const runCursor = sequenceCursor('run');

const vesselOrFail = async (ctx: OptimizationContext, mmsi: string) => {
  const v = await ctx.loaders.vessel.load(mmsi);
  if (!v) throw new Error(`vessel ${mmsi} is missing`);
  return v;
};

function renew(ctx: OptimizationContext): void {
  ctx.loaders = createLoaders(ctx.service, ctx.principal);
}

export const optimizationResolvers: Resolvers = {
  DateTime: DateTimeScalar,
  Query: {
    optimizationHealth: async (_, __, ctx) => {
      const { database, fleetTick, solverLoaded } = await ctx.service.health();
      return { status: database ? 'ok' : 'degraded', ready: database, database, fleetTick, solverLoaded };
    },
    optimizationStatus: async (_, __, ctx) => {
      const { clock, runs } = await ctx.service.status(ctx.principal);
      const { limits } = ctx.service;
      return {
        service: 'optimization',
        version: '1.0',
        backend: { ...BACKEND, maxQubits: limits.maxQubits },
        limits: {
          maxQubits: limits.maxQubits,
          maxDepth: 5,
          maxShots: 100_000,
          maxEvaluations: 500,
          maxConcurrentRuns: limits.maxConcurrentRuns,
          maxConcurrentRunsPerTenant: limits.maxConcurrentRunsPerTenant,
          maxEstimatedSeconds: limits.maxEstimatedSeconds,
        },
        fleet: { seed: clock.seed, vessels: clock.size, tick: clock.tick, tickIntervalMs: ctx.service.tickIntervalMs, updatedAt: clock.updatedAt },
        runs,
      };
    },
    vesselFleet: async (_, __, ctx) => {
      const { clock, vessels } = await ctx.service.snapshot();
      for (const v of vessels) ctx.loaders.vessel.prime(v.mmsi, v);
      return { tick: clock.tick, timestamp: clock.updatedAt, vesselCount: vessels.length, vessels, speedZones: [...SPEED_ZONES] };
    },
    vessel: (_, args, ctx) => ctx.loaders.vessel.load(parseInput(mmsiArg, args.mmsi, 'mmsi')),
    fleetSafety: (_, args, ctx) => ctx.service.verify(parseInput(minSeparation, args.minSeparationMeters, 'minSeparationMeters') ?? DEFAULT_MIN_SEPARATION_M),
    quantumRuns: async (_, args, ctx) => {
      const first = parseInput(runsFirst, args.first ?? 20, 'first');
      const before = args.after === null || args.after === undefined ? null : runCursor.decode(args.after);
      const page = await ctx.service.runsPage(first, before, ctx.principal);
      for (const r of page.runs) ctx.loaders.run.prime(r.id, r);
      const edges = page.runs.map((r) => ({ cursor: runCursor.encode(r.seq), node: r }));
      return { edges, pageInfo: { hasNextPage: page.hasNext, endCursor: edges.at(-1)?.cursor ?? null }, totalCount: page.total };
    },
    quantumRun: (_, args, ctx) => ctx.loaders.run.load(parseInput(runId, args.id, 'id')),
    latestRefinedResult: async (_, __, ctx) => {
      const run = await ctx.service.latestCompleted(ctx.principal);
      // A completed run has its result and completion time.
      if (!run?.result || !run.completedAt) return null;
      return {
        run,
        optimalityRatio: run.result.expectedRatio,
        bestSampleRatio: run.result.bestSampleRatio,
        refinedRatio: run.result.refined.ratio,
        baselineRatio: run.result.baseline.ratio,
        completedAt: run.completedAt,
      };
    },
    optimizationEventCursor: (_, __, ctx) => ctx.service.eventCursor(),
  },
  Mutation: {
    startQuantumRun: (_, args, ctx) => ctx.service.start(parseInput(startRunInput, args.input, 'input'), ctx.principal),
  },
  Subscription: {
    quantumRunCompleted: {
      subscribe: async (_, args, ctx) => {
        const stream = ctx.events.stream<RunEventPayload>(TOPICS.run, {
          after: await ctx.events.resumeCursor(args.after, TOPICS.run),
          viewer: viewerOf(ctx.principal),
        });
        return mapEvents(stream, (e) => ({ quantumRunCompleted: { ...e.payload, cursor: e.id } }));
      },
      resolve: (payload: { quantumRunCompleted: RunEventView }, _: unknown, ctx: OptimizationContext) => {
        renew(ctx);
        return payload.quantumRunCompleted;
      },
    },
    vesselPositionsChanged: {
      subscribe: async (_, args, ctx) => {
        const after = await ctx.events.resumeCursor(args.after, TOPICS.positions);
        const keep = parseInput(mmsiFilter, args.mmsis, 'mmsis');
        const filter = keep ? new Set(keep) : null;
        const stream = ctx.events.stream<PositionsEventPayload>(TOPICS.positions, { after, viewer: viewerOf(ctx.principal) });
        return mapEvents(stream, (e) => ({
          vesselPositionsChanged: {
            cursor: e.id,
            tick: e.payload.tick,
            at: e.payload.at,
            positions: e.payload.positions.filter((p) => !filter || filter.has(p.mmsi)).map((p) => ({ ...p, tick: e.payload.tick, at: e.payload.at })),
          },
        }));
      },
      resolve: (payload: { vesselPositionsChanged: PositionsEventView }, _: unknown, ctx: OptimizationContext) => {
        renew(ctx);
        return payload.vesselPositionsChanged;
      },
    },
  },
  Vessel: {
    __resolveReference: (ref, ctx) => (/^\d{9}$/.test(ref.mmsi) ? ctx.loaders.vessel.load(ref.mmsi) : null),
    type: (v) => v.type,
    lane: (v) => LANES[v.lane]?.name ?? 'unknown',
    position: coordinates,
    speedOverGround: (v) => v.sog,
    courseOverGround: (v) => v.cog,
    timestamp: (v) => v.at,
    track: (v, args, ctx) => ctx.service.track(v.mmsi, parseInput(trackLast, args.last ?? 20, 'last')),
  },
  TrackPoint: {
    position: coordinates,
    speedOverGround: (p) => p.sog,
    courseOverGround: (p) => p.cog,
    timestamp: (p) => p.at,
  },
  SpeedZone: {
    center: (z) => coordinates(z.center),
    radiusMeters: (z) => z.radiusM,
  },
  SafetyVerification: {
    minSeparationMeters: (v) => v.minSeparationM,
    closestPair: (v) => v.closest,
  },
  SeparationViolation: {
    vesselA: (v, _, ctx) => vesselOrFail(ctx, v.a),
    vesselB: (v, _, ctx) => vesselOrFail(ctx, v.b),
    distanceMeters: (v) => v.distanceM,
  },
  SpeedViolation: {
    vessel: (v, _, ctx) => vesselOrFail(ctx, v.mmsi),
  },
  QuantumRun: {
    __resolveReference: (ref, ctx) => ctx.loaders.run.load(ref.id),
    status: (r) => upper(r.status),
    instance: (r) => ({ ...r.instance, edges: r.instance.edges.map((e) => ({ u: e.u, v: e.v, weight: e.w })) }),
    result: (r) => r.result,
  },
  RunResult: {
    energy: (r) => r.expectedValue,
    optimalityRatio: (r) => r.expectedRatio,
    bestSampleBits: (r) => r.bestSample.bits,
    bestSampleEnergy: (r) => r.bestSample.value,
  },
  Sample: { energy: (s) => s.value },
  RefinedSolution: { energy: (s) => s.value },
  BaselineSolution: { energy: (s) => s.value },
  ExactOptimum: {
    energy: (o) => o.value,
    worstEnergy: (o) => o.worst,
  },
  QuantumRunEvent: {
    run: async (e, _, ctx) => {
      const run = await ctx.loaders.run.load(e.runId);
      if (!run) throw new Error(`run ${e.runId} is missing`);
      return run;
    },
    status: (e) => upper(e.status),
  },
  VesselPositionsEvent: {
    vessels: (e, _, ctx) => Promise.all(e.positions.map((p) => vesselOrFail(ctx, p.mmsi))),
  },
};
