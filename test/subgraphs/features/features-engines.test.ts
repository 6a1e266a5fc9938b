import { afterAll, describe, expect, it } from 'vitest';
import { DuckDbEngine } from '../../../subgraphs/features/duckdb-engine.js';
import { DAY_MS, emptyLabels, type Availability, type LabelRows, type ViewData } from '../../../subgraphs/features/frame.js';
import { oracleAsOf } from '../../../subgraphs/features/oracle.js';
import { Random } from '../../../platform/random.js';
import { sortView, tsAsOf } from '../../../subgraphs/features/ts-engine.js';

/**
 * Random worlds built to hit every edge of the point-in-time rules: timestamps on a coarse grid (so many
 * rows share a feature_timestamp and labels fall exactly on rows), duplicate (ts, created) pairs, late
 * corrections (same ts, later created), labels exactly at the TTL boundary, entities without rows and
 * label rows without a key.
 */
const TTLS = [null, 3 * DAY_MS, 7 * DAY_MS] as const;
const SLOT = 16;

function randomWorld(seed: number): { views: ViewData[]; labels: LabelRows } {
  const rng = new Random(seed, 'pit-property');
  const entityCount = 1 + rng.int(12);
  // TTLs are fixed per view (so worlds can be joined in one batch); the grid moves around them.
  const grid = [0.5, 1, 1.5, 2, 3, 3.5][rng.int(6)]!;
  const views: ViewData[] = [0, 1, 2].map((v) => {
    const length = rng.int(60);
    const ttlMs = TTLS[v]!;
    const view: ViewData = {
      name: `v${v}`,
      entity: v === 2 ? 'claim' : 'policy',
      features: ['x'],
      ttlMs,
      entityCount,
      length,
      entityCode: new Int32Array(length),
      ts: new Float64Array(length),
      created: new Float64Array(length),
      values: [new Float64Array(length)],
    };
    for (let i = 0; i < length; i++) {
      // Entities 0..entityCount-2 get rows; the last entity never does (a missing entity).
      view.entityCode[i] = rng.int(Math.max(1, entityCount - 1));
      view.ts[i] = rng.int(20) * grid * DAY_MS;
      const correction = i > 0 && rng.bernoulli(0.2);
      if (correction) {
        const j = rng.int(i);
        view.entityCode[i] = view.entityCode[j]!;
        view.ts[i] = view.ts[j]!;
        // A later correction, or an exact duplicate of (ts, created): the row index decides.
        view.created[i] = rng.bernoulli(0.5) ? view.created[j]! : view.created[j]! + rng.int(5) * DAY_MS;
      } else {
        view.created[i] = view.ts[i]! + rng.int(3) * DAY_MS;
      }
      view.values[0]![i] = i;
    }
    return view;
  });
  const n = 1 + rng.int(80);
  const labels = emptyLabels(n);
  for (let i = 0; i < n; i++) {
    labels.keys.policy[i] = rng.bernoulli(0.1) ? -1 : rng.int(entityCount);
    labels.keys.claim[i] = rng.bernoulli(0.2) ? -1 : rng.int(entityCount);
    const pick = views[rng.int(3)]!;
    if (pick.length > 0 && rng.bernoulli(0.5)) {
      // Exactly on a row's timestamp or its created_timestamp, or exactly the TTL later (the inclusive edges).
      const r = rng.int(pick.length);
      const at = rng.bernoulli(0.3) ? pick.created[r]! : pick.ts[r]!;
      labels.ts[i] = at + (rng.bernoulli(0.5) && pick.ttlMs !== null ? pick.ttlMs : 0) + (rng.bernoulli(0.2) ? 1 : 0);
    } else {
      labels.ts[i] = rng.int(25) * grid * DAY_MS - grid * DAY_MS;
    }
  }
  return { views, labels };
}

const engines: DuckDbEngine[] = [];
const AVAILABILITIES: Availability[] = ['AS_KNOWN', 'EVENT_TIME'];
/** Each rule's expected matches over all worlds, to show the rules differ. */
const differing: Partial<Record<Availability, number[][]>> = {};
afterAll(() => engines.forEach((e) => e.close()));

