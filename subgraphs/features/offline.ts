import type { DuckDbEngine } from './duckdb-engine.js';
import { columnName, DEFAULT_AVAILABILITY, emptyLabels, type Availability, type EntityType, type LabelRows, type Matches, type ViewData } from './frame.js';
import { generateWorld, type LabelRow, type ModelName, type World } from './generator.js';
import { buildView, EntityDictionary, VIEW_DEFINITIONS, viewDefinition, worldViews, type FeatureType } from './registry.js';
import { sortView, tsAsOf, type SortedView } from './ts-engine.js';

export type EngineName = 'DUCKDB' | 'TYPESCRIPT' | 'BOTH';

/** One entity row of a point-in-time request, ids already checked. */
export interface EntityRow {
  policyId: string | null;
  claimId: string | null;
  machineId: string | null;
  eventTs: number;
  label: number | null;
}

interface FrameColumn {
  name: string;
  view: string;
  feature: string;
  type: FeatureType;
}

export interface Frame {
  engine: EngineName;
  availability: Availability;
  rows: readonly EntityRow[];
  columns: FrameColumn[];
  /** One column of values per frame column; NaN is null. */
  values: Float64Array[];
  matches: { view: string; matched: number; unmatched: number }[];
  runs: { engine: 'DUCKDB' | 'TYPESCRIPT'; milliseconds: number }[];
  comparison: { cellsCompared: number; mismatches: number; examples: string[] } | null;
}

/** A machine's status change from the rental events, with the fleet utilization after it. */
export interface MachineEvent {
  machineId: string;
  status: 'available' | 'reserved' | 'in_use';
  at: number;
  /** Outbox id: later events of the same instant win. */
  seq: number;
  fleetUtilization: number;
}

export interface UnknownEntity {
  index: number;
  key: 'policyId' | 'claimId';
  id: string;
}

/**
 * The offline store: the generated world's feature views in columnar form, sorted once for the
 * TypeScript engine and loaded once into DuckDB, plus the machine view rebuilt from the rental events.
 */
export class OfflineStore {
  readonly dicts: Record<EntityType, EntityDictionary> = { policy: new EntityDictionary(), claim: new EntityDictionary(), machine: new EntityDictionary() };
  readonly views = new Map<string, ViewData>();
  private readonly sorted = new Map<string, SortedView>();
  private machineSeq = -1;

  private constructor(
    readonly world: World,
    readonly duck: DuckDbEngine,
    /** Where the world came from: its Parquet folder (read, or written at this start), or memory only. */
    readonly storage: { kind: 'parquet-read' | 'parquet-written' | 'memory'; folder: string | null },
  ) {}

  /**
   * @param options.dir the folder of the world's Parquet files (FEATURES_DATA_DIR): read when the world of
   *   this seed and size is there, else generated and written there; null keeps it in memory only.
   */
  static async open(options: { seed: number; policies: number; dir?: string | null }): Promise<OfflineStore> {
    // The native DuckDB library is loaded on first use, not when the gateway imports the subgraph.
    const { DuckDbEngine } = await import('./duckdb-engine.js');
    const duck = await DuckDbEngine.open([]);
    let found: { world: World; storage: OfflineStore['storage'] };
    try {
      found = await OfflineStore.world(duck, options);
    } catch (error) {
      duck.close();
      throw error;
    }
    const store = new OfflineStore(found.world, duck, found.storage);
    for (const view of worldViews(found.world, store.dicts)) await store.put(view);
    await store.setMachineEvents([]);
    return store;
  }

  private static async world(
    duck: DuckDbEngine,
    options: { seed: number; policies: number; dir?: string | null },
  ): Promise<{ world: World; storage: OfflineStore['storage'] }> {
    if (!options.dir) return { world: generateWorld(options), storage: { kind: 'memory', folder: null } };
    const { loadWorld, saveWorld, worldFolder } = await import('./world-files.js');
    const folder = worldFolder(options.dir, options.seed, options.policies);
    const stored = await loadWorld(duck.instance, options.dir, options.seed, options.policies);
    if (stored) return { world: stored, storage: { kind: 'parquet-read', folder } };
    const world = generateWorld(options);
    await saveWorld(duck.instance, options.dir, world, options.policies);
    return { world, storage: { kind: 'parquet-written', folder } };
  }

  private async put(view: ViewData): Promise<void> {
    await this.duck.load(view);
    this.views.set(view.name, view);
    this.sorted.set(view.name, sortView(view));
  }

