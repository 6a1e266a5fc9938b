import { domainError } from '../../platform/errors.js';
import { mapEvents } from '../../platform/event-hub.js';
import { viewerOf } from '../../platform/ownership.js';
import { DateTimeScalar } from '../../platform/scalars.js';
import { currentTrace } from '../../platform/state-trace.js';
import { parseInput } from '../../platform/validate.js';
import { RiskModel, defaultGroupOutage } from './correlation.js';
import {
  constraints as constraintsSchema,
  kindToEnum,
  quantumKeyInput,
  recommendArgs,
  sessionId as sessionIdSchema,
  sessionsArgs,
  startArgs,
  userId as userIdSchema,
} from './inputs.js';
import { recommend, type Recommendation } from './recommend.js';
import { TOPICS, type SessionEventPayload, type SessionRecord } from './records.js';
import { ownOutageOf } from './state-machine.js';
import { createLoaders, type BondingContext, type EventView } from './context.js';
import type { Resolvers } from './schema-types.js';

const KEY_SOURCE = 'BB84 simulated in software (no quantum hardware) + ML-KEM-768 (FIPS 203), combined by HKDF-SHA256';
/** An internal lower-case value as its GraphQL enum value. */
const upper = <T extends string>(s: T) => s.toUpperCase() as Uppercase<T>;
const RECOMMEND_METHOD =
  'exact: every pair of usable paths, in order of marginal outage, skipping only pairs whose bound p_i * p_j already exceeds the runner-up';

function withTiming(rec: Recommendation, started: number) {
  return { ...rec, method: RECOMMEND_METHOD, elapsedMs: Math.round((performance.now() - started) * 1000) / 1000 };
}

function sessionRecommendation(session: SessionRecord, constraints: unknown) {
  const c = parseInput(constraintsSchema.nullish(), constraints, 'constraints') ?? {};
  const started = performance.now();
  return withTiming(
    recommend(
      session.model.paths.map((p) => ({ ...p, ownOutage: ownOutageOf(p) })),
      c,
    ),
    started,
  );
}

