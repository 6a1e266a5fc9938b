import { randomUUID } from 'node:crypto';
import type { Database, Queryable } from '../../platform/db.js';
import { appendEvents, type OutboxEvent } from '../../platform/outbox.js';
import { viewedTenant, type Owner, type Viewer } from '../../platform/ownership.js';
import { currentTrace, readingOnly, stateTag, unobservedWrite } from '../../platform/state-trace.js';
import { generateFleet, positionAt, type VesselPosition, type VesselSpec, type VesselTrack, type VesselType } from './fleet.js';
import type { ProblemKind } from './instances.js';
import type { JobResult } from './job.js';
import {
  STATE_TYPES,
  TOPICS,
  type FleetClockRecord,
  type PositionsEventPayload,
  type RunEventPayload,
  type RunRecord,
  type RunStatePayload,
  type RunStatus,
  type TrackPointRecord,
  type VesselRecord,
} from './records.js';

/** Position rows kept per vessel (the track a client can ask for). */
const TRACK_HISTORY = 200;
const FLEET_LOCK = 7_231_004_201;
const RUN_LOCK = 7_231_004_202;

/** What a new run is given; the rest of its record is filled in as it runs. */
export type NewRun = Pick<
  RunRecord,
  'problem' | 'size' | 'qubits' | 'depth' | 'shots' | 'seed' | 'maxEvaluations' | 'refineTop' | 'fleetTick' | 'instance' | 'backend'
>;

/*
 * Every statement that writes a state table comes with an event tagged with what it changed
 * (platform/state-trace.ts), even one that turns out to change no row. So a write that may find nothing
 * to change (a run no longer running, a tick another instance recorded) first locks the rows it will
 * change (`FOR UPDATE`) and writes only when there are some.
 */

/** Fails the RUNNING runs (those whose lease expired, or all of them) and appends an event for each. */
async function failRunning(tx: Queryable, which: 'expired' | 'all', message: string): Promise<string[]> {
  const found = await tx.query<{ id: string }>(
    `SELECT id::text AS id FROM optimization_runs WHERE status = 'running' ${which === 'expired' ? 'AND lease_until < clock_timestamp()' : ''} FOR UPDATE`,
  );
  if (found.rows.length === 0) return [];
  const res = await tx.query<{ id: string; completed_at: Date | string; tenant: string; principal: string }>(
    `UPDATE optimization_runs SET status = 'failed', error = $1, completed_at = clock_timestamp(), lease_until = NULL
     WHERE id = ANY($2::uuid[]) AND status = 'running'
     RETURNING id::text AS id, completed_at, tenant, principal`,
    [message, found.rows.map((r) => r.id)],
  );
  await appendEvents(
    tx,
    res.rows.map((r) => runEvent(r.id, 'failed', iso(r.completed_at), r)),
  );
  return res.rows.map((r) => r.id);
}

/** The owner of run `id` when it is RUNNING, its row locked until the transaction ends; null otherwise. */
async function runningOwner(tx: Queryable, id: string): Promise<Owner | null> {
  const res = await tx.query<Owner>(`SELECT tenant, principal FROM optimization_runs WHERE id = $1 AND status = 'running' FOR UPDATE`, [id]);
  return res.rows[0] ?? null;
}

/** What a write of run `id` changed, as the state caches read it: the runs, that run, its tenant's runs. */
const runTags = (id: string, owner: Owner) => [
  stateTag.collection(STATE_TYPES.run),
  stateTag.key(STATE_TYPES.run, id),
  stateTag.owner(STATE_TYPES.run, owner.tenant),
];

/**
 * What a write of the fleet changed: its clock (one row) and every vessel whose rows (the vessel, its
 * positions) it wrote.
 */
const fleetTags = (mmsis: readonly string[]) => [
  stateTag.collection(STATE_TYPES.fleet),
  stateTag.key(STATE_TYPES.fleet, '1'),
  stateTag.collection(STATE_TYPES.vessel),
  ...mmsis.map((m) => stateTag.key(STATE_TYPES.vessel, m)),
];