describe('point-in-time engines', () => {
  it.each(AVAILABILITIES)('DuckDB, the TypeScript sort-merge join and the brute-force oracle agree on 400 random worlds (%s)', async (availability) => {
    const worlds = Array.from({ length: 400 }, (_, i) => randomWorld(i + 1));
    // Every world checked on its own against the oracle, then all of them at once (entities offset per world).
    let compared = 0;
    let matched = 0;
    let nulls = 0;
    const expectedAll = TTLS.map(() => [] as number[]);
    const rowOffsets = TTLS.map(() => 0);
    for (const [w, { views, labels }] of worlds.entries()) {
      views.forEach((view, v) => {
        const expected = oracleAsOf(view, labels, availability);
        expect([...tsAsOf(sortView(view), labels, view.ttlMs, availability)], `world ${w + 1} view ${view.name} (TypeScript)`).toEqual([...expected]);
        for (const m of expected) {
          expectedAll[v]!.push(m < 0 ? -1 : m + rowOffsets[v]!);
          if (m >= 0) matched++;
          else nulls++;
        }
        rowOffsets[v]! += view.length;
        compared += labels.length;
      });
    }
    const all = concatWorlds(worlds);
    const duck = await DuckDbEngine.open(all.views, { threads: 1 });
    engines.push(duck);
    const fromDuck = await duck.join(
      all.views.map((v) => v.name),
      all.labels,
      availability,
    );
    all.views.forEach((view, v) => {
      expect([...fromDuck.get(view.name)!], `view ${view.name} (DuckDB)`).toEqual(expectedAll[v]);
      expect([...tsAsOf(sortView(view), all.labels, view.ttlMs, availability)], `view ${view.name} (TypeScript, batch)`).toEqual(expectedAll[v]);
    });
    // The worlds exercise both outcomes, not just one.
    expect(compared).toBeGreaterThan(20_000);
    expect(matched).toBeGreaterThan(compared / 5);
    expect(nulls).toBeGreaterThan(compared / 10);
    differing[availability] = expectedAll;
  });

  it('the two rules differ on the random worlds (late corrections and rows created after their timestamp)', () => {
    const a = differing.AS_KNOWN!.flat();
    const b = differing.EVENT_TIME!.flat();
    expect(a.length).toBe(b.length);
    const differ = a.filter((m, i) => m !== b[i]).length;
    expect(differ).toBeGreaterThan(a.length / 50);
  });

  it('follows the rules on a hand-made case: inclusive bounds, ties by created_timestamp, TTL, missing keys', async () => {
    const view: ViewData = {
      name: 'hand',
      entity: 'policy',
      features: ['x'],
      ttlMs: 10 * DAY_MS,
      entityCount: 3,
      length: 5,
      entityCode: Int32Array.from([0, 0, 0, 1, 0]),
      ts: Float64Array.from([0, 10, 10, 5, 30].map((d) => d * DAY_MS)),
      created: Float64Array.from([0, 12, 11, 5, 30].map((d) => d * DAY_MS)),
      values: [Float64Array.from([1, 2, 3, 4, 5])],
    };
    const labels = emptyLabels(8);
    const rows: [number, number][] = [
      [0, 10], // ts 10 exactly: rows 1 and 2 tie, row 1 was created later (as known: neither exists yet)
      [0, 11], // row 2 created at 11 exactly: as known it is the newest; by event time row 1 still wins
      [0, 20], // exactly the TTL after ts 10: still matches (inclusive)
      [0, 20.5], // past the TTL: null
      [0, -1], // before any row: null
      [1, 15], // entity 1's row at 5, exactly 10 days
      [2, 15], // entity without rows
      [-1, 15], // no key
    ];
    rows.forEach(([k, d], i) => {
      labels.keys.policy[i] = k;
      labels.ts[i] = d * DAY_MS;
    });
    const duck = await DuckDbEngine.open([view], { threads: 1 });
    engines.push(duck);
    const expected: Record<Availability, number[]> = {
      EVENT_TIME: [1, 1, 1, -1, -1, 3, -1, -1],
      AS_KNOWN: [0, 2, 1, -1, -1, 3, -1, -1],
    };
    for (const availability of AVAILABILITIES) {
      expect([...oracleAsOf(view, labels, availability)], availability).toEqual(expected[availability]);
      expect([...tsAsOf(sortView(view), labels, view.ttlMs, availability)], availability).toEqual(expected[availability]);
      expect([...(await duck.join(['hand'], labels, availability)).get('hand')!], availability).toEqual(expected[availability]);
    }
  });
});

function concatWorlds(worlds: { views: ViewData[]; labels: LabelRows }[]): { views: ViewData[]; labels: LabelRows } {
  const views = TTLS.map((ttlMs, v) => {
    const parts = worlds.map((w) => w.views[v]!);
    const length = parts.reduce((n, p) => n + p.length, 0);
    const out: ViewData = {
      ...parts[0]!,
      entityCount: SLOT * worlds.length,
      length,
      entityCode: new Int32Array(length),
      ts: new Float64Array(length),
      created: new Float64Array(length),
      values: [new Float64Array(length)],
      ttlMs,
    };
    let at = 0;
    parts.forEach((p, w) => {
      for (let i = 0; i < p.length; i++) out.entityCode[at + i] = p.entityCode[i]! + w * SLOT;
      out.ts.set(p.ts, at);
      out.created.set(p.created, at);
      at += p.length;
    });
    return out;
  });
  const length = worlds.reduce((n, w) => n + w.labels.length, 0);
  const labels = emptyLabels(length);
  let at = 0;
  worlds.forEach((w, i) => {
    labels.ts.set(w.labels.ts, at);
    for (const key of ['policy', 'claim', 'machine'] as const) {
      for (let r = 0; r < w.labels.length; r++) {
        const k = w.labels.keys[key][r]!;
        labels.keys[key][at + r] = k < 0 ? -1 : k + i * SLOT;
      }
    }
    at += w.labels.length;
  });
  return { views, labels };
}