export const bondingResolvers: Resolvers = {
  DateTime: DateTimeScalar,
  Query: {
    bondingSession: (_, args, ctx) => ctx.loaders.session.load(parseInput(sessionIdSchema, args.id, 'id')),
    currentBondingSession: async (_, args, ctx) => {
      const requested = parseInput(userIdSchema.nullish(), args.userId, 'userId');
      const userId = ctx.service.actingAs(ctx.principal, requested);
      const id = parseInput(sessionIdSchema.nullish(), args.sessionId, 'sessionId');
      if (!id) return ctx.service.currentSession(userId);
      const session = await ctx.loaders.session.load(id);
      return session && (!requested || (session.userId === userId.principal && session.tenant === userId.tenant)) ? session : null;
    },
    bondingSessions: (_, args, ctx) => {
      const { userId, first } = parseInput(sessionsArgs, { userId: args.userId, first: args.first ?? 20 });
      return ctx.service.sessions(ctx.principal, userId, first);
    },
    recommendPaths: (_, args) => {
      const input = parseInput(recommendArgs, args);
      const started = performance.now();
      const groups = new Map((input.riskGroups ?? []).map((g) => [g.id, g.outageProbability]));
      const paths = input.paths.map((p) => ({
        id: p.id,
        latencyMs: p.latencyMs,
        jitterMs: p.jitterMs ?? 0,
        lossPct: p.lossPct,
        capacityMbps: p.capacityMbps,
        up: p.up ?? true,
        ownOutage: p.outageProbability ?? ownOutageOf({ kind: p.kind! }),
        sharedRisk: p.sharedRisk ?? [],
      }));
      const rec = recommend(paths, input.constraints ?? {}, (name) => groups.get(name) ?? defaultGroupOutage(name));
      return withTiming(rec, started);
    },
    bondingOverview: async (_, __, ctx) => ({ ...(await ctx.service.overview(ctx.principal)), keySource: KEY_SOURCE }),
    bondingEventCursor: (_, __, ctx) => ctx.service.eventCursor(),
  },
  Mutation: {
    startBondingSession: async (_, args, ctx) => {
      const input = parseInput(startArgs, args);
      const session = await ctx.service.startSession(input, ctx.principal, ctx.now);
      ctx.loaders.session.prime(session.id, session);
      return session;
    },
    closeBondingSession: async (_, args, ctx) => {
      const id = parseInput(sessionIdSchema, args.id, 'id');
      if (!(await ctx.loaders.session.load(id))) throw domainError('NOT_FOUND', `Bonding session ${id} not found`);
      const session = await ctx.service.closeSession(id, ctx.principal, ctx.now);
      ctx.loaders.session.clear(session.id).prime(session.id, session);
      return session;
    },
    generateQuantumKey: async (_, args, ctx) => {
      const input = parseInput(quantumKeyInput, args.input);
      const key = await ctx.service.generateKey(input, ctx.principal, ctx.now);
      ctx.loaders.session.clear(input.sessionId);
      return key;
    },
  },
  Subscription: {
    bondingSessionUpdated: {
      subscribe: async (_, args, ctx) => {
        const after = await ctx.events.resumeCursor(args.after, TOPICS.session);
        const id = parseInput(sessionIdSchema, args.sessionId, 'sessionId');
        const session = await ctx.loaders.session.load(id);
        if (!session) throw domainError('NOT_FOUND', `Bonding session ${id} not found`);
        const stream = ctx.events.stream<SessionEventPayload>(TOPICS.session, { after, keys: [id], viewer: viewerOf(ctx.principal) });
        return mapEvents(
          stream,
          (e) => ({ bondingSessionUpdated: { ...e.payload, cursor: e.id } }),
          (e) => e.payload.kind === 'closed',
        );
      },
      resolve: (payload: { bondingSessionUpdated: EventView }, _: unknown, ctx: BondingContext) => {
        ctx.now = ctx.clock.now();
        ctx.loaders = createLoaders(ctx.service, ctx.principal);
        return payload.bondingSessionUpdated;
      },
    },
  },
  BondingSession: {
    __resolveReference: (ref, ctx) => ctx.loaders.session.load(parseInput(sessionIdSchema, ref.id, 'id')),
    state: (s) => upper(s.state),
    simulatedSeconds: (s) => s.model.simSeconds,
    paths: (s) => s.model.paths,
    planes: (s) => s.planes,
    recommendation: (s, args) => sessionRecommendation(s, args.constraints),
    correlation: (s) => {
      const model = new RiskModel(s.model.paths.map((p) => ({ id: p.id, ownOutage: ownOutageOf(p), sharedRisk: p.sharedRisk })));
      return { pathIds: s.model.paths.map((p) => p.id), matrix: model.matrix().map((row) => row.map((x) => Math.round(x * 1e6) / 1e6)) };
    },
    lastKey: (s) => s.lastKey,
  },
  PathRecommendation: {
    // A measurement of the computation that made this answer: an answer selecting it is not kept.
    elapsedMs: (r) => {
      currentTrace()?.refuse('elapsedMs measures one computation');
      return r.elapsedMs;
    },
  },
  BondPath: {
    kind: (p) => kindToEnum(p.kind),
    outageProbability: (p) => new RiskModel([{ id: p.id, ownOutage: ownOutageOf(p), sharedRisk: p.sharedRisk }]).outage(0),
  },
  Plane: {
    health: (p) => upper(p.health),
  },
  QuantumKeySummary: {
    status: (k) => upper(k.status),
  },
  BondingSessionEvent: {
    kind: (e) => upper(e.kind),
    state: (e) => upper(e.state),
    previousState: (e) => (e.previousState ? upper(e.previousState) : null),
    session: async (e, _, ctx) => {
      const s = await ctx.loaders.session.load(e.sessionId);
      if (!s) throw new Error(`session ${e.sessionId} is missing`);
      return s;
    },
  },
};
