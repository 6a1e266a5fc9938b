import type { Clock } from '../../platform/clock.js';
import { withDeadline } from '../../platform/deadline.js';
import { currentTrace, readingOnly, stateTag } from '../../platform/state-trace.js';
import { featureImportance, leakageAudit, type LeakageAudit, type ModelImportance } from './audit.js';
import { columnName, emptyLabels, type Availability, type EntityType } from './frame.js';
import type { ModelName } from './generator.js';
import { defaultViews, labelSetRows, round3, type EngineName, type EntityRow, type Frame, type OfflineStore, type UnknownEntity } from './offline.js';
import type { OnlineStore } from './online-store.js';
import { VIEW_DEFINITIONS, viewDefinition, viewVersion } from './registry.js';
import { onlineTags, RENTAL_MACHINE_TYPE, type MaterializationRecord, type MaterializedViewRecord, type OnlineRow, type StoredOnlineRow } from './records.js';
import type { FeaturesStore } from './store.js';

export interface PitRequest {
  rows: readonly EntityRow[];
  views: readonly string[] | null;
  /** Overrides every requested view's TTL (null: none); undefined keeps each view's own. */
  ttlMs: number | null | undefined;
  engine: EngineName;
  availability: Availability;
}

export interface OnlineValue {
  column: string;
  value: number | null;
}

export interface OnlineFeatures {
  entity: EntityType;
  id: string;
  values: OnlineValue[];
  views: StoredOnlineRow[];
}

/** The features subgraph's operations, transport-free (resolvers call these with checked input). */
export class FeatureService {
  readonly startedAt = Date.now();

  private offlineStore: Promise<OfflineStore> | null = null;

  /**
   * @param openOffline builds the offline store (the generated world, sorted and loaded into DuckDB); it
   *   runs on first use, so a gateway that never serves features never pays for it.
   */
  constructor(
    private readonly openOffline: () => Promise<OfflineStore>,
    private readonly online: OnlineStore,
    private readonly store: FeaturesStore,
    private readonly clock: Clock,
    readonly options: { seed: number; policies: number },
  ) {}

  private offline(): Promise<OfflineStore> {
    this.offlineStore ??= this.openOffline().catch((error: unknown) => {
      this.offlineStore = null;
      throw error;
    });
    return this.offlineStore;
  }

  /** The offline store when it has been built (health and close must not build it). */
  private async builtOffline(): Promise<OfflineStore | null> {
    return this.offlineStore ? this.offlineStore.catch(() => null) : null;
  }

  /** Where materialized values are served from. */
  get onlineStoreKind(): OnlineStore['kind'] {
    return this.online.kind;
  }

  /**
   * Rows of each of `views` in the offline store, by view name (the store is built on first use). The
   * generated world's never change; the machine view's are the rental events as of its last rebuild, so an
   * answer counting it depends on the rental machines' status changes.
   */
  async viewRowCounts(views: readonly string[]): Promise<ReadonlyMap<string, number>> {
    const count = async () => {
      const offline = await this.offline();
      return new Map(views.map((name) => [name, offline.views.get(name)?.length ?? 0]));
    };
    const machines = views.some((v) => viewDefinition(v)?.entity === 'machine');
    return machines ? readingOnly([stateTag.collection(RENTAL_MACHINE_TYPE)], count) : count();
  }

  /** The entity ids among `rows` the offline store does not know. */
  async unknownEntities(rows: readonly EntityRow[]): Promise<UnknownEntity[]> {
    return (await this.offline()).unknownEntities(rows);
  }

  /** Claims of the generated world, or null while the offline store has not been built. */
  async claimCount(): Promise<number | null> {
    return (await this.builtOffline())?.world.claimIds.length ?? null;
  }

  /** The newest `first` materializations, newest first. */
  materializations(first: number): Promise<MaterializationRecord[]> {
    return this.store.materializations(first);
  }

