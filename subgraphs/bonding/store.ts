import { randomBytes, randomUUID } from 'node:crypto';
import type { Database, Queryable } from '../../platform/db.js';
import { domainError } from '../../platform/errors.js';
import { appendEvents, type OutboxEvent } from '../../platform/outbox.js';
import { ownedBy, viewedTenant, type Owner, type Viewer } from '../../platform/ownership.js';
import { readingOnly, stateTag, unobservedWrite } from '../../platform/state-trace.js';
import { initialState, step, type PathSpec, type PathState } from './link-model.js';
import { STATE_TYPES, TOPICS, type KeySummary, type Overview, type SessionEventKind, type SessionEventPayload, type SessionRecord } from './records.js';
import { afterStep, initialPlanes, type Planes, type SessionState } from './state-machine.js';

/** A session's owner columns: its user is the principal. */
const USER_COLUMNS = { tenant: 'tenant', principal: 'user_id' };

const COLUMNS = `id, tenant, user_id AS "userId", state, state_reason AS "stateReason", seed, tick, model, planes,
  last_key AS "lastKey", created_at AS "createdAt", updated_at AS "updatedAt", closed_at AS "closedAt"`;

/** A well-formed session id: any other is no row's (the table's CHECK), so a read of it depends on nothing. */
const SESSION_ID = /^BS-[0-9a-f]{12}$/;

/** Runs `read` as reading only the sessions `ids`. */
const readingSessions = <T>(ids: readonly string[], read: () => Promise<T>): Promise<T> =>
  readingOnly(
    ids.filter((id) => SESSION_ID.test(id)).map((id) => stateTag.key(STATE_TYPES.session, id)),
    read,
  );

/** Runs `read` as reading only sessions of `tenant` (a user's are among them); null: every tenant's. */
const readingSessionsOf = <T>(tenant: string | null, read: () => Promise<T>): Promise<T> =>
  tenant === null ? read() : readingOnly([stateTag.owner(STATE_TYPES.session, tenant)], read);

export interface BondingStoreOptions {
  tickMs: number;
  simSecondsPerTick: number;
  sessionTtlSeconds: number;
  maxOpenSessionsPerUser: number;
  /** Called after a transaction that wrote events has committed (wakes the local event hub). */
  onEvents?: () => void;
}

export interface KeyRecordInput {
  sessionId: string;
  status: 'completed' | 'aborted';
  keyId: string | null;
  fingerprint: string | null;
  bits: number;
  qber: number;
  eavesdropperDetected: boolean;
  figures: Record<string, unknown>;
  reason: string;
  now: Date;
}

export class BondingStore {
  /** This instance, as lease owner. */
  readonly instanceId = randomUUID();

  constructor(
    private readonly db: Database,
    readonly options: BondingStoreOptions,
  ) {}