const runAudience = (owner: Owner) => ({ owner: { tenant: owner.tenant, principal: owner.principal }, grain: 'tenant' as const });

/** A run's end: its tenant's alone to hear of (operators hear of every run). */
function runEvent(runId: string, status: RunStatus, at: string, owner: Owner): OutboxEvent<RunEventPayload> {
  return { topic: TOPICS.run, key: runId, payload: { runId, status, at }, audience: runAudience(owner), tags: runTags(runId, owner) };
}

/** A run recorded RUNNING: its tenant's alone to hear of; the state caches drop what read its tenant's runs. */
function runStartEvent(runId: string, owner: Owner): OutboxEvent<RunStatePayload> {
  return { topic: TOPICS.state, key: runId, payload: { runId }, audience: runAudience(owner), tags: runTags(runId, owner) };
}

/** Runs `read` as reading only the runs `viewer` may see: its tenant's (every tenant's for an operator). */
function readingRunsOf<T>(viewer: Viewer, read: () => Promise<T>): Promise<T> {
  const tenant = viewedTenant(viewer);
  return tenant === null ? read() : readingOnly([stateTag.owner(STATE_TYPES.run, tenant)], read);
}

/** Runs `read` as reading only the vessels `mmsis` (their rows and positions). */
const readingVessels = <T>(mmsis: readonly string[], read: () => Promise<T>): Promise<T> =>
  readingOnly(
    mmsis.map((m) => stateTag.key(STATE_TYPES.vessel, m)),
    read,
  );

const iso = (v: unknown) => (v instanceof Date ? v.toISOString() : new Date(String(v)).toISOString());

const VESSEL_COLUMNS = `v.mmsi, v.name, v.type, v.lane, p.latitude, p.longitude, p.sog, p.cog, p.heading, p.tick, p.at`;
interface VesselRow {
  mmsi: string;
  name: string;
  type: VesselType;
  lane: number;
  latitude: number;
  longitude: number;
  sog: number;
  cog: number;
  heading: number;
  tick: number;
  at: Date | string;
}
const vesselOf = (r: VesselRow): VesselRecord => ({ ...r, at: iso(r.at) });

const RUN_COLUMNS = `id::text AS id, seq::text AS seq, tenant, principal, status, problem, size, qubits, depth, shots, seed, max_evaluations, refine_top,
  fleet_tick, instance, backend, result, error, duration_ms, created_at, completed_at`;
interface RunRow {
  id: string;
  seq: string;
  tenant: string;
  principal: string;
  status: RunStatus;
  problem: ProblemKind;
  size: number;
  qubits: number;
  depth: number;
  shots: number;
  seed: number;
  max_evaluations: number;
  refine_top: number;
  fleet_tick: number | null;
  instance: RunRecord['instance'];
  backend: string;
  result: JobResult | null;
  error: string | null;
  duration_ms: number | null;
  created_at: Date | string;
  completed_at: Date | string | null;
}
const runOf = (r: RunRow): RunRecord => ({
  id: r.id,
  seq: r.seq,
  tenant: r.tenant,
  principal: r.principal,
  status: r.status,
  problem: r.problem,
  size: r.size,
  qubits: r.qubits,
  depth: r.depth,
  shots: r.shots,
  seed: r.seed,
  maxEvaluations: r.max_evaluations,
  refineTop: r.refine_top,
  fleetTick: r.fleet_tick,
  instance: r.instance,
  backend: r.backend,
  result: r.result,
  error: r.error,
  durationMs: r.duration_ms,
  createdAt: iso(r.created_at),
  completedAt: r.completed_at === null ? null : iso(r.completed_at),
});

export interface StoreOptions {
  seed: number;
  size: number;
  tickMs: number;
  /** Milliseconds a run's lease lasts; its owner renews it (RunService), an expired one is failed. */
  leaseMs: number;
  /** This process, as the owner of the runs it computes. */
  owner: string;
  onEvents: () => void;
}

/** All SQL of the optimization subgraph. */
export class OptimizationStore {
  private specs: VesselSpec[] = [];