  /** Refreshes the outbox-fed machine view when a request needs it. */
  private async prepare(views: readonly string[]): Promise<OfflineStore> {
    const offline = await this.offline();
    if (views.some((v) => viewDefinition(v)?.entity === 'machine')) await offline.setMachineEvents(await this.store.machineEvents());
    return offline;
  }

  async pitTraining(request: PitRequest): Promise<Frame> {
    const views = request.views ?? defaultViews(request.rows);
    const offline = await this.prepare(views);
    const ttl = new Map(request.ttlMs === undefined ? [] : views.map((v) => [v, request.ttlMs ?? null] as const));
    return offline.frame(request.rows, views, request.engine, ttl, request.availability);
  }

  async labelSet(model: ModelName, from: number | null, to: number | null, limit: number | null): Promise<EntityRow[]> {
    let rows = labelSetRows((await this.offline()).labelRows(model)).filter((r) => (from === null || r.eventTs >= from) && (to === null || r.eventTs < to));
    rows.sort((a, b) => a.eventTs - b.eventTs);
    if (limit !== null) rows = rows.slice(0, limit);
    return rows;
  }

  /**
   * Materializes the views as of `asOf` into the online store: every entity of each view gets its
   * point-in-time row at asOf (the same join as training, so online and offline agree by construction).
   */
  async materialize(input: { asOf: number | null; views: readonly string[] | null; engine: EngineName }): Promise<MaterializationRecord> {
    const t0 = performance.now();
    const views = input.views ?? VIEW_DEFINITIONS.filter((v) => v.entity !== 'machine' && !v.postOutcome).map((v) => v.name);
    const offline = await this.prepare(views);
    const asOf = input.asOf ?? offline.sourceWatermark();
    const rows: OnlineRow[] = [];
    const summaries: MaterializedViewRecord[] = [];
    for (const name of views) {
      const def = viewDefinition(name)!;
      const dict = offline.dicts[def.entity];
      const labels = emptyLabels(dict.size);
      labels.ts.fill(asOf);
      for (let i = 0; i < dict.size; i++) labels.keys[def.entity][i] = i;
      const { matches } = await offline.match([name], labels, input.engine === 'BOTH' ? 'DUCKDB' : input.engine);
      const m = matches.get(name)!;
      const view = offline.views.get(name)!;
      const version = viewVersion(def);
      let written = 0;
      let watermark: number | null = null;
      for (let i = 0; i < m.length; i++) {
        const r = m[i]!;
        if (r < 0) continue;
        const featureTs = view.ts[r]!;
        watermark = watermark === null ? featureTs : Math.max(watermark, featureTs);
        rows.push({
          entityType: def.entity,
          entityId: dict.ids[i]!,
          view: name,
          version,
          featureTs,
          values: view.values.map((col) => (Number.isNaN(col[r]!) ? null : col[r]!)),
        });
        written++;
      }
      summaries.push({ view: name, version, rowsWritten: written, watermark });
    }
    const watermarks = summaries.map((s) => s.watermark).filter((w): w is number => w !== null);
    return this.online.publish(
      {
        asOf: new Date(asOf),
        watermark: watermarks.length > 0 ? new Date(Math.max(...watermarks)) : null,
        rowsWritten: rows.length,
        views: summaries,
        engine: input.engine === 'BOTH' ? 'DUCKDB' : input.engine,
        milliseconds: round3(performance.now() - t0),
      },
      rows,
      this.clock.now(),
    );
  }

  async onlineFeatures(entity: EntityType, id: string): Promise<OnlineFeatures | null> {
    // Served from memory or Redis: the answer depends on the online rows of the entity's views, which
    // only a materialization (its event) changes.
    const stored = await readingOnly(onlineTags(entity), () => this.online.read(entity, id));
    if (stored.length === 0) return null;
    const values: OnlineValue[] = [];
    for (const row of stored) {
      const columns = columnsOf(row.view);
      if (!columns) continue;
      for (let j = 0; j < columns.length; j++) values.push({ column: columns[j]!, value: row.values[j] ?? null });
    }
    return { entity, id, values, views: stored };
  }

