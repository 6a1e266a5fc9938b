import type { GraphQLResolverMap } from '@apollo/subgraph/dist/schema-helper/index.js';
import DataLoader from 'dataloader';
import type { Clock } from '../../platform/clock.js';
import { mapEvents, type EventHub, type StoredEvent } from '../../platform/event-hub.js';
import { DateTimeScalar } from '../../platform/scalars.js';
import { invalidInput, parseInput } from '../../platform/validate.js';
import { LANES, SPEED_ZONES, type SpeedZone, type VesselPosition } from './fleet.js';
import { minSeparation, mmsiArg, mmsiFilter, runId, runsFirst, startRunInput, trackLast } from './inputs.js';
import type { JobResult, SampleSummary } from './job.js';
import type { RunService } from './runs.js';
import { BACKEND } from './statevector.js';
import { TOPICS, type OptimizationStore, type PositionsEventPayload, type RunEventPayload, type RunRecord, type TrackPointRecord, type VesselRecord } from './store.js';
import type { SeparationViolation, SpeedViolation, Verification } from './verify.js';
import { DEFAULT_MIN_SEPARATION_M } from './verify.js';

/** What the verifier needs from the service: one cached proof per fleet tick and threshold. */
export interface SafetyService {
  verify(minSeparationM: number): Promise<Verification & { tick: number; timestamp: string }>;
  solverLoaded(): boolean;
}

export interface OptimizationContext {
  store: OptimizationStore;
  runs: RunService;
  safety: SafetyService;
  events: EventHub;
  clock: Clock;
  tickIntervalMs: number;
  ready(): Promise<boolean>;
  loaders: ReturnType<typeof createLoaders>;
}

export function createLoaders(store: OptimizationStore) {
  return {
    vessel: new DataLoader<string, VesselRecord | null>(async (mmsis) => {
      const rows = new Map((await store.vesselsByMmsi(mmsis)).map((v) => [v.mmsi, v]));
      return mmsis.map((m) => rows.get(m) ?? null);
    }),
    run: new DataLoader<string, RunRecord | null>(async (ids) => {
      const rows = new Map((await store.runsByIds(ids)).map((r) => [r.id, r]));
      return ids.map((id) => rows.get(id) ?? null);
    }),
  };
}

const upper = (s: string) => s.toUpperCase();
const coordinates = (p: { latitude: number; longitude: number }) => ({ latitude: p.latitude, longitude: p.longitude });
const cursorOf = (seq: string) => Buffer.from(`run:${seq}`).toString('base64url');
function seqOfCursor(cursor: string): string {
  const match = /^run:([1-9]\d{0,17})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!match || cursorOf(match[1]!) !== cursor) throw invalidInput([{ field: 'after', message: 'is not a cursor returned by this API' }]);
  return match[1]!;
}

const vesselOrFail = async (ctx: OptimizationContext, mmsi: string) => {
  const v = await ctx.loaders.vessel.load(mmsi);
  if (!v) throw new Error(`vessel ${mmsi} is missing`);
  return v;
};

function renew(ctx: OptimizationContext): void {
  ctx.loaders = createLoaders(ctx.store);
}

type SafetyView = Verification & { tick: number; timestamp: string };