  private constructor(
    private readonly db: Database,
    readonly options: StoreOptions,
  ) {}

  /** Creates the fleet on first start (seeded, tick 0), under a lock so concurrent instances create it once. */
  static async open(db: Database, options: StoreOptions, now: Date): Promise<OptimizationStore> {
    const store = new OptimizationStore(db, options);
    await db.transaction(async (tx) => {
      await tx.query('SELECT pg_advisory_xact_lock($1)', [FLEET_LOCK]);
      const existing = await tx.query('SELECT 1 FROM optimization_fleet WHERE id = 1');
      if (existing.rowCount > 0) return;
      const specs = generateFleet(options.seed, options.size);
      await tx.query('INSERT INTO optimization_fleet (id, seed, size, tick, updated_at) VALUES (1, $1, $2, 0, $3)', [options.seed, options.size, now]);
      await tx.query(
        `INSERT INTO optimization_vessels (mmsi, name, type, lane, track)
         SELECT v.mmsi, v.name, v.type, v.lane, v.track FROM jsonb_to_recordset($1::jsonb) AS v(mmsi text, name text, type text, lane int, track jsonb)`,
        [JSON.stringify(specs.map((s) => ({ mmsi: s.mmsi, name: s.name, type: s.type, lane: s.track.lane, track: s.track })))],
      );
      const positions = specs.map((s) => positionAt(s, now));
      await insertPositions(tx, positions, 0, now);
      // The fleet's first positions (tick 0), as every tick's are announced.
      const payload: PositionsEventPayload = { tick: 0, at: now.toISOString(), positions };
      await appendEvents(tx, [{ topic: TOPICS.positions, payload, audience: 'everyone', tags: fleetTags(specs.map((s) => s.mmsi)) }]);
    });
    const rows = await db.query<{ mmsi: string; name: string; type: VesselType; track: VesselTrack }>(
      'SELECT mmsi, name, type, track FROM optimization_vessels ORDER BY mmsi',
    );
    store.specs = rows.rows;
    // Embedded: the data directory has one writer, this process, so every run still RUNNING was lost
    // with the process before it. Failed at once, not after a lease.
    if (db.kind === 'pglite') await store.failRunsLeftRunning();
    return store;
  }

  /**
   * Builds every vessel's speed profile (cached by track), so the first tick does not stall the loop
   * building them: the subgraph's warm-up, after the server listens (50 ms of a start).
   */
  warmProfiles(now: Date): void {
    for (const spec of this.specs) positionAt(spec, now);
  }

  async fleetClock(): Promise<FleetClockRecord> {
    const res = await this.db.query<{ seed: number; size: number; tick: number; updated_at: Date | string }>(
      'SELECT seed, size, tick, updated_at FROM optimization_fleet WHERE id = 1',
    );
    const r = res.rows[0]!;
    return { seed: r.seed, size: r.size, tick: r.tick, updatedAt: iso(r.updated_at) };
  }

  /**
   * One simulation step: records every vessel's position at `now` as the next tick. Conditional on the
   * tick it read and on the interval having passed, so instances sharing the database tick once.
   */
  async tick(now: Date): Promise<number | null> {
    const ticked = await this.db.transaction(async (tx) => {
      const due = await tx.query<{ tick: number }>(
        `SELECT tick FROM optimization_fleet
         WHERE id = 1 AND updated_at <= $1::timestamptz - make_interval(secs => $2::double precision / 1000.0 * 0.9)
         FOR UPDATE`,
        [now, this.options.tickMs],
      );
      if (due.rows.length === 0) return null;
      const tick = due.rows[0]!.tick + 1;
      await tx.query('UPDATE optimization_fleet SET tick = $2, updated_at = $1 WHERE id = 1', [now, tick]);
      const positions = this.specs.map((s) => positionAt(s, now));
      await insertPositions(tx, positions, tick, now);
      await tx.query('DELETE FROM optimization_positions WHERE tick <= $1', [tick - TRACK_HISTORY]);
      const payload: PositionsEventPayload = { tick, at: now.toISOString(), positions };
      // The fleet is everyone's: every subscriber receives its positions.
      await appendEvents(tx, [{ topic: TOPICS.positions, payload, audience: 'everyone', tags: fleetTags(this.specs.map((s) => s.mmsi)) }]);
      return tick;
    });
    if (ticked !== null) this.options.onEvents();
    return ticked;
  }

