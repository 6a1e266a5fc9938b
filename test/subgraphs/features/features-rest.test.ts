import { beforeAll, describe, expect, it } from 'vitest';
import { columnName } from '../../../subgraphs/features/frame.js';
import { OfflineStore } from '../../../subgraphs/features/offline.js';
import { oracleAsOf } from '../../../subgraphs/features/oracle.js';
import { VIEW_DEFINITIONS } from '../../../subgraphs/features/registry.js';
import { rest } from '../../support/http.js';
import { startFeaturesServer } from '../../support/features.js';
import { setups } from '../../support/server.js';

type Problem = { status: number; code: string; detail: string; errors: { field: string; message: string }[] };
type Row = Record<string, string | number | null>;

const SEED = 4242;
const POLICIES = 500;
const ENV = { FEATURES_SEED: String(SEED), FEATURES_POLICIES: String(POLICIES) };

/** The same world the server generates, for expected values straight from the brute-force oracle. */
let world: OfflineStore;
beforeAll(async () => {
  world = await OfflineStore.open({ seed: SEED, policies: POLICIES });
  return () => world.close();
});

/** The value the point-in-time definition gives for one cell (via the oracle, not either engine). */
function expected(view: string, feature: string, key: string | null, eventTs: number): number | null {
  const v = world.views.get(view)!;
  const labels = world.toLabels([
    { policyId: v.entity === 'policy' ? key : null, claimId: v.entity === 'claim' ? key : null, machineId: null, eventTs, label: null },
  ]);
  const m = oracleAsOf(v, labels, 'AS_KNOWN')[0]!;
  if (m < 0) return null;
  return v.values[v.features.indexOf(feature)]![m]!;
}

function parseCsv(text: string): Row[] {
  const [header, ...lines] = text.trim().split('\r\n');
  const names = header!.split(',');
  return lines.map((line) => {
    const cells = line.split(',');
    return Object.fromEntries(names.map((n, i) => [n, cells[i] === '' ? null : /_id$|timestamp/.test(n) ? cells[i]! : Number(cells[i])]));
  });
}

