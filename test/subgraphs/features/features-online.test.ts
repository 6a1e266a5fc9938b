import { describe, expect, it } from 'vitest';
import { rest } from '../../support/http.js';
import { startFeaturesServer } from '../../support/features.js';
import { dropSchema, TEST_DATABASE_URL } from '../../support/server.js';
import { until } from '../../support/wait.js';

if (!TEST_DATABASE_URL) console.log('features online-store race test: skipped, TEST_DATABASE_URL is not set (PGlite runs one transaction at a time)');

describe.runIf(TEST_DATABASE_URL)('materializations racing readers on PostgreSQL', () => {
  it('concurrent materializations each become visible whole; readers never see a mix', async () => {
    const { url, gateway } = await startFeaturesServer({ backend: 'postgres', mode: 'one-process', env: { FEATURES_SEED: '5', FEATURES_POLICIES: '300' } });
    const views = ['policy_profile', 'policy_claims_history'];
    const times = ['2023-06-01T00:00:00Z', '2024-06-01T00:00:00Z', '2025-06-01T00:00:00Z', '2025-12-01T00:00:00Z'];
    // What each materialization time should serve for one policy (the point-in-time frame at that time).
    const expected = new Map<string, Record<string, unknown>>();
    for (const t of times) {
      const frame = await rest(url, 'POST', '/features/pit-training', { entities: [{ policy_id: 'P-000007', event_timestamp: t }], views });
      const { policy_id: _p, event_timestamp: _e, ...values } = frame.body['rows'][0];
      expected.set(new Date(t).toISOString(), values);
    }
    let reading = true;
    let reads = 0;
    const seenAsOf = new Set<string>();
    const reader = (async () => {
      while (reading) {
        const res = await rest(url, 'GET', '/features/online/policy/P-000007');
        if (res.status === 404) continue;
        expect(res.status).toBe(200);
        const ids = new Set(res.body['views'].map((v: { materialization_id: string }) => v.materialization_id));
        const asOf = new Set(res.body['views'].map((v: { as_of: string }) => v.as_of));
        // Both views of one answer come from one materialization, with that materialization's values.
        expect(ids.size).toBe(1);
        expect(asOf.size).toBe(1);
        const at = [...asOf][0] as string;
        seenAsOf.add(at);
        expect(res.body['features']).toEqual(expected.get(at));
        reads++;
      }
    })();
    const results = await Promise.all(times.map((as_of) => rest(url, 'POST', '/features/offline', { as_of, views })));
    reading = false;
    await reader;
    // The store only moves forward: a materialization that commits after a newer one is refused (409) and
    // writes nothing; the newest time always goes through, and is the last to commit.
    for (const r of results) expect([200, 409]).toContain(r.status);
    for (const r of results.filter((x) => x.status === 409)) expect(r.body['detail']).toMatch(/is served as of .* newer than/);
    const committed = results.filter((r) => r.status === 200).map((r) => r.body);
    expect(results[times.length - 1]!.status).toBe(200);
    const committedAsOf = committed.sort((a, b) => Number(a['materialization_id']) - Number(b['materialization_id'])).map((b) => Date.parse(b['as_of']));
    expect(committedAsOf).toEqual([...committedAsOf].sort((a, b) => a - b));
    expect(reads).toBeGreaterThan(0);
    // The last to commit is what stays: its rows, all of them, and nothing else.
    const last = committed[committed.length - 1]!;
    expect(last['as_of']).toBe(new Date(times[times.length - 1]!).toISOString());
    const db = gateway.db!;
    const counts = await db.query<{ view: string; n: number; ids: number }>(
      'SELECT view, count(*)::int AS n, count(DISTINCT materialization_id)::int AS ids FROM features_online GROUP BY view ORDER BY view',
    );
    expect(counts.rows).toEqual(
      [...last['views']]
        .sort((a, b) => a.view.localeCompare(b.view))
        .map((v: { view: string; rows_written: number }) => ({ view: v.view, n: v.rows_written, ids: 1 })),
    );
    const final = await rest(url, 'GET', '/features/online/policy/P-000007');
    expect(final.body['views'][0].materialization_id).toBe(last['materialization_id']);
    expect(seenAsOf.size).toBeGreaterThanOrEqual(1);
  }, 120_000);

  it('another instance on the same database serves a materialization once its outbox event arrives, whole', async () => {
    const schema = `t_shared_${Date.now().toString(36)}`;
    const env = { FEATURES_SEED: '5', FEATURES_POLICIES: '300', DATABASE_SCHEMA: schema };
    const a = await startFeaturesServer({ backend: 'postgres', mode: 'one-process', env });
    const b = await startFeaturesServer({ backend: 'postgres', mode: 'one-process', env });
    try {
      const views = ['policy_profile', 'policy_claims_history'];
      // B has loaded its copy (nothing materialized yet) before A writes.
      expect((await rest(b.url, 'GET', '/features/online/policy/P-000007')).status).toBe(404);
      for (const as_of of ['2024-06-01T00:00:00Z', '2025-12-01T00:00:00Z']) {
        const made = await rest(a.url, 'POST', '/features/offline', { as_of, views });
        expect(made.status).toBe(200);
        const id = made.body['materialization_id'];
        // A answers from the new materialization at once (it reloads before it answers).
        const fromA = await rest(a.url, 'GET', '/features/online/policy/P-000007');
        expect(fromA.body['views'].map((v: { materialization_id: string }) => v.materialization_id)).toEqual([id, id]);
        let fromB: Record<string, any> = {};
        await until(
          async () => {
            const res = await rest(b.url, 'GET', '/features/online/policy/P-000007');
            fromB = res.body;
            if (res.status === 404) return false;
            const ids = new Set(res.body['views'].map((v: { materialization_id: string }) => v.materialization_id));
            // Never a mix: every answer comes from one materialization.
            expect(ids.size).toBe(1);
            return ids.has(id);
          },
          `instance B serving materialization ${id}`,
          { detail: () => fromB },
        );
        expect(fromB['features']).toEqual(fromA.body['features']);
      }
    } finally {
      await b.close();
      await a.close();
      await dropSchema(schema);
    }
  }, 120_000);
});