  /** Every vessel at the newest tick, by MMSI. */
  async snapshot(): Promise<{ clock: FleetClockRecord; vessels: VesselRecord[] }> {
    return this.db.transaction(async (tx) => {
      const clock = await tx.query<{ seed: number; size: number; tick: number; updated_at: Date | string }>(
        'SELECT seed, size, tick, updated_at FROM optimization_fleet WHERE id = 1',
      );
      const c = clock.rows[0]!;
      const rows = await tx.query<VesselRow>(
        `SELECT ${VESSEL_COLUMNS} FROM optimization_vessels v JOIN optimization_positions p ON p.mmsi = v.mmsi AND p.tick = $1 ORDER BY v.mmsi`,
        [c.tick],
      );
      return { clock: { seed: c.seed, size: c.size, tick: c.tick, updatedAt: iso(c.updated_at) }, vessels: rows.rows.map(vesselOf) };
    });
  }

  /** The newest position of each vessel asked for. */
  async vesselsByMmsi(mmsis: readonly string[]): Promise<VesselRecord[]> {
    const res = await readingVessels(mmsis, () =>
      this.db.query<VesselRow>(
        `SELECT DISTINCT ON (v.mmsi) ${VESSEL_COLUMNS} FROM optimization_vessels v JOIN optimization_positions p ON p.mmsi = v.mmsi
         WHERE v.mmsi = ANY($1) ORDER BY v.mmsi, p.tick DESC`,
        [[...mmsis]],
      ),
    );
    return res.rows.map(vesselOf);
  }

  async track(mmsi: string, last: number): Promise<TrackPointRecord[]> {
    const res = await readingVessels([mmsi], () =>
      this.db.query<Omit<VesselRow, 'name' | 'type' | 'lane'>>(
        `SELECT mmsi, latitude, longitude, sog, cog, heading, tick, at FROM optimization_positions WHERE mmsi = $1 ORDER BY tick DESC LIMIT $2`,
        [mmsi, last],
      ),
    );
    return res.rows.map((r) => ({ ...r, at: iso(r.at) }));
  }

  /**
   * Inserts a RUNNING run of `owner` unless `slots.global` runs are already in progress, or `slots.tenant`
   * of the owner's tenant (null: no cap for this owner, an operator), counted under a lock so concurrent
   * starts on any instance cannot overshoot. `{ full }` names the cap that was reached.
   */
  async insertRun(run: NewRun, owner: Owner, slots: { global: number; tenant: number | null }, now: Date): Promise<RunRecord | { full: 'global' | 'tenant' }> {
    let expired = 0;
    const inserted = await this.db.transaction(async (tx): Promise<RunRecord | { full: 'global' | 'tenant' }> => {
      await tx.query('SELECT pg_advisory_xact_lock($1)', [RUN_LOCK]);
      // Shared runs (PostgreSQL): a dead process's run must not hold a slot. Embedded, the one writer failed
      // its predecessors' runs at start and renews no lease.
      if (this.db.kind === 'postgres') expired = (await this.expireLeases(tx)).length;
      const running = await tx.query<{ n: number; mine: number }>(
        `SELECT count(*)::int AS n, (count(*) FILTER (WHERE tenant = $1))::int AS mine FROM optimization_runs WHERE status = 'running'`,
        [owner.tenant],
      );
      if (running.rows[0]!.n >= slots.global) return { full: 'global' };
      if (slots.tenant !== null && running.rows[0]!.mine >= slots.tenant) return { full: 'tenant' };
      const res = await tx.query<RunRow>(
        `INSERT INTO optimization_runs (id, status, problem, size, qubits, depth, shots, seed, max_evaluations, refine_top, fleet_tick, instance, backend, created_at,
           owner, lease_until, tenant, principal)
         VALUES ($1, 'running', $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, clock_timestamp() + make_interval(secs => $15::double precision / 1000.0), $16, $17)
         RETURNING ${RUN_COLUMNS}`,
        [
          randomUUID(),
          run.problem,
          run.size,
          run.qubits,
          run.depth,
          run.shots,
          run.seed,
          run.maxEvaluations,
          run.refineTop,
          run.fleetTick,
          JSON.stringify(run.instance),
          run.backend,
          now,
          this.options.owner,
          this.options.leaseMs,
          owner.tenant,
          owner.principal,
        ],
      );
      const made = runOf(res.rows[0]!);
      await appendEvents(tx, [runStartEvent(made.id, owner)]);
      return made;
    });
    if (expired > 0 || !('full' in inserted)) this.options.onEvents();
    return inserted;
  }

