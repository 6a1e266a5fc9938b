import { randomBytes } from 'node:crypto';
import { domainError } from '../../platform/errors.js';
import { mapEvents } from '../../platform/event-hub.js';
import { viewerOf, type Owner } from '../../platform/ownership.js';
import { isOperator, samePrincipal, type Principal } from '../../platform/principal.js';
import { DateTimeScalar } from '../../platform/scalars.js';
import { parseInput } from '../../platform/validate.js';
import { QBER_ABORT_THRESHOLD, CryptoSource, runBb84 } from './bb84.js';
import { RiskModel, defaultGroupOutage } from './correlation.js';
import { fingerprint, hybridKey, mlKemExchange } from './hybrid.js';
import {
  SANDBOX_USER,
  constraints as constraintsSchema,
  kindToEnum,
  quantumKeyInput,
  recommendArgs,
  sessionId as sessionIdSchema,
  sessionsArgs,
  startArgs,
  userId as userIdSchema,
} from './inputs.js';
import { DEFAULT_TOPOLOGY } from './link-model.js';
import { Random } from './random.js';
import { recommend, type Recommendation } from './recommend.js';
import { ownOutageOf } from './state-machine.js';
import { TOPICS, type SessionEventPayload, type SessionRecord } from './store.js';
import { createLoaders, type BondingContext, type EventView } from './context.js';
import type { Resolvers } from './schema-types.js';

/**
 * Keys are distilled on, and shown to, the session's own user only: the same name in the same tenant (in
 * demo mode, the demo principal is everyone).
 */
const owns = (principal: Principal, session: SessionRecord, demoMode: boolean) =>
  demoMode || samePrincipal(principal, { id: session.userId, tenant: session.tenant });

/**
 * The user a request acts as, in its tenant: the principal itself; a `userId` naming someone else only for
 * an operator (403 otherwise), who acts for that user of the operators' own tenant. Without one, an operator
 * acts for the sandbox user, as demo mode always has. `sandbox` is a reserved name no credential can claim.
 */