  private machineUpdate: Promise<void> = Promise.resolve();

  /** Rebuilds the machine_utilization view when the rental events have moved on (one rebuild at a time). */
  setMachineEvents(events: readonly MachineEvent[]): Promise<void> {
    const run = this.machineUpdate.then(() => this.rebuildMachineView(events));
    this.machineUpdate = run.catch(() => undefined);
    return run;
  }

  private async rebuildMachineView(events: readonly MachineEvent[]): Promise<void> {
    const newest = events.reduce((m, e) => Math.max(m, e.seq), 0);
    if (newest === this.machineSeq) return;
    const def = viewDefinition('machine_utilization')!;
    const code = { available: 0, reserved: 1, in_use: 2 } as const;
    const view = buildView(def, this.dicts.machine, events, (e) => ({
      entity: e.machineId,
      ts: e.at,
      created: e.seq,
      values: [code[e.status], e.status === 'available' ? 0 : 1, e.fleetUtilization],
    }));
    await this.put(view);
    this.machineSeq = newest;
  }

  /**
   * The first instant after `t` at which the point-in-time answer for entity `id` in `views` may change:
   * one of its rows becomes available (its feature or created timestamp) or leaves its view's TTL; null
   * when no row of it does.
   */
  changesAfter(entity: EntityType, id: string, views: readonly string[], t: number): number | null {
    const code = this.dicts[entity].find(id);
    if (code < 0) return null;
    let next = Number.POSITIVE_INFINITY;
    const consider = (at: number) => {
      if (at > t && at < next) next = at;
    };
    for (const name of views) {
      const sorted = this.sorted.get(name);
      if (!sorted || sorted.view.entity !== entity || code >= sorted.view.entityCount) continue;
      const { view, start, order } = sorted;
      for (let i = start[code]!; i < start[code + 1]!; i++) {
        const r = order[i]!;
        consider(view.ts[r]!);
        consider(view.created[r]!);
        // A row older than t - ttl does not match: it leaves the view 1 ms after ts + ttl.
        if (view.ttlMs !== null) consider(view.ts[r]! + view.ttlMs + 1);
      }
    }
    return Number.isFinite(next) ? next : null;
  }

  /** The newest feature_timestamp of the generated sources. */
  sourceWatermark(): number {
    let max = 0;
    for (const view of this.views.values()) {
      if (view.entity === 'machine') continue;
      for (let i = 0; i < view.length; i++) if (view.ts[i]! > max) max = view.ts[i]!;
    }
    return max;
  }

  labelRows(model: ModelName): readonly LabelRow[] {
    return this.world.labels[model];
  }

  /** Entity ids the store does not know (machines are not checked: the rental subgraph owns them). */
  unknownEntities(rows: readonly EntityRow[]): UnknownEntity[] {
    const unknown: UnknownEntity[] = [];
    rows.forEach((row, index) => {
      if (row.policyId !== null && this.dicts.policy.find(row.policyId) < 0) unknown.push({ index, key: 'policyId', id: row.policyId });
      if (row.claimId !== null && this.dicts.claim.find(row.claimId) < 0) unknown.push({ index, key: 'claimId', id: row.claimId });
    });
    return unknown;
  }

  toLabels(rows: readonly EntityRow[]): LabelRows {
    const labels = emptyLabels(rows.length);
    rows.forEach((row, i) => {
      labels.ts[i] = row.eventTs;
      labels.keys.policy[i] = row.policyId === null ? -1 : this.dicts.policy.find(row.policyId);
      labels.keys.claim[i] = row.claimId === null ? -1 : this.dicts.claim.find(row.claimId);
      labels.keys.machine[i] = row.machineId === null ? -1 : this.dicts.machine.find(row.machineId);
    });
    return labels;
  }

