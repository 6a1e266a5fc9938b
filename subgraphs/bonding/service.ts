import { randomBytes } from 'node:crypto';
import type { z } from 'zod';
import { domainError } from '../../platform/errors.js';
import { viewerOf, type Owner } from '../../platform/ownership.js';
import { isOperator, samePrincipal, type Principal } from '../../platform/principal.js';
import { Random } from '../../platform/random.js';
import { QBER_ABORT_THRESHOLD, CryptoSource, runBb84 } from './bb84.js';

const upper = <T extends string>(s: T) => s.toUpperCase() as Uppercase<T>;
import { fingerprint, hybridKey, mlKemExchange } from './hybrid.js';
import { SANDBOX_USER, type quantumKeyInput, type startArgs } from './inputs.js';
import { DEFAULT_TOPOLOGY } from './link-model.js';
import type { Overview, SessionRecord } from './records.js';
import type { BondingStore } from './store.js';

/*
 * The bonding rules: whose a session is and who may act on it, and how a key is distilled (BB84 over the
 * session's simulated link, combined with an ML-KEM-768 exchange by HKDF). Resolvers call this service; it
 * reads and writes through the store (subgraphs/bonding/store.ts), which holds the SQL.
 */

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

export class BondingService {
  constructor(
    private readonly store: BondingStore,
    /** No credential configured at all: the demo principal acts as any user, as the sandbox always has. */
    private readonly demoMode: boolean,
  ) {}

  /** Starts a session for the acting user (`actingUser`), on the paths given or the default topology. */
  startSession(input: z.infer<typeof startArgs>, principal: Principal, now: Date): Promise<SessionRecord> {
    const seed = input.seed ?? randomBytes(4).readUInt32LE(0) % 2_147_483_648;
    const paths = input.paths?.map((p) => ({ id: p.id, kind: p.kind, sharedRisk: p.sharedRisk ?? [] })) ?? DEFAULT_TOPOLOGY;
    return this.store.startSession({ user: actingUser(principal, input.userId, this.demoMode), seed, paths, now });
  }

  /** The user a request acts as (`actingUser`). */
  actingAs(principal: Principal, requested: string | null | undefined): Owner {
    return actingUser(principal, requested, this.demoMode);
  }

  /** The sessions among `ids` the principal may see (another user's are left out, as unknown ids are). */
  sessionsByIds(ids: readonly string[], principal: Principal): Promise<SessionRecord[]> {
    return this.store.sessionsByIds(ids, viewerOf(principal));
  }

  /** The acting user's newest open session, else their newest one. */
  currentSession(user: Owner): Promise<SessionRecord | null> {
    return this.store.currentSession(user);
  }

  /** The newest `first` sessions of the user the request acts as (`actingUser`). */
  sessions(principal: Principal, requested: string | null | undefined, first: number): Promise<SessionRecord[]> {
    return this.store.sessions(actingUser(principal, requested, this.demoMode), first);
  }

  /** Open sessions by state as the principal may count them, and the link model's pace. */
  async overview(principal: Principal): Promise<Overview & { tickMs: number; simulatedSecondsPerTick: number }> {
    const counts = await this.store.overview(viewerOf(principal));
    return { ...counts, tickMs: this.store.options.tickMs, simulatedSecondsPerTick: this.store.options.simSecondsPerTick };
  }

  eventCursor(): Promise<string> {
    return this.store.eventCursor();
  }

  closeSession(id: string, principal: Principal, now: Date): Promise<SessionRecord> {
    return this.store.closeSession(id, viewerOf(principal), now);
  }

  /**
   * Distils a key on a session: unknown or another tenant's (404), not the caller's own (403: an operator
   * sees it, but keys are the user's), or closed (409), before any work.
   */
  async generateKey(input: z.infer<typeof quantumKeyInput>, principal: Principal, now: Date) {
    // Unknown or another's (404), not the caller's own (403: an operator sees it, but keys are the
    // user's), or closed (409), before any work.
    const visible = await this.store.sessionsByIds([input.sessionId], viewerOf(principal)).then((rows) => rows[0] ?? null);
    if (!visible) throw domainError('NOT_FOUND', `Bonding session ${input.sessionId} not found`);
    if (!owns(principal, visible, this.demoMode)) {
      throw domainError('FORBIDDEN', `Bonding session ${input.sessionId} is ${visible.userId}'s: only its own user distils keys on it`);
    }
    await this.store.requireOpenSession(input.sessionId, viewerOf(principal));
    const started = performance.now();
    const seeded = input.seed !== null && input.seed !== undefined;
    const rng = seeded ? new Random(input.seed!, 'bb84') : new CryptoSource();
    const run = runBb84({ bits: input.bits, noise: input.noise ?? 0.02, interceptFraction: input.interceptFraction ?? 0, rng });
    let key: Uint8Array | null = null;
    let keyId: string | null = null;
    if (run.status === 'completed' && run.key) {
      const kemRng = seeded ? new Random(input.seed!, 'ml-kem') : null;
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
    await this.store.recordKey(
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
        now: now,
      },
      viewerOf(principal),
    );
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
      createdAt: now,
      elapsedMs: Math.round((performance.now() - started) * 100) / 100,
    };
  }
}
