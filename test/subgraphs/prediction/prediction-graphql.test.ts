import { execute, parse } from 'graphql';
import { beforeAll, describe, expect, it } from 'vitest';
import type { SubgraphInstance } from '../../../platform/subgraph.js';
import { deliveryTravelFeatures } from '../../../subgraphs/prediction/forecasts.js';
import { loadModels } from '../../../subgraphs/prediction/model.js';
import { gql, hoursFromNow, rest } from '../../support/http.js';
import { dwellInput, lockerInput, travelFeatures, travelInput, withPredictionUnreachable } from '../../support/prediction.js';
import { startTestServer } from '../../support/server.js';
import { SYSTEM_PRINCIPAL } from '../../../platform/principal.js';

const TRANSIT = 'q10Minutes q50Minutes q90Minutes intervalWidthMinutes modelVersion';
const DWELL = 'q10Minutes q50Minutes q90Minutes intervalWidthMinutes worstCaseMarginMinutes risk interpretation modelVersion';
const BOOKING = `query($id: ID!) { booking(id: $id) {
  id status deliveryDistanceKm deliveryDepartAt tracking { eta }
  deliveryForecast { q10Minutes q50Minutes q90Minutes arrivalQ10 arrivalQ50 arrivalQ90 modelVersion } } }`;

async function book(url: string, machineIds: string[], locationId: string): Promise<string> {
  const q = await gql(url, `mutation($input: CreateQuoteInput!) { createQuote(input: $input) { id } }`, {
    input: { machineIds, locationId, startTime: hoursFromNow(6), durationHours: 8 },
  });
  expect(q.errors).toBeUndefined();
  const b = await gql(url, `mutation($q: ID!) { confirmBooking(input: { quoteId: $q, customerName: "Forecast BV" }) { id } }`, {
    q: q.data!['createQuote'].id,
  });
  expect(b.errors).toBeUndefined();
  return b.data!['confirmBooking'].id;
}