  /** Per view, the matched row of every label row, by the chosen engine(s). */
  async match(
    viewNames: readonly string[],
    labels: LabelRows,
    engine: EngineName,
    ttl: ReadonlyMap<string, number | null> = new Map(),
    availability: Availability = DEFAULT_AVAILABILITY,
  ): Promise<Pick<Frame, 'runs' | 'comparison'> & { matches: Map<string, Matches> }> {
    const runs: Frame['runs'] = [];
    let duck: Map<string, Matches> | null = null;
    let ts: Map<string, Matches> | null = null;
    if (engine !== 'TYPESCRIPT') {
      const t0 = performance.now();
      duck = await this.duck.join(viewNames, labels, availability, ttl);
      runs.push({ engine: 'DUCKDB', milliseconds: round3(performance.now() - t0) });
    }
    if (engine !== 'DUCKDB') {
      const t0 = performance.now();
      ts = new Map(
        viewNames.map((name) => [name, tsAsOf(this.sorted.get(name)!, labels, ttl.has(name) ? ttl.get(name)! : this.views.get(name)!.ttlMs, availability)]),
      );
      runs.push({ engine: 'TYPESCRIPT', milliseconds: round3(performance.now() - t0) });
    }
    let comparison: Frame['comparison'] = null;
    if (duck && ts) {
      comparison = { cellsCompared: 0, mismatches: 0, examples: [] };
      for (const name of viewNames) {
        const a = duck.get(name)!;
        const b = ts.get(name)!;
        for (let i = 0; i < labels.length; i++) {
          comparison.cellsCompared++;
          if (a[i] !== b[i]) {
            comparison.mismatches++;
            if (comparison.examples.length < 10) comparison.examples.push(`row ${i} ${name}: DuckDB row ${a[i]}, TypeScript row ${b[i]}`);
          }
        }
      }
    }
    return { matches: (duck ?? ts)!, runs, comparison };
  }

  /** The point-in-time frame of the entity rows. */
  async frame(
    rows: readonly EntityRow[],
    viewNames: readonly string[],
    engine: EngineName,
    ttl: ReadonlyMap<string, number | null> = new Map(),
    availability: Availability = DEFAULT_AVAILABILITY,
  ): Promise<Frame> {
    const labels = this.toLabels(rows);
    const { matches, runs, comparison } = await this.match(viewNames, labels, engine, ttl, availability);
    return { ...this.gather(rows, viewNames, matches), engine, availability, runs, comparison };
  }

  /** Frame columns and values from per-view matches (shared by both engines and the unguarded join). */
  gather(
    rows: readonly EntityRow[],
    viewNames: readonly string[],
    matches: ReadonlyMap<string, Matches>,
  ): Pick<Frame, 'rows' | 'columns' | 'values' | 'matches'> {
    const columns: FrameColumn[] = [];
    const values: Float64Array[] = [];
    const counts: Frame['matches'] = [];
    for (const name of viewNames) {
      const view = this.views.get(name)!;
      const def = viewDefinition(name)!;
      const m = matches.get(name)!;
      let matched = 0;
      for (let i = 0; i < m.length; i++) if (m[i]! >= 0) matched++;
      counts.push({ view: name, matched, unmatched: m.length - matched });
      def.features.forEach((feature, j) => {
        columns.push({ name: columnName(name, feature.name), view: name, feature: feature.name, type: feature.type });
        const source = view.values[j]!;
        const out = new Float64Array(m.length);
        for (let i = 0; i < m.length; i++) out[i] = m[i]! >= 0 ? source[m[i]!]! : NaN;
        values.push(out);
      });
    }
    return { rows, columns, values, matches: counts };
  }

  /**
   * The unguarded join a pipeline without point-in-time rules does: each entity's latest row, whatever its
   * time (the same merge with every event moved to the end of time).
   */
  latestValues(labels: LabelRows, viewNames: readonly string[]): Map<string, Matches> {
    const late = { ...labels, ts: new Float64Array(labels.length).fill(Number.MAX_SAFE_INTEGER) };
    return new Map(viewNames.map((name) => [name, tsAsOf(this.sorted.get(name)!, late, null, 'EVENT_TIME')]));
  }

  close(): void {
    this.duck.close();
  }
}

export const round3 = (x: number) => Math.round(x * 1000) / 1000;

/** The views whose entity key the rows carry, leakage traps left out (they must be asked for by name). */
export function defaultViews(rows: readonly EntityRow[]): string[] {
  const has = {
    policy: rows.some((r) => r.policyId !== null),
    claim: rows.some((r) => r.claimId !== null),
    machine: rows.some((r) => r.machineId !== null),
  };
  return VIEW_DEFINITIONS.filter((v) => has[v.entity] && !v.postOutcome).map((v) => v.name);
}

export function labelSetRows(rows: readonly LabelRow[]): EntityRow[] {
  return rows.map((r) => ({ policyId: r.policyId, claimId: r.claimId, machineId: null, eventTs: r.eventTs, label: r.label }));
}