function actingUser(principal: Principal, requested: string | null | undefined, demoMode: boolean): Owner {
  const operator = demoMode || isOperator(principal);
  const as = (user: string): Owner => ({ tenant: principal.tenant, principal: user });
  if (requested === null || requested === undefined) return as(operator ? SANDBOX_USER : principal.id);
  if (operator || requested === principal.id) return as(requested);
  throw domainError('FORBIDDEN', `userId "${requested}" names another user: a session's user is the principal that starts it (${principal.id})`, [
    { field: 'userId', message: `must be your own principal (${principal.id}) or omitted` },
  ]);
}

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
      const userId = actingUser(ctx.principal, requested, ctx.demoMode);
      const id = parseInput(sessionIdSchema.nullish(), args.sessionId, 'sessionId');
      if (!id) return ctx.store.currentSession(userId);
      const session = await ctx.loaders.session.load(id);
      return session && (!requested || (session.userId === userId.principal && session.tenant === userId.tenant)) ? session : null;
    },
    bondingSessions: (_, args, ctx) => {
      const { userId, first } = parseInput(sessionsArgs, { userId: args.userId, first: args.first ?? 20 });
      return ctx.store.sessions(actingUser(ctx.principal, userId, ctx.demoMode), first);
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
    bondingOverview: async (_, __, ctx) => ({
      ...(await ctx.store.overview()),
      keySource: KEY_SOURCE,
      tickMs: ctx.store.options.tickMs,
      simulatedSecondsPerTick: ctx.store.options.simSecondsPerTick,
    }),
    bondingEventCursor: (_, __, ctx) => ctx.store.eventCursor(),
  },
  Mutation: {
    startBondingSession: async (_, args, ctx) => {
      const input = parseInput(startArgs, args);
      const seed = input.seed ?? randomBytes(4).readUInt32LE(0) % 2_147_483_648;
      const paths = input.paths?.map((p) => ({ id: p.id, kind: p.kind, sharedRisk: p.sharedRisk ?? [] })) ?? DEFAULT_TOPOLOGY;
      const session = await ctx.store.startSession({ user: actingUser(ctx.principal, input.userId, ctx.demoMode), seed, paths, now: ctx.now });
      ctx.loaders.session.prime(session.id, session);
      return session;
    },
    closeBondingSession: async (_, args, ctx) => {
      const id = parseInput(sessionIdSchema, args.id, 'id');
      if (!(await ctx.loaders.session.load(id))) throw domainError('NOT_FOUND', `Bonding session ${id} not found`);
      const session = await ctx.store.closeSession(id, viewerOf(ctx.principal), ctx.now);
      ctx.loaders.session.clear(session.id).prime(session.id, session);
      return session;
    },
    generateQuantumKey: async (_, args, ctx) => {
      const input = parseInput(quantumKeyInput, args.input);
      // Unknown or another's (404), not the caller's own (403: an operator sees it, but keys are the
      // user's), or closed (409), before any work.
      const visible = await ctx.loaders.session.load(input.sessionId);
      if (!visible) throw domainError('NOT_FOUND', `Bonding session ${input.sessionId} not found`);
      if (!owns(ctx.principal, visible, ctx.demoMode)) {
        throw domainError('FORBIDDEN', `Bonding session ${input.sessionId} is ${visible.userId}'s: only its own user distils keys on it`);
      }
      await ctx.store.requireOpenSession(input.sessionId, viewerOf(ctx.principal));
      const started = performance.now();
      const seeded = input.seed !== null && input.seed !== undefined;
      const rng = seeded ? Random.seeded(input.seed!, 'bb84') : new CryptoSource();
      const run = runBb84({ bits: input.bits, noise: input.noise ?? 0.02, interceptFraction: input.interceptFraction ?? 0, rng });
      let key: Uint8Array | null = null;
      let keyId: string | null = null;
      if (run.status === 'completed' && run.key) {
        const kemRng = seeded ? Random.seeded(input.seed!, 'ml-kem') : null;
        const kem = mlKemExchange(kemRng ? { keygen: kemRng.bytes(new Uint8Array(64)), encapsulation: kemRng.bytes(new Uint8Array(32)) } : undefined);
        key = hybridKey(run.key, kem.sharedSecret, input.bits, input.sessionId);
        keyId = `QK-${randomBytes(8).toString('hex')}`;
      }
      const print = key ? fingerprint(key) : null;
      const figures = {
        rawBits: run.rawBits,
        siftedBits: run.siftedBits,
        sampleBits: run.sampleBits,
        qber: run.qber,
        qberUpperBound: run.qberUpperBound,
        errorsCorrected: run.errorsCorrected,
        leakedBits: run.leakedBits,
        secureBits: run.secureBits,
        finalBits: key ? input.bits : 0,
        residualErrors: run.residualErrors,
        eavesdropperDetected: run.eavesdropperDetected,
        attempts: run.attempts,
      };
      await ctx.store.recordKey(
        {
          sessionId: input.sessionId,
          status: run.status,
          keyId,
          fingerprint: print,
          bits: input.bits,
          qber: run.qber,
          eavesdropperDetected: run.eavesdropperDetected,
          figures: { ...figures, reason: run.reason, noise: input.noise ?? 0.02, interceptFraction: input.interceptFraction ?? 0 },
          reason: run.reason,
          now: ctx.now,
        },
        viewerOf(ctx.principal),
      );
      ctx.loaders.session.clear(input.sessionId);
      return {
        sessionId: input.sessionId,
        status: upper(run.status),
        reason: run.reason,
        keyId,
        fingerprint: print,
        bits: input.bits,
        ...figures,
        qberThreshold: QBER_ABORT_THRESHOLD,
        kem: 'ML-KEM-768',
        kdf: 'HKDF-SHA256',
        // The key material goes to the session's own user, the only caller that gets this far.
        key: key ? Buffer.from(key).toString('hex') : null,
        simulated: true,
        createdAt: ctx.now,
        elapsedMs: Math.round((performance.now() - started) * 100) / 100,
      };
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
        ctx.loaders = createLoaders(ctx.store, ctx.principal);
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