  /**
   * Every (non post-outcome) view of the entity, point in time at `asOf`, and the first instant after it
   * at which that answer may change (one of the entity's rows becomes available or leaves its view's TTL),
   * null when none of its rows does.
   */
  async pointFeatures(entity: EntityType, id: string, asOf: number): Promise<{ values: OnlineValue[]; changesAt: number | null }> {
    const views = VIEW_DEFINITIONS.filter((v) => v.entity === entity && !v.postOutcome).map((v) => v.name);
    const row: EntityRow = {
      policyId: entity === 'policy' ? id : null,
      claimId: entity === 'claim' ? id : null,
      machineId: entity === 'machine' ? id : null,
      eventTs: asOf,
      label: null,
    };
    const offline = await this.prepare(views);
    const frame = await offline.frame([row], views, 'TYPESCRIPT');
    const values = frame.columns.map((c, i) => ({ column: c.name, value: Number.isNaN(frame.values[i]![0]!) ? null : frame.values[i]![0]! }));
    return { values, changesAt: offline.changesAfter(entity, id, views, asOf) };
  }

  async audit(model: ModelName, views: readonly string[] | null, testFrom: number | null): Promise<LeakageAudit> {
    return leakageAudit(await this.prepare(views ?? []), model, views, testFrom);
  }

  /** Deterministic for the world, so computed once and kept. */
  private importanceOnce: Promise<ModelImportance[]> | null = null;
  importance(): Promise<ModelImportance[]> {
    this.importanceOnce ??= this.offline()
      .then(featureImportance)
      .catch((error: unknown) => {
        this.importanceOnce = null;
        throw error;
      });
    return this.importanceOnce;
  }

  async knows(entity: EntityType, id: string): Promise<boolean> {
    return (await this.offline()).dicts[entity].find(id) >= 0;
  }

  async close(): Promise<void> {
    (await this.builtOffline())?.close();
    await this.online.close();
  }

  async health(): Promise<{ ok: boolean; checks: { name: string; ok: boolean; detail: string; milliseconds: number }[] }> {
    // Checks made now, with their times: no event says when they change.
    currentTrace()?.refuse('health is a check made now');
    const check = async (name: string, run: () => Promise<string>) => {
      const t0 = performance.now();
      try {
        const detail = await withDeadline(run(), 2000, () => new Error('no answer within 2 s'));
        return { name, ok: true, detail, milliseconds: round3(performance.now() - t0) };
      } catch (error) {
        return { name, ok: false, detail: error instanceof Error ? error.message : String(error), milliseconds: round3(performance.now() - t0) };
      }
    };
    const checks = await Promise.all([
      check('database', async () => {
        await this.store.ping();
        return this.store.db.kind;
      }),
      check('online_store', async () => {
        await this.online.ping();
        return this.online.kind;
      }),
      check('duckdb', async () => {
        const offline = await this.builtOffline();
        if (!offline) return 'not started yet (starts on first use)';
        if (!(await offline.duck.ping())) throw new Error('unexpected answer');
        const { kind, folder } = offline.storage;
        return kind === 'memory'
          ? 'in-process, in-memory; world generated in memory'
          : `in-process, in-memory; world ${kind === 'parquet-read' ? 'read from' : 'written to'} ${folder}`;
      }),
    ]);
    return { ok: checks.every((c) => c.ok), checks };
  }
}

/** A view's column names (`view__feature`), made once per view: every online lookup names them. */
const viewColumns = new Map<string, readonly string[] | null>();
function columnsOf(view: string): readonly string[] | null {
  let columns = viewColumns.get(view);
  if (columns === undefined) {
    const def = viewDefinition(view);
    columns = def ? def.features.map((f) => columnName(view, f.name)) : null;
    viewColumns.set(view, columns);
  }
  return columns;
}