  /** Fails the RUNNING runs whose lease has expired (their process died), each with its event. */
  private async expireLeases(tx: Queryable): Promise<string[]> {
    return failRunning(tx, 'expired', 'interrupted: the process running it stopped (its lease expired)');
  }

  /** Renews the lease of this process's RUNNING runs and fails every expired one; returns the ids failed. */
  async renewAndSweep(): Promise<string[]> {
    // A lease (`owner`, `lease_until`) is no read's answer: renewing it needs no event.
    await unobservedWrite(() =>
      this.db.query(
        `UPDATE optimization_runs SET lease_until = clock_timestamp() + make_interval(secs => $2::double precision / 1000.0)
         WHERE status = 'running' AND owner = $1`,
        [this.options.owner, this.options.leaseMs],
      ),
    );
    const failed = await this.db.transaction((tx) => this.expireLeases(tx));
    if (failed.length > 0) this.options.onEvents();
    return failed;
  }

  /** Fails every RUNNING run, each with its event (embedded, at start: they were lost with the process before). */
  async failRunsLeftRunning(): Promise<string[]> {
    const failed = await this.db.transaction((tx) => failRunning(tx, 'all', 'interrupted: the process running it stopped (found at start)'));
    if (failed.length > 0) this.options.onEvents();
    return failed;
  }

  /** RUNNING -> COMPLETED with the result, and its event, in one transaction; false if it was not running. */
  async completeRun(id: string, result: JobResult, now: Date): Promise<boolean> {
    const done = await this.db.transaction(async (tx) => {
      const owner = await runningOwner(tx, id);
      if (!owner) return false;
      await tx.query(
        `UPDATE optimization_runs SET status = 'completed', result = $2, energy = $3, optimality_ratio = $4, refined_ratio = $5,
           baseline_ratio = $6, duration_ms = $7, completed_at = $8, lease_until = NULL
         WHERE id = $1`,
        [
          id,
          JSON.stringify(result),
          result.expectedValue,
          result.expectedRatio,
          result.refined.ratio,
          result.baseline.ratio,
          Math.round(result.timings.totalMs),
          now,
        ],
      );
      await appendEvents(tx, [runEvent(id, 'completed', now.toISOString(), owner)]);
      return true;
    });
    if (done) this.options.onEvents();
    return done;
  }

  async failRun(id: string, message: string, durationMs: number, now: Date): Promise<boolean> {
    const done = await this.db.transaction(async (tx) => {
      const owner = await runningOwner(tx, id);
      if (!owner) return false;
      await tx.query(`UPDATE optimization_runs SET status = 'failed', error = $2, duration_ms = $3, completed_at = $4, lease_until = NULL WHERE id = $1`, [
        id,
        message,
        durationMs,
        now,
      ]);
      await appendEvents(tx, [runEvent(id, 'failed', now.toISOString(), owner)]);
      return true;
    });
    if (done) this.options.onEvents();
    return done;
  }