describe.each(setups)('features REST paths ($name)', ({ backend, mode }) => {
  let url: string;
  beforeAll(async () => {
    ({ url } = await startFeaturesServer({ backend, mode, env: ENV }));
  }, 120_000);
  const post = <T = Record<string, any>>(path: string, body: unknown, headers: Record<string, string> = {}) =>
    rest<T>(url, 'POST', `/features${path}`, body, headers);
  const csv = (path: string, body: string, accept = 'application/json') =>
    fetch(`${url}/features${path}`, { method: 'POST', headers: { 'content-type': 'text/csv', accept }, body });

  it('GET /features/health reports uptime and the database, online store and DuckDB checks', async () => {
    const res = await rest(url, 'GET', '/features/health');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'ok', service: 'features', version: '1.0', online_store: 'database', world: { seed: SEED, policies: POLICIES } });
    expect(res.body['checks']).toMatchObject({ database: { ok: true, detail: backend }, online_store: { ok: true }, duckdb: { ok: true } });
    expect(res.body['uptime_s']).toBeGreaterThanOrEqual(0);
  });

  it('POST /features/pit-training (JSON) answers each row as of its event, both engines agreeing, values as the definition gives', async () => {
    const claim = world.world.claims[3]!;
    const entities = [
      { policy_id: 'P-000001', event_timestamp: '2023-06-01T00:00:00Z', label: 1 },
      { policy_id: 'P-000002', event_timestamp: '2025-06-01T12:00:00+02:00' },
      // Before the policy existed: every feature null, the row survives.
      { policy_id: 'P-000003', event_timestamp: '2019-01-01T00:00:00Z', label: 0 },
      // Exactly when the claim's report is recorded (an hour after the report): created_timestamp ==
      // event_timestamp matches as known (inclusive); an instant earlier it does not exist yet.
      { policy_id: claim.policyId, claim_id: claim.claimId, event_timestamp: new Date(claim.reportedAt + 3_600_000).toISOString() },
    ];
    const res = await post('/pit-training', { entities, engine: 'both' });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const body = res.body;
    expect(body['row_count']).toBe(4);
    expect(body['comparison']).toEqual({ cells_compared: 4 * 3, mismatches: 0, examples: [] });
    expect(body['runs'].map((r: { engine: string }) => r.engine)).toEqual(['duckdb', 'typescript']);
    const views = ['policy_profile', 'policy_claims_history', 'claim_report'];
    expect(body['columns']).toEqual(VIEW_DEFINITIONS.filter((v) => views.includes(v.name)).flatMap((v) => v.features.map((f) => columnName(v.name, f.name))));
    const rows = body['rows'] as Row[];
    expect(rows.map((r) => r['label'])).toEqual([1, null, 0, null]);
    let nonNull = 0;
    rows.forEach((row, i) => {
      const ts = Date.parse(entities[i]!.event_timestamp);
      expect(row['event_timestamp']).toBe(new Date(ts).toISOString());
      for (const view of VIEW_DEFINITIONS.filter((v) => views.includes(v.name))) {
        const key = view.entity === 'policy' ? entities[i]!.policy_id : ((entities[i] as { claim_id?: string }).claim_id ?? null);
        for (const f of view.features) {
          const want = expected(view.name, f.name, key, ts);
          expect(row[columnName(view.name, f.name)], `row ${i} ${view.name}.${f.name}`).toBe(want);
          if (want !== null) nonNull++;
        }
      }
    });
    expect(rows[2]!['policy_profile__annual_premium']).toBeNull();
    expect(rows[3]!['claim_report__reported_amount']).not.toBeNull();
    expect(nonNull).toBeGreaterThan(20);
    const present = entities.filter((e) => expected('policy_profile', 'driver_age', e.policy_id, Date.parse(e.event_timestamp)) !== null).length;
    expect(body['matches']['policy_profile']).toEqual({ matched: present, unmatched: 4 - present });
  });

  it('takes a text/csv body and answers CSV by Accept, the same frame as JSON', async () => {
    const text = 'policy_id,event_timestamp,label\r\nP-000010,2024-03-01T00:00:00Z,1\r\nP-000011,"2024-03-01T00:00:00+01:00",0\r\n';
    const asCsv = await csv('/pit-training?engine=typescript&views=policy_profile', text, 'text/csv');
    expect(asCsv.status).toBe(200);
    expect(asCsv.headers.get('content-type')).toMatch(/^text\/csv/);
    const csvRows = parseCsv(await asCsv.text());
    const asJson = await csv('/pit-training?views=policy_profile', text);
    expect(asJson.status).toBe(200);
    const jsonBody = (await asJson.json()) as { engine: string; rows: Row[] };
    expect(jsonBody.engine).toBe('duckdb');
    expect(csvRows).toEqual(jsonBody.rows);
    expect(csvRows).toHaveLength(2);
    expect(csvRows[1]!['event_timestamp']).toBe('2024-02-29T23:00:00.000Z');
    expect(csvRows[0]!['policy_profile__annual_premium']).toBe(expected('policy_profile', 'annual_premium', 'P-000010', Date.parse('2024-03-01T00:00:00Z')));
  });

  it('serves a whole generated label set with both engines and zero mismatches', async () => {
    const res = await post('/pit-training', { label_set: 'fraud', views: ['claim_report', 'policy_profile', 'claim_settlement'], engine: 'both' });
    expect(res.status).toBe(200);
    const fraud = world.labelRows('fraud');
    expect(res.body['row_count']).toBe(fraud.length);
    expect(res.body['comparison']).toMatchObject({ cells_compared: fraud.length * 3, mismatches: 0 });
    // Post-outcome rows never reach a point-in-time frame: each claim is settled after its report.
    expect(res.body['matches']['claim_settlement']).toEqual({ matched: 0, unmatched: fraud.length });
    expect(res.body['matches']['claim_report']).toEqual({ matched: fraud.length, unmatched: 0 });
    const limited = await post('/pit-training', { label_set: 'underwriting', from: '2024-01-01T00:00:00Z', limit: 5 });
    expect(limited.body['row_count']).toBe(5);
    for (const r of limited.body['rows'] as Row[]) expect(Date.parse(r['event_timestamp'] as string)).toBeGreaterThanOrEqual(Date.UTC(2024, 0, 1));
  });

  it('a TTL override narrows or lifts the window (NONE), the default view TTL in between', async () => {
    const entities = Array.from({ length: 30 }, (_, i) => ({ policy_id: `P-${String(i + 1).padStart(6, '0')}`, event_timestamp: '2025-12-20T00:00:00Z' }));
    const matched = async (ttl?: string) => {
      const res = await post('/pit-training', { entities, views: ['policy_claims_history'], ...(ttl ? { ttl } : {}) });
      expect(res.status).toBe(200);
      return res.body['matches']['policy_claims_history'].matched as number;
    };
    const [short, normal, none] = [await matched('PT1H'), await matched(), await matched('NONE')];
    // Snapshots are taken on the 1st: none within an hour of the 20th; the view's 35 days reach 1 December.
    expect(short).toBe(0);
    expect(normal).toBeGreaterThan(0);
    expect(none).toBeGreaterThanOrEqual(normal);
  });

  it('bad input: 400 naming the row or field, nothing served', async () => {
    const cases: [string, () => Promise<{ status: number; body: Problem }>, string[]][] = [
      [
        'timestamp without a zone (CSV)',
        async () => {
          const r = await csv('/pit-training', 'policy_id,event_timestamp\nP-000001,2024-01-01T00:00:00\n');
          return { status: r.status, body: (await r.json()) as Problem };
        },
        ['line 2: event_timestamp'],
      ],
      [
        'missing column (CSV)',
        async () => {
          const r = await csv('/pit-training', 'policy_id,label\nP-000001,1\n');
          return { status: r.status, body: (await r.json()) as Problem };
        },
        ['header'],
      ],
      [
        'unparseable CSV',
        async () => {
          const r = await csv('/pit-training', 'policy_id,event_timestamp\n"P-000001,2024-01-01T00:00:00Z\n');
          return { status: r.status, body: (await r.json()) as Problem };
        },
        ['line 2'],
      ],
      [
        'unknown CSV column',
        async () => {
          const r = await csv('/pit-training', 'policy_id,event_timestamp,age\nP-000001,2024-01-01T00:00:00Z,3\n');
          return { status: r.status, body: (await r.json()) as Problem };
        },
        ['header.2'],
      ],
      [
        'timestamp without a zone (JSON)',
        () => post<Problem>('/pit-training', { entities: [{ policy_id: 'P-000001', event_timestamp: '2024-01-01 10:00' }] }),
        ['entities[0].event_timestamp'],
      ],
      [
        'unknown entity',
        () =>
          post<Problem>('/pit-training', {
            entities: [
              { policy_id: 'P-000001', event_timestamp: '2024-01-01T00:00:00Z' },
              { policy_id: 'P-999999', event_timestamp: '2024-01-01T00:00:00Z' },
            ],
          }),
        ['entities[1].policy_id'],
      ],
      [
        'malformed entity id',
        () => post<Problem>('/pit-training', { entities: [{ claim_id: 'X', event_timestamp: '2024-01-01T00:00:00Z' }] }),
        ['entities[0].claim_id'],
      ],
      [
        'unknown view',
        () => post<Problem>('/pit-training', { entities: [{ policy_id: 'P-000001', event_timestamp: '2024-01-01T00:00:00Z' }], views: ['nope'] }),
        ['views[0]'],
      ],
      [
        'view without its key',
        () => post<Problem>('/pit-training', { entities: [{ policy_id: 'P-000001', event_timestamp: '2024-01-01T00:00:00Z' }], views: ['claim_report'] }),
        ['views[0]'],
      ],
      [
        'TTL that is not a duration',
        () => post<Problem>('/pit-training', { entities: [{ policy_id: 'P-000001', event_timestamp: '2024-01-01T00:00:00Z' }], ttl: '30 days' }),
        ['ttl'],
      ],
      ['neither entities nor a label set', () => post<Problem>('/pit-training', { views: ['policy_profile'] }), ['entities']],
      ['unknown label set', () => post<Problem>('/pit-training', { label_set: 'life' }), ['label_set']],
      ['bad as_of', () => post<Problem>('/offline', { as_of: 'yesterday' }), ['as_of']],
      ['unknown audit label set', () => post<Problem>('/leakage-audit', { label_set: 'x' }), ['label_set']],
    ];
    for (const [name, call, fields] of cases) {
      const res = await call();
      expect(res.status, name).toBe(400);
      expect(res.body.code, name).toBe('BAD_USER_INPUT');
      expect(
        res.body.errors.map((e) => e.field),
        name,
      ).toEqual(fields);
    }
    // text/csv is accepted only where documented.
    const elsewhere = await fetch(`${url}/features/offline`, { method: 'POST', headers: { 'content-type': 'text/csv' }, body: 'a,b\n' });
    expect(elsewhere.status).toBe(415);
  });

  it('POST /features/offline materializes as of a time; the online paths serve it whole, with its version', async () => {
    const asOf = '2024-06-01T00:00:00Z';
    const first = await post('/offline', { as_of: asOf, views: ['policy_profile', 'claim_report'] });
    expect(first.status).toBe(200);
    const m = first.body;
    const policiesThen = world.world.policyVersions.filter((v) => v.featureTs <= Date.parse(asOf));
    const claimsThen = world.world.claimReports.filter((r) => r.featureTs <= Date.parse(asOf));
    const policyRows = new Set(policiesThen.map((v) => v.policyId)).size;
    const claimRows = new Set(claimsThen.map((r) => r.claimId)).size;
    expect(m['views']).toEqual([
      expect.objectContaining({
        view: 'policy_profile',
        rows_written: policyRows,
        watermark: new Date(Math.max(...policiesThen.map((v) => v.featureTs))).toISOString(),
      }),
      expect.objectContaining({ view: 'claim_report', rows_written: claimRows }),
    ]);
    expect(m['rows_written']).toBe(policyRows + claimRows);
    expect(m['online_store']).toBe('database');
    expect(m['as_of']).toBe('2024-06-01T00:00:00.000Z');

    const id = policiesThen[0]!.policyId;
    const online = await rest(url, 'GET', `/features/online/policy/${id}`);
    expect(online.status).toBe(200);
    expect(online.body['policy_id']).toBe(id);
    expect(online.body['views']).toEqual([
      expect.objectContaining({
        view: 'policy_profile',
        version: expect.stringMatching(/^[0-9a-f]{12}$/),
        materialization_id: m['materialization_id'],
        as_of: m['as_of'],
      }),
    ]);
    for (const f of VIEW_DEFINITIONS[0]!.features) {
      expect(online.body['features'][columnName('policy_profile', f.name)]).toBe(expected('policy_profile', f.name, id, Date.parse(asOf)));
    }
    const claimId = claimsThen[0]!.claimId;
    const claim = await rest(url, 'GET', `/features/online/claim/${claimId}`);
    expect(claim.status).toBe(200);
    expect(claim.body['features']['claim_report__reported_amount']).toBe(expected('claim_report', 'reported_amount', claimId, Date.parse(asOf)));

    // A later materialization replaces the view whole: a new id and values as of the new time.
    const second = await post('/offline', { as_of: '2025-12-31T00:00:00Z', views: ['policy_profile'] });
    expect(Number(second.body['materialization_id'])).toBeGreaterThan(Number(m['materialization_id']));
    const again = await rest(url, 'GET', `/features/online/policy/${id}`);
    expect(again.body['views'][0].materialization_id).toBe(second.body['materialization_id']);
    expect(again.body['features']['policy_profile__driver_age']).toBe(expected('policy_profile', 'driver_age', id, Date.parse('2025-12-31T00:00:00Z')));

    expect((await rest(url, 'GET', '/features/online/policy/P-999999')).status).toBe(404);
    expect((await rest(url, 'GET', '/features/online/claim/C-999999')).body['code']).toBe('NOT_FOUND');
  });

  it('POST /features/leakage-audit ranks the planted severe leak first and measures its AUC inflation', async () => {
    const res = await post('/leakage-audit', { label_set: 'fraud' });
    expect(res.status).toBe(200);
    const a = res.body;
    expect(a['label_rows']).toBe(world.labelRows('fraud').length);
    const findings = a['findings'] as { view: string; severity: string; rows: number; rows_without_pit_value: number }[];
    expect(findings.slice(0, 2).map((f) => [f.view, f.severity])).toEqual([
      ['claim_settlement', 'severe'],
      ['claim_settlement', 'severe'],
    ]);
    expect(findings[0]!.rows).toBe(a['label_rows']);
    expect(findings[0]!.rows_without_pit_value).toBe(a['label_rows']);
    expect(findings.some((f) => f.severity === 'mild')).toBe(true);
    const e = a['evaluation'];
    expect(e.metric).toBe('roc_auc');
    expect(e.inflation).toBeGreaterThanOrEqual(0.05);
    expect(e.inflation).toBeCloseTo(e.unguarded_offline - e.point_in_time, 3);
    expect(e.unguarded_in_production).toBeLessThan(e.unguarded_offline);
    expect(e.train_rows + e.test_rows).toBe(a['label_rows']);
  });

  it('POST /features/pit-training joins as known by default: a late correction created after the event is not used for it', async () => {
    // A claim report corrected later: the same feature_timestamp, created days after the original.
    const view = world.views.get('claim_report')!;
    let original = -1;
    let correction = -1;
    for (let a = 0; a < view.length && correction < 0; a++) {
      for (let b = a + 1; b < Math.min(view.length, a + 50); b++) {
        if (view.entityCode[a] === view.entityCode[b] && view.ts[a] === view.ts[b] && view.created[b]! > view.created[a]! + 3_600_000) {
          [original, correction] = [a, b];
          break;
        }
      }
    }
    expect(correction).toBeGreaterThan(0);
    const amount = view.features.indexOf('reported_amount');
    expect(view.values[amount]![original]).not.toBe(view.values[amount]![correction]);
    const claimId = world.dicts.claim.ids[view.entityCode[original]!]!;
    // After the original was written, before the correction was.
    const at = new Date(view.created[original]! + 60_000).toISOString();
    const entities = [{ claim_id: claimId, event_timestamp: at }];
    const known = await post('/pit-training', { entities, views: ['claim_report'] });
    const byEventTime = await post('/pit-training', { entities, views: ['claim_report'], availability: 'event_time' });
    expect(known.status).toBe(200);
    expect(known.body['availability']).toBe('as_known');
    expect(byEventTime.body['availability']).toBe('event_time');
    expect(known.body['rows'][0]['claim_report__reported_amount']).toBe(view.values[amount]![original]);
    expect(byEventTime.body['rows'][0]['claim_report__reported_amount']).toBe(view.values[amount]![correction]);
    expect(known.body['rows'][0]['claim_report__reported_amount']).toBe(expected('claim_report', 'reported_amount', claimId, Date.parse(at)));
  });

  it('POST /features/leakage-audit reports, per view, the rows and the metric the two availability rules differ by', async () => {
    const res = await post('/leakage-audit', { label_set: 'fraud' });
    const a = res.body['availability'];
    expect(a.as_known).toBe(res.body['evaluation'].point_in_time);
    expect(a.difference).toBeCloseTo(a.event_time - a.as_known, 3);
    const byView = Object.fromEntries((a.views as { view: string; rows: number; event_time: number; difference: number }[]).map((v) => [v.view, v]));
    expect(Object.keys(byView)).toEqual(['claim_report', 'policy_profile', 'policy_claims_history', 'claim_settlement']);
    // Claim reports are corrected days after the report, which is the fraud label's event: they differ.
    expect(byView['claim_report']!.rows).toBeGreaterThan(0);
    for (const v of Object.values(byView)) if (v.rows === 0) expect(v.difference).toBe(0);
  });

  it('POST /features/leakage-audit refuses a test_from that empties a split, naming both counts, and changes nothing', async () => {
    const rows = world.labelRows('fraud');
    for (const [testFrom, empty, train, test] of [
      ['1900-01-01T00:00:00Z', 'training', 0, rows.length],
      ['2999-01-01T00:00:00Z', 'test', rows.length, 0],
    ] as const) {
      const res = await post<Problem>('/leakage-audit', { label_set: 'fraud', test_from: testFrom });
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('BAD_USER_INPUT');
      expect(res.body.errors.map((e) => e.field)).toEqual(['test_from']);
      expect(res.body.detail).toContain(
        `leaves the ${empty} split empty (training ${train} rows before it, test ${test} rows at or after it, of ${rows.length} label rows`,
      );
    }
  });

  it('POST /features/leakage-audit answers null metrics with the reason when the test split holds one class', async () => {
    // The latest cutoff whose test split still has rows but no fraud: its metric (ROC AUC) is undefined.
    const sorted = [...world.labelRows('fraud')].sort((a, b) => b.eventTs - a.eventTs);
    const lastFraud = sorted.findIndex((r) => (r.label ?? 0) > 0);
    expect(lastFraud).toBeGreaterThan(0);
    const cutoff = sorted[lastFraud - 1]!.eventTs;
    const testRows = sorted.filter((r) => r.eventTs >= cutoff).length;
    const res = await post('/leakage-audit', { label_set: 'fraud', test_from: new Date(cutoff).toISOString() });
    expect(res.status).toBe(200);
    expect(res.body['evaluation']).toMatchObject({
      metric: 'roc_auc',
      point_in_time: null,
      unguarded_offline: null,
      unguarded_in_production: null,
      inflation: null,
      unavailable_reason: `the test split holds one class only (0 positive of ${testRows} rows)`,
      test_rows: testRows,
    });
    // The findings do not depend on the split: they still stand.
    expect((res.body['findings'] as unknown[]).length).toBeGreaterThan(0);
  });

  it('GET /features/feature-importance ranks features of the three models against a held-out metric', async () => {
    const res = await rest(url, 'GET', '/features/feature-importance');
    expect(res.status).toBe(200);
    const models = res.body['models'] as {
      model: string;
      metric: string;
      held_out: number;
      features: { column: string; importance: number; rank: number }[];
    }[];
    expect(models.map((m) => [m.model, m.metric])).toEqual([
      ['underwriting', 'roc_auc'],
      ['pricing', 'r2_log1p'],
      ['fraud', 'roc_auc'],
    ]);
    for (const m of models) {
      expect(m.features.map((f) => f.rank)).toEqual(m.features.map((_, i) => i + 1));
      expect(m.features[0]!.importance).toBeGreaterThan(0);
      for (let i = 1; i < m.features.length; i++) expect(m.features[i]!.importance).toBeLessThanOrEqual(m.features[i - 1]!.importance);
    }
    // Held-out metrics on the out-of-time period (small world here: wide, but the fraud signal is strong).
    for (const m of models) expect(Math.abs(m.held_out)).toBeLessThanOrEqual(1);
    expect(models[2]!.held_out).toBeGreaterThan(0.55);
    // On point-in-time frames the post-outcome settlement columns are always null: no importance at all.
    const settlement = models[2]!.features.filter((f) => f.column.startsWith('claim_settlement'));
    expect(settlement.map((f) => f.importance)).toEqual([0, 0]);
  });
});