  private async transact<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    const result = await this.db.transaction(fn);
    this.options.onEvents?.();
    return result;
  }

  async eventCursor(): Promise<string> {
    const res = await this.db.query<{ id: string | null }>('SELECT max(id)::text AS id FROM outbox');
    return res.rows[0]?.id ?? '0';
  }

  /** The sessions among `ids` that `viewer` may see (another user's are left out, as unknown ids are). */
  async sessionsByIds(ids: readonly string[], viewer: Viewer): Promise<SessionRecord[]> {
    const params: unknown[] = [[...ids]];
    // Depends on each session asked for, found or not.
    const res = await readingSessions(ids, () =>
      this.db.query<SessionRecord>(
        `SELECT ${COLUMNS} FROM bonding_sessions WHERE id = ANY($1) AND ${ownedBy(viewer, 'principal', params, USER_COLUMNS)}`,
        params,
      ),
    );
    return res.rows;
  }

  /** The user's newest open session, else the newest one. */
  async currentSession(user: Owner): Promise<SessionRecord | null> {
    const res = await readingSessionsOf(user.tenant, () =>
      this.db.query<SessionRecord>(
        `SELECT ${COLUMNS} FROM bonding_sessions WHERE tenant = $1 AND user_id = $2
         ORDER BY (state <> 'closed') DESC, created_at DESC, id DESC LIMIT 1`,
        [user.tenant, user.principal],
      ),
    );
    return res.rows[0] ?? null;
  }

  async sessions(user: Owner, first: number): Promise<SessionRecord[]> {
    const res = await readingSessionsOf(user.tenant, () =>
      this.db.query<SessionRecord>(`SELECT ${COLUMNS} FROM bonding_sessions WHERE tenant = $1 AND user_id = $2 ORDER BY created_at DESC, id DESC LIMIT $3`, [
        user.tenant,
        user.principal,
        first,
      ]),
    );
    return res.rows;
  }

  /** Open sessions by state: the viewer's tenant's (every tenant's for an operator), never another's count. */
  async overview(viewer: Viewer): Promise<Overview> {
    const params: unknown[] = [];
    const res = await readingSessionsOf(viewedTenant(viewer), () =>
      this.db.query<{ state: SessionState; n: number }>(
        `SELECT state, count(*) AS n FROM bonding_sessions WHERE state <> 'closed' AND ${ownedBy(viewer, 'tenant', params, USER_COLUMNS)} GROUP BY state`,
        params,
      ),
    );
    const by = Object.fromEntries(res.rows.map((r) => [r.state, r.n])) as Partial<Record<SessionState, number>>;
    return {
      openSessions: res.rows.reduce((s, r) => s + r.n, 0),
      negotiating: by.negotiating ?? 0,
      bonded: by.bonded ?? 0,
      degraded: by.degraded ?? 0,
      down: by.down ?? 0,
    };
  }

  /**
   * Starts a session. The per-user cap is checked under a per-user advisory lock, so concurrent starts
   * of one user cannot together pass it.
   */
  async startSession(args: { user: Owner; seed: number; paths: readonly PathSpec[]; now: Date }): Promise<SessionRecord> {
    const { user, seed, paths, now } = args;
    const userId = user.principal;
    const id = `BS-${randomBytes(6).toString('hex')}`;
    const model = initialState(paths, seed);
    const at = now.toISOString();
    const planes = initialPlanes(paths.length, at);
    const reason = `probing ${paths.length} paths`;
    return this.transact(async (tx) => {
      await tx.query(`SELECT pg_advisory_xact_lock(hashtext('bonding.user:' || $1 || '/' || $2))`, [user.tenant, userId]);
      const open = await tx.query<{ n: number }>(`SELECT count(*) AS n FROM bonding_sessions WHERE tenant = $1 AND user_id = $2 AND state <> 'closed'`, [
        user.tenant,
        userId,
      ]);
      const count = open.rows[0]?.n ?? 0;
      if (count >= this.options.maxOpenSessionsPerUser) {
        throw domainError(
          'CONFLICT',
          `User ${userId} already has ${count} open bonding sessions (at most ${this.options.maxOpenSessionsPerUser}); close one first`,
        );
      }
      const res = await tx.query<SessionRecord>(
        `INSERT INTO bonding_sessions (id, tenant, user_id, state, state_reason, seed, tick, model, planes, next_tick_at,
           last_activity_at, created_at, updated_at)
         VALUES ($1, $8, $2, 'negotiating', $3, $4, 0, $5, $6, $7, $7, $7, $7)
         RETURNING ${COLUMNS}`,
        [id, userId, reason, seed, JSON.stringify(model), JSON.stringify(planes), now, user.tenant],
      );
      await appendEvents(tx, [event(res.rows[0]!, 'started', 'negotiating', null, 0, reason, model.paths, at)]);
      return res.rows[0]!;
    });
  }

  async closeSession(id: string, viewer: Viewer, now: Date): Promise<SessionRecord> {
    return this.transact(async (tx) => {
      const params: unknown[] = [id];
      const current = await tx.query<SessionRecord>(
        `SELECT ${COLUMNS} FROM bonding_sessions WHERE id = $1 AND ${ownedBy(viewer, 'principal', params, USER_COLUMNS)} FOR UPDATE`,
        params,
      );
      const row = current.rows[0];
      if (!row) throw domainError('NOT_FOUND', `Bonding session ${id} not found`);
      if (row.state === 'closed') throw domainError('CONFLICT', `Bonding session ${id} is already closed`);
      return this.close(tx, row, 'closed on request', now);
    });
  }

  private async close(tx: Queryable, row: SessionRecord, reason: string, now: Date): Promise<SessionRecord> {
    const at = now.toISOString();
    const planes: Planes = {
      ...row.planes,
      control: { health: 'ok', lastAction: `${row.state} -> closed: ${reason}`, lastActionAt: at },
      data: { health: row.planes.data.health, lastAction: 'traffic stopped: session closed', lastActionAt: at },
    };
    const res = await tx.query<SessionRecord>(
      `UPDATE bonding_sessions SET state = 'closed', state_reason = $2, planes = $3, closed_at = $4, updated_at = $4,
         lease_owner = NULL, lease_until = NULL
       WHERE id = $1 AND state <> 'closed' RETURNING ${COLUMNS}`,
      [row.id, reason, JSON.stringify(planes), now],
    );
    if (res.rowCount !== 1) throw domainError('CONFLICT', `Bonding session ${row.id} is already closed`);
    await appendEvents(tx, [event(row, 'closed', 'closed', row.state, row.tick, reason, row.model.paths, at)]);
    return res.rows[0]!;
  }

  /** Looks a session up for key generation: 404 unknown, 409 closed. */
  async requireOpenSession(id: string, viewer: Viewer): Promise<SessionRecord> {
    const [row] = await this.sessionsByIds([id], viewer);
    if (!row) throw domainError('NOT_FOUND', `Bonding session ${id} not found`);
    if (row.state === 'closed') throw domainError('CONFLICT', `Bonding session ${id} is closed`);
    return row;
  }

  /** Records a key generation on its session: figures, the security plane, an event; one transaction. */
  async recordKey(input: KeyRecordInput, viewer: Viewer): Promise<SessionRecord> {
    const at = input.now.toISOString();
    const keyId = `KG-${randomBytes(8).toString('hex')}`;
    return this.transact(async (tx) => {
      const params: unknown[] = [input.sessionId];
      const current = await tx.query<SessionRecord>(
        `SELECT ${COLUMNS} FROM bonding_sessions WHERE id = $1 AND ${ownedBy(viewer, 'principal', params, USER_COLUMNS)} FOR UPDATE`,
        params,
      );
      const row = current.rows[0];
      if (!row) throw domainError('NOT_FOUND', `Bonding session ${input.sessionId} not found`);
      if (row.state === 'closed') throw domainError('CONFLICT', `Bonding session ${input.sessionId} is closed`);
      await tx.query(
        `INSERT INTO bonding_keys (id, session_id, status, key_id, fingerprint, bits, qber, eavesdropper_detected, figures, created_at, tenant, principal)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
        [
          keyId,
          input.sessionId,
          input.status,
          input.keyId,
          input.fingerprint,
          input.bits,
          input.qber,
          input.eavesdropperDetected,
          JSON.stringify(input.figures),
          input.now,
          row.tenant,
          row.userId,
        ],
      );
      const summary: KeySummary = {
        keyId: input.keyId,
        status: input.status,
        fingerprint: input.fingerprint,
        bits: input.bits,
        qber: input.qber,
        eavesdropperDetected: input.eavesdropperDetected,
        createdAt: at,
      };
      const qber = `${(input.qber * 100).toFixed(2)}%`;
      const security =
        input.status === 'completed'
          ? { health: 'ok' as const, lastAction: `distilled a ${input.bits}-bit hybrid key ${input.keyId} (QBER ${qber})`, lastActionAt: at }
          : {
              health: input.eavesdropperDetected ? ('critical' as const) : ('degraded' as const),
              lastAction: `aborted key generation: ${input.reason}`,
              lastActionAt: at,
            };
      const planes: Planes = { ...row.planes, security };
      const res = await tx.query<SessionRecord>(
        `UPDATE bonding_sessions SET last_key = $2, planes = $3, last_activity_at = $4, updated_at = $4
         WHERE id = $1 RETURNING ${COLUMNS}`,
        [row.id, JSON.stringify(summary), JSON.stringify(planes), input.now],
      );
      const recorded = event(row, 'key', row.state, null, row.tick, security.lastAction, row.model.paths, at);
      const keyTags = [stateTag.collection(STATE_TYPES.key), stateTag.key(STATE_TYPES.key, keyId), stateTag.owner(STATE_TYPES.key, row.tenant)];
      await appendEvents(tx, [{ ...recorded, tags: [...recorded.tags, ...keyTags] }]);
      return res.rows[0]!;
    });
  }

  /**
   * One round of the link model on this instance: claim the open sessions whose lease is free (or ours),
   * then step each one that is due. A step locks the row, checks the lease, and writes with
   * `tick = expected`, so a step is applied once even if two instances ever both believed they held the
   * lease; the row lock keeps them from computing it on the same state at once.
   */
  async runLinkModel(now: Date): Promise<number> {
    // No open session is the common case. A read says so (on the embedded database from its read cache,
    // until the next write), where the claim below is a write that would drop that cache every tick.
    const open = await this.db.query(`SELECT 1 FROM bonding_sessions WHERE state <> 'closed' LIMIT 1`);
    if (open.rows.length === 0) return 0;
    const leaseMs = Math.max(3 * this.options.tickMs, 2000);
    // A lease (`lease_owner`, `lease_until`) is no read's answer: claiming one needs no event.
    const claimed = await unobservedWrite(() =>
      this.db.query<{ id: string }>(
        `UPDATE bonding_sessions SET lease_owner = $1, lease_until = $2
         WHERE id IN (
           SELECT id FROM bonding_sessions
           WHERE state <> 'closed' AND (lease_owner = $1 OR lease_until IS NULL OR lease_until < $3)
           ORDER BY id LIMIT 1000 FOR UPDATE SKIP LOCKED)
         RETURNING id`,
        [this.instanceId, new Date(now.getTime() + leaseMs), now],
      ),
    );
    let stepped = 0;
    for (const { id } of claimed.rows) if (await this.stepSession(id, now)) stepped++;
    return stepped;
  }

  /** Steps one session if this instance holds its lease and it is due; false otherwise. */
  async stepSession(id: string, now: Date): Promise<boolean> {
    return this.transact(async (tx) => {
      const res = await tx.query<SessionRecord & { nextTickAt: Date; lastActivityAt: Date }>(
        `SELECT ${COLUMNS}, next_tick_at AS "nextTickAt", last_activity_at AS "lastActivityAt" FROM bonding_sessions
         WHERE id = $1 AND lease_owner = $2 AND state <> 'closed' AND next_tick_at <= $3 FOR UPDATE`,
        [id, this.instanceId, now],
      );
      const row = res.rows[0];
      if (!row) return false;
      if (now.getTime() - new Date(row.lastActivityAt).getTime() > this.options.sessionTtlSeconds * 1000) {
        await this.close(tx, row, `no activity for ${this.options.sessionTtlSeconds} s`, now);
        return true;
      }
      const at = now.toISOString();
      const { state: model, changes } = step(row.model, this.options.simSecondsPerTick);
      const outcome = afterStep(row, model.paths, changes, at);
      const tick = row.tick + 1;
      const updated = await tx.query(
        `UPDATE bonding_sessions SET tick = $3, model = $4, state = $5, state_reason = $6, planes = $7, updated_at = $8,
           next_tick_at = $9
         WHERE id = $1 AND tick = $2 AND state <> 'closed'`,
        [
          id,
          row.tick,
          tick,
          JSON.stringify(model),
          outcome.state,
          outcome.reason,
          JSON.stringify(outcome.planes),
          now,
          new Date(now.getTime() + this.options.tickMs),
        ],
      );
      if (updated.rowCount !== 1) return false;
      const events: OutboxEvent[] = [];
      if (outcome.state !== row.state) {
        events.push(event(row, 'state', outcome.state, row.state, tick, outcome.reason, model.paths, at, this.instanceId));
      }
      const what = changes.map((c) => `${c.pathId ?? c.group} ${c.change}`).join(', ');
      events.push(event(row, 'metrics', outcome.state, null, tick, what || 'metrics moved', model.paths, at, this.instanceId));
      await appendEvents(tx, events);
      return true;
    });
  }
}

/**
 * A session's events are its user's alone (operators see every session's); each says, for the state
 * caches, that it changed the sessions, this one and its tenant's.
 */
function event(
  session: { id: string; tenant: string; userId: string },
  kind: SessionEventKind,
  state: SessionState,
  previousState: SessionState | null,
  tick: number,
  reason: string,
  paths: PathState[],
  at: string,
  runner?: string,
): OutboxEvent<SessionEventPayload> {
  const sessionId = session.id;
  return {
    topic: TOPICS.session,
    key: sessionId,
    audience: { owner: { tenant: session.tenant, principal: session.userId }, grain: 'principal' },
    payload: { sessionId, kind, state, previousState, tick, reason, paths, at, ...(runner ? { runner } : {}) },
    tags: [stateTag.collection(STATE_TYPES.session), stateTag.key(STATE_TYPES.session, sessionId), stateTag.owner(STATE_TYPES.session, session.tenant)],
  };
}