describe('prediction over GraphQL', () => {
  let url: string;
  let subgraph: SubgraphInstance;
  const models = loadModels();
  beforeAll(async () => {
    const server = await startTestServer();
    url = server.url;
    subgraph = server.subgraphs.get('prediction')!;
  });

  it('predicts dwell, travel and locker diversion with typed enums and Booleans', async () => {
    const res = await gql(
      url,
      `query($d: DwellInput!, $t: TravelInput!, $l: LockerInput!) {
      predictDwell(input: $d) { ${DWELL} } predictTravelTime(input: $t) { ${TRANSIT} }
      predictLockerDiversion(input: $l) { successProbability modelVersion } }`,
      { d: dwellInput, t: travelInput, l: lockerInput },
    );
    expect(res.errors).toBeUndefined();
    const { predictDwell: d, predictTravelTime: t, predictLockerDiversion: l } = res.data!;
    expect(d.q10Minutes).toBeLessThanOrEqual(d.q50Minutes);
    expect(d.q50Minutes).toBeLessThanOrEqual(d.q90Minutes);
    expect(d.modelVersion).toBe(models.dwell.version);
    const q = models.travel.predict(travelFeatures);
    expect(t).toEqual({
      q10Minutes: q.q10,
      q50Minutes: q.q50,
      q90Minutes: q.q90,
      intervalWidthMinutes: Math.round((q.q90 - q.q10) * 10) / 10,
      modelVersion: models.travel.version,
    });
    expect(l.successProbability).toBeGreaterThan(0);
    expect(l.successProbability).toBeLessThan(1);
  });

  it('batch queries answer in input order, as the single ones do', async () => {
    const inputs = [travelInput, { ...travelInput, distanceKm: 120 }, { ...travelInput, roadType: 'URBAN', distanceKm: 4 }];
    const batch = await gql(url, `query($i: [TravelInput!]!) { predictTravelTimeBatch(inputs: $i) { ${TRANSIT} } }`, { i: inputs });
    expect(batch.errors).toBeUndefined();
    for (const [i, input] of inputs.entries()) {
      const single = await gql(url, `query($t: TravelInput!) { predictTravelTime(input: $t) { ${TRANSIT} } }`, { t: input });
      expect(batch.data!['predictTravelTimeBatch'][i]).toEqual(single.data!['predictTravelTime']);
    }
    const dwell = await gql(url, `query($i: [DwellInput!]!) { predictDwellBatch(inputs: $i) { q50Minutes } }`, { i: [dwellInput] });
    expect(dwell.data!['predictDwellBatch']).toHaveLength(1);
    const locker = await gql(url, `query($i: [LockerInput!]!) { predictLockerDiversionBatch(inputs: $i) { successProbability } }`, {
      i: [lockerInput, lockerInput],
    });
    expect(locker.data!['predictLockerDiversionBatch']).toHaveLength(2);
  });

  it('BAD_USER_INPUT names each offending field (camelCase, with the batch index)', async () => {
    const single = await gql(url, `query($t: TravelInput!) { predictTravelTime(input: $t) { q50Minutes } }`, {
      t: { ...travelInput, distanceKm: 0, originDensity: 2 },
    });
    expect(single.errors?.[0]?.extensions?.['code']).toBe('BAD_USER_INPUT');
    expect(single.errors?.[0]?.extensions?.['fields'].map((f: { field: string }) => f.field).sort()).toEqual(['distanceKm', 'originDensity']);

    const batch = await gql(url, `query($i: [DwellInput!]!) { predictDwellBatch(inputs: $i) { q50Minutes } }`, {
      i: [dwellInput, { ...dwellInput, queueLength: 80 }],
    });
    expect(batch.errors?.[0]?.extensions?.['fields']).toEqual([{ field: 'inputs.1.queueLength', message: 'must be at most 50' }]);

    const missing = await gql(url, `query($t: TravelInput!) { predictTravelTime(input: $t) { q50Minutes } }`, {
      t: { ...travelInput, roadType: undefined },
    });
    expect(missing.errors?.[0]?.extensions?.['code']).toBe('BAD_USER_INPUT');
  });

  it('coldChainMargin composes the two models server side', async () => {
    const remaining = dwellInput['ischaemicRemainingMin'];
    const res = await gql(
      url,
      `query($d: DwellInput!, $t: TravelInput!, $r: Float!) {
      coldChainMargin(dwell: $d, travel: $t, ischaemicRemainingMin: $r) {
        ischaemicRemainingMin dwell { q10Minutes q50Minutes q90Minutes } travel { q10Minutes q50Minutes q90Minutes }
        best { totalMinutes marginMinutes } median { totalMinutes marginMinutes } worst { totalMinutes marginMinutes } worstCaseBreach } }`,
      { d: dwellInput, t: travelInput, r: remaining },
    );
    expect(res.errors).toBeUndefined();
    const c = res.data!['coldChainMargin'];
    expect(c.ischaemicRemainingMin).toBe(remaining);
    expect(c.worst.totalMinutes).toBeCloseTo(c.dwell.q90Minutes + c.travel.q90Minutes, 1);
    expect(c.best.marginMinutes).toBeCloseTo(remaining - c.dwell.q10Minutes - c.travel.q10Minutes, 1);
    expect(c.worstCaseBreach).toBe(c.worst.marginMinutes < 0);
  });

  it('predictionModels shows versions, training time and held-out metrics', async () => {
    const res = await gql(
      url,
      `{ predictionModels { ready seed trainedAt data
      dwell { version featureCount coverage80 pinballLoss baselinePinballLoss specCoverage80 baseline
        coverageByDecile { feature groups { from to size coverage80 meanWidthMinutes } } }
      travel { version featureCount coverage80 specCoverage80 coverageByDecile { feature groups { to coverage80 } } }
      locker { version featureCount rocAuc brierScore baselineBrierScore calibrationError baseRate oracleRocAuc specRocAuc
        calibrationByDecile { feature groups { size meanProbability observedRate } } } } }`,
    );
    expect(res.errors).toBeUndefined();
    const m = res.data!['predictionModels'];
    expect(m).toMatchObject({ ready: true, seed: models.metrics.seed, trainedAt: models.metrics.trainedAt });
    expect(m.dwell).toMatchObject({ version: models.dwell.version, featureCount: 22, specCoverage80: 0.747 });
    expect(m.travel).toMatchObject({ featureCount: 12, specCoverage80: 0.771 });
    expect(m.locker).toMatchObject({ featureCount: 10, specRocAuc: 0.849 });
    expect(m.dwell.coverageByDecile.map((c: { feature: string }) => c.feature)).toEqual(['floor_number', 'queue_length', 'distance_to_opc_km', 'hour_of_day']);
    const floors = m.dwell.coverageByDecile[0].groups;
    expect(floors.at(-1).to).toBe(60);
    expect(floors.map((g: { size: number }) => g.size)).toEqual(models.metrics.dwell.coverageByDecile['floor_number']!.map((g) => g.n));
    expect(m.travel.coverageByDecile[0].groups).toHaveLength(10);
    expect(m.dwell.baseline).toContain('per handover');
    expect(m.locker.calibrationByDecile.map((c: { feature: string }) => c.feature)).toEqual(['locker_distance_km', 'handoff_window_min', 'hour_of_day']);
  });

  it('one query returns a rental booking with its delivery-minute quantiles from the travel model', async () => {
    const id = await book(url, ['EQ-002', 'EQ-006'], 'LOC-004');
    const res = await gql(url, BOOKING, { id });
    expect(res.errors).toBeUndefined();
    const b = res.data!['booking'];
    expect(b.status).toBe('CONFIRMED');
    const f = b.deliveryForecast;
    expect(f.q10Minutes).toBeGreaterThan(0);
    expect(f.q10Minutes).toBeLessThanOrEqual(f.q50Minutes);
    expect(f.q50Minutes).toBeLessThanOrEqual(f.q90Minutes);
    // The travel model applied to the booking's depot-to-site distance and departure.
    const expected = models.travel.predict(deliveryTravelFeatures(b.deliveryDistanceKm, new Date(b.deliveryDepartAt)));
    expect(f).toMatchObject({ q10Minutes: expected.q10, q50Minutes: expected.q50, q90Minutes: expected.q90 });
    const departs = Date.parse(b.deliveryDepartAt);
    expect(Date.parse(f.arrivalQ10)).toBe(departs + Math.round(f.q10Minutes * 60_000));
    expect(Date.parse(f.arrivalQ90)).toBe(departs + Math.round(f.q90Minutes * 60_000));
  });

  it('resolves the Booking entity in the prediction subgraph from its key and @requires fields (_entities)', async () => {
    const result = await execute({
      schema: subgraph.schema,
      document: parse(`query($r: [_Any!]!) { _entities(representations: $r) { ... on Booking { id deliveryForecast { q50Minutes arrivalQ50 } } } }`),
      variableValues: {
        r: [
          { __typename: 'Booking', id: 'BK-1', deliveryDistanceKm: 30, deliveryDepartAt: '2026-11-24T07:15:00.000Z' },
          { __typename: 'Booking', id: 'BK-2', deliveryDistanceKm: 80, deliveryDepartAt: '2026-11-24T13:00:00.000Z' },
        ],
      },
      contextValue: subgraph.context({ headers: {}, principal: SYSTEM_PRINCIPAL }),
    });
    expect(result.errors).toBeUndefined();
    const [a, b] = (result.data as { _entities: { id: string; deliveryForecast: { q50Minutes: number; arrivalQ50: string } }[] })._entities;
    expect(a!.id).toBe('BK-1');
    expect(b!.deliveryForecast.q50Minutes).toBeGreaterThan(a!.deliveryForecast.q50Minutes);
    expect(a!.deliveryForecast.arrivalQ50).toBe(new Date(Date.parse('2026-11-24T07:15:00.000Z') + a!.deliveryForecast.q50Minutes * 60_000).toISOString());
  });
});

describe('when the prediction subgraph cannot answer', () => {
  it('the booking still comes back, with deliveryForecast null and an UPSTREAM_UNAVAILABLE error on that field', async () => {
    const { url } = await startTestServer({ subgraphs: withPredictionUnreachable() });
    const id = await book(url, ['EQ-004'], 'LOC-002');
    const res = await gql(url, BOOKING, { id });
    expect(res.data!['booking']).toMatchObject({ id, status: 'CONFIRMED', deliveryForecast: null });
    expect(res.data!['booking'].tracking.eta).toEqual(expect.any(String));
    expect(res.errors).toHaveLength(1);
    expect(res.errors![0]).toMatchObject({ path: ['booking', 'deliveryForecast'], extensions: { code: 'UPSTREAM_UNAVAILABLE' } });

    const restCall = await rest(url, 'POST', '/prediction/predict/travel_time', travelFeatures);
    expect(restCall.status).toBe(502);
    expect(restCall.body).toMatchObject({ code: 'UPSTREAM_UNAVAILABLE' });
    expect((await rest(url, 'GET', '/rental/fleet/summary')).status).toBe(200);
  });
});