const optimizationResolvers = {
  DateTime: DateTimeScalar,
  Query: {
    optimizationHealth: async (_: unknown, __: unknown, ctx: OptimizationContext) => {
      const database = await ctx.ready();
      const clock = database ? await ctx.store.fleetClock() : null;
      return { status: database ? 'ok' : 'degraded', ready: database, database, fleetTick: clock?.tick ?? 0, solverLoaded: ctx.safety.solverLoaded() };
    },
    optimizationStatus: async (_: unknown, __: unknown, ctx: OptimizationContext) => {
      const [clock, runs] = await Promise.all([ctx.store.fleetClock(), ctx.store.runCounts()]);
      return {
        service: 'optimization',
        version: '1.0',
        backend: { ...BACKEND, maxQubits: ctx.runs.limits.maxQubits },
        limits: {
          maxQubits: ctx.runs.limits.maxQubits,
          maxDepth: 5,
          maxShots: 100_000,
          maxEvaluations: 500,
          maxConcurrentRuns: ctx.runs.limits.maxConcurrentRuns,
          maxEstimatedSeconds: ctx.runs.limits.maxEstimatedSeconds,
        },
        fleet: { seed: clock.seed, vessels: clock.size, tick: clock.tick, tickIntervalMs: ctx.tickIntervalMs, updatedAt: clock.updatedAt },
        runs,
      };
    },
    vesselFleet: async (_: unknown, __: unknown, ctx: OptimizationContext) => {
      const { clock, vessels } = await ctx.store.snapshot();
      for (const v of vessels) ctx.loaders.vessel.prime(v.mmsi, v);
      return { tick: clock.tick, timestamp: clock.updatedAt, vesselCount: vessels.length, vessels, speedZones: SPEED_ZONES };
    },
    vessel: (_: unknown, args: { mmsi: string }, ctx: OptimizationContext) => ctx.loaders.vessel.load(parseInput(mmsiArg, args.mmsi, 'mmsi')),
    fleetSafety: (_: unknown, args: { minSeparationMeters?: number | null }, ctx: OptimizationContext) =>
      ctx.safety.verify(parseInput(minSeparation, args.minSeparationMeters, 'minSeparationMeters') ?? DEFAULT_MIN_SEPARATION_M),
    quantumRuns: async (_: unknown, args: { first?: number | null; after?: string | null }, ctx: OptimizationContext) => {
      const first = parseInput(runsFirst, args.first ?? 20, 'first');
      const before = args.after === null || args.after === undefined ? null : seqOfCursor(args.after);
      const page = await ctx.store.runsPage(first, before);
      for (const r of page.runs) ctx.loaders.run.prime(r.id, r);
      const edges = page.runs.map((r) => ({ cursor: cursorOf(r.seq), node: r }));
      return { edges, pageInfo: { hasNextPage: page.hasNext, endCursor: edges.at(-1)?.cursor ?? null }, totalCount: page.total };
    },
    quantumRun: (_: unknown, args: { id: string }, ctx: OptimizationContext) => ctx.loaders.run.load(parseInput(runId, args.id, 'id')),
    latestRefinedResult: async (_: unknown, __: unknown, ctx: OptimizationContext) => {
      const run = await ctx.store.latestCompleted();
      if (!run?.result) return null;
      return {
        run,
        optimalityRatio: run.result.expectedRatio,
        bestSampleRatio: run.result.bestSampleRatio,
        refinedRatio: run.result.refined.ratio,
        baselineRatio: run.result.baseline.ratio,
        completedAt: run.completedAt,
      };
    },
    optimizationEventCursor: (_: unknown, __: unknown, ctx: OptimizationContext) => ctx.store.eventCursor(),
  },
  Mutation: {
    startQuantumRun: (_: unknown, args: { input: unknown }, ctx: OptimizationContext) => ctx.runs.start(parseInput(startRunInput, args.input, 'input')),
  },
  Subscription: {
    quantumRunCompleted: {
      subscribe: async (_: unknown, args: { after?: string | null }, ctx: OptimizationContext) => {
        const stream = ctx.events.stream<RunEventPayload>(TOPICS.run, { after: await ctx.events.resumeCursor(args.after) });
        return mapEvents(stream, (e) => ({ quantumRunCompleted: { ...e.payload, cursor: e.id } }));
      },
      resolve: (payload: { quantumRunCompleted: RunEventPayload & { cursor: string } }, _: unknown, ctx: OptimizationContext) => {
        renew(ctx);
        return payload.quantumRunCompleted;
      },
    },
    vesselPositionsChanged: {
      subscribe: async (_: unknown, args: { mmsis?: string[] | null; after?: string | null }, ctx: OptimizationContext) => {
        const after = await ctx.events.resumeCursor(args.after);
        const keep = parseInput(mmsiFilter, args.mmsis, 'mmsis');
        const filter = keep ? new Set(keep) : null;
        const stream = ctx.events.stream<PositionsEventPayload>(TOPICS.positions, { after });
        return mapEvents(stream, (e) => ({
          vesselPositionsChanged: {
            cursor: e.id,
            tick: e.payload.tick,
            at: e.payload.at,
            positions: e.payload.positions.filter((p) => !filter || filter.has(p.mmsi)).map((p) => ({ ...p, tick: e.payload.tick, at: e.payload.at })),
          },
        }));
      },
      resolve: (payload: { vesselPositionsChanged: unknown }, _: unknown, ctx: OptimizationContext) => {
        renew(ctx);
        return payload.vesselPositionsChanged;
      },
    },
  },
  Vessel: {
    __resolveReference: (ref: { mmsi: string }, ctx: OptimizationContext) => (/^\d{9}$/.test(ref.mmsi) ? ctx.loaders.vessel.load(ref.mmsi) : null),
    type: (v: VesselRecord) => v.type,
    lane: (v: VesselRecord) => LANES[v.lane]?.name ?? 'unknown',
    position: coordinates,
    speedOverGround: (v: VesselRecord) => v.sog,
    courseOverGround: (v: VesselRecord) => v.cog,
    timestamp: (v: VesselRecord) => v.at,
    track: (v: VesselRecord, args: { last?: number | null }, ctx: OptimizationContext) => ctx.store.track(v.mmsi, parseInput(trackLast, args.last ?? 20, 'last')),
  },
  TrackPoint: {
    position: coordinates,
    speedOverGround: (p: TrackPointRecord) => p.sog,
    courseOverGround: (p: TrackPointRecord) => p.cog,
    timestamp: (p: TrackPointRecord) => p.at,
  },
  SpeedZone: {
    center: (z: SpeedZone) => coordinates(z.center),
    radiusMeters: (z: SpeedZone) => z.radiusM,
  },
  SafetyVerification: {
    minSeparationMeters: (v: SafetyView) => v.minSeparationM,
    closestPair: (v: SafetyView) => v.closest,
  },
  SeparationViolation: {
    vesselA: (v: SeparationViolation, _: unknown, ctx: OptimizationContext) => vesselOrFail(ctx, v.a),
    vesselB: (v: SeparationViolation, _: unknown, ctx: OptimizationContext) => vesselOrFail(ctx, v.b),
    distanceMeters: (v: SeparationViolation) => v.distanceM,
  },
  SpeedViolation: {
    vessel: (v: SpeedViolation, _: unknown, ctx: OptimizationContext) => vesselOrFail(ctx, v.mmsi),
  },
  QuantumRun: {
    __resolveReference: (ref: { id: string }, ctx: OptimizationContext) => ctx.loaders.run.load(ref.id),
    status: (r: RunRecord) => upper(r.status),
    instance: (r: RunRecord) => ({ ...r.instance, edges: r.instance.edges.map((e) => ({ u: e.u, v: e.v, weight: e.w })) }),
    result: (r: RunRecord) => r.result,
  },
  RunResult: {
    energy: (r: JobResult) => r.expectedValue,
    optimalityRatio: (r: JobResult) => r.expectedRatio,
    bestSampleBits: (r: JobResult) => r.bestSample.bits,
    bestSampleEnergy: (r: JobResult) => r.bestSample.value,
  },
  Sample: { energy: (s: SampleSummary) => s.value },
  RefinedSolution: { energy: (s: { value: number }) => s.value },
  BaselineSolution: { energy: (s: { value: number }) => s.value },
  ExactOptimum: {
    energy: (o: JobResult['optimum']) => o.value,
    worstEnergy: (o: JobResult['optimum']) => o.worst,
  },
  QuantumRunEvent: {
    run: async (e: RunEventPayload, _: unknown, ctx: OptimizationContext) => {
      const run = await ctx.loaders.run.load(e.runId);
      if (!run) throw new Error(`run ${e.runId} is missing`);
      return run;
    },
    status: (e: RunEventPayload) => upper(e.status),
  },
  VesselPositionsEvent: {
    vessels: (e: { positions: VesselPosition[] }, _: unknown, ctx: OptimizationContext) => Promise.all(e.positions.map((p) => vesselOrFail(ctx, p.mmsi))),
  },
};

export const resolverMap = optimizationResolvers as unknown as GraphQLResolverMap<unknown>;