  /** The runs among `ids` that `viewer` may see (another tenant's are left out, as unknown ids are). */
  async runsByIds(ids: readonly string[], viewer: Viewer): Promise<RunRecord[]> {
    const uuids = ids.filter((id) => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(id));
    if (uuids.length === 0) return [];
    // Depends on each run asked for, found or not (an id malformed reads nothing: no run has it). An
    // operator's answer names other tenants' runs: it is that principal's alone, not its tenant's.
    if (viewer.all) currentTrace()?.widen('principal');
    const res = await readingOnly(
      uuids.map((id) => stateTag.key(STATE_TYPES.run, id)),
      () =>
        this.db.query<RunRow>(`SELECT ${RUN_COLUMNS} FROM optimization_runs WHERE id = ANY($1::uuid[]) AND ($2::text IS NULL OR tenant = $2)`, [
          uuids,
          viewedTenant(viewer),
        ]),
    );
    return res.rows.map(runOf);
  }

  /** The viewer's runs, newest first, `first` of them after the run with sequence number `beforeSeq`. */
  async runsPage(first: number, beforeSeq: string | null, viewer: Viewer): Promise<{ runs: RunRecord[]; hasNext: boolean; total: number }> {
    return readingRunsOf(viewer, () =>
      this.db.transaction(async (tx) => {
        const res = await tx.query<RunRow>(
          `SELECT ${RUN_COLUMNS} FROM optimization_runs WHERE ($1::bigint IS NULL OR seq < $1::bigint) AND ($3::text IS NULL OR tenant = $3)
           ORDER BY optimization_runs.seq DESC LIMIT $2`,
          [beforeSeq, first + 1, viewedTenant(viewer)],
        );
        const total = await tx.query<{ n: number }>('SELECT count(*) AS n FROM optimization_runs WHERE $1::text IS NULL OR tenant = $1', [
          viewedTenant(viewer),
        ]);
        return { runs: res.rows.slice(0, first).map(runOf), hasNext: res.rows.length > first, total: total.rows[0]!.n };
      }),
    );
  }

  /** The viewer's newest completed run. */
  async latestCompleted(viewer: Viewer): Promise<RunRecord | null> {
    const res = await readingRunsOf(viewer, () =>
      this.db.query<RunRow>(
        `SELECT ${RUN_COLUMNS} FROM optimization_runs WHERE status = 'completed' AND ($1::text IS NULL OR tenant = $1)
         ORDER BY completed_at DESC, optimization_runs.seq DESC LIMIT 1`,
        [viewedTenant(viewer)],
      ),
    );
    return res.rows[0] ? runOf(res.rows[0]) : null;
  }

  /** The viewer's runs by status. */
  async runCounts(viewer: Viewer): Promise<{ total: number; running: number; completed: number; failed: number }> {
    const res = await readingRunsOf(viewer, () =>
      this.db.query<{ status: RunStatus; n: number }>(
        'SELECT status, count(*) AS n FROM optimization_runs WHERE $1::text IS NULL OR tenant = $1 GROUP BY status',
        [viewedTenant(viewer)],
      ),
    );
    const by = Object.fromEntries(res.rows.map((r) => [r.status, r.n])) as Partial<Record<RunStatus, number>>;
    const running = by.running ?? 0;
    const completed = by.completed ?? 0;
    const failed = by.failed ?? 0;
    return { total: running + completed + failed, running, completed, failed };
  }

  async eventCursor(): Promise<string> {
    const res = await this.db.query<{ id: string | null }>('SELECT max(id)::text AS id FROM outbox');
    return res.rows[0]?.id ?? '0';
  }
}

async function insertPositions(tx: Queryable, positions: readonly VesselPosition[], tick: number, at: Date): Promise<void> {
  await tx.query(
    `INSERT INTO optimization_positions (mmsi, tick, latitude, longitude, sog, cog, heading, at)
     SELECT p.mmsi, $2, p.latitude, p.longitude, p.sog, p.cog, p.heading, $3
     FROM jsonb_to_recordset($1::jsonb) AS p(mmsi text, latitude double precision, longitude double precision, sog double precision, cog double precision, heading int)`,
    [JSON.stringify(positions), tick, at],
  );
}
