import { beforeAll, describe, expect, it } from 'vitest';
import { generateFleet, plane, positionAt, SPEED_ZONES, type VesselPosition } from '../../../subgraphs/optimization/fleet.js';
import { loadZ3, MAX_LISTED_VIOLATIONS, plainCheck, verifyFleet } from '../../../subgraphs/optimization/verify.js';

/** Vessels on a square grid `spacing` metres apart, north-west of the zones, all at 9 kn. */
function gridFleet(count: number, spacing: number): VesselPosition[] {
  const side = Math.ceil(Math.sqrt(count));
  return Array.from({ length: count }, (_, k) => {
    const ll = plane.unproject({ x: -40_000 + (k % side) * spacing, y: 20_000 + Math.floor(k / side) * spacing });
    return { mmsi: String(244_000_000 + k), latitude: ll.latitude, longitude: ll.longitude, sog: 9, cog: 90, heading: 90 };
  });
}

/** A vessel `metres` east of another. */
function beside(v: VesselPosition, metres: number, mmsi: string): VesselPosition {
  const p = plane.project(v);
  const ll = plane.unproject({ x: p.x + metres, y: p.y });
  return { ...v, mmsi, latitude: ll.latitude, longitude: ll.longitude };
}

describe('Z3 verification of fleet safety', () => {
  beforeAll(async () => {
    await loadZ3();
  }, 60_000);

  it('proves a safe fleet safe: the negated property is unsat, and the plain check agrees', async () => {
    const fleet = gridFleet(30, 1000);
    const v = await verifyFleet(fleet, 463);
    expect(v.status).toBe('PROVED_SAFE');
    expect(v.safe).toBe(true);
    expect(v.separationViolations).toEqual([]);
    expect(v.speedViolations).toEqual([]);
    expect(v.solver.queries.map((q) => q.result)).toEqual(['unsat']);
    expect(v.proof).toMatch(/^unsat: .*unsatisfiable/);
    expect(v.crossCheck).toMatchObject({ agrees: true, separationViolations: 0, speedViolations: 0 });
    expect(v.pairs).toBe(435);
    expect(v.solverPairs).toBe(435);
    expect(v.closest!.distanceM).toBeCloseTo(1000, 0);
  });

  it('finds a planted separation violation and a speeder, lists exactly them, and proves the list complete', async () => {
    const fleet = gridFleet(30, 1000);
    const intruder = beside(fleet[7]!, 180, '211000001');
    const zone = SPEED_ZONES[0]!;
    const speeder: VesselPosition = {
      mmsi: '211000002',
      latitude: zone.center.latitude,
      longitude: zone.center.longitude,
      sog: zone.limitKnots + 3.5,
      cog: 0,
      heading: 0,
    };
    const v = await verifyFleet([...fleet, intruder, speeder], 463);
    expect(v.status).toBe('VIOLATIONS_FOUND');
    expect(v.separationViolations).toHaveLength(1);
    expect(v.separationViolations[0]).toMatchObject({ a: fleet[7]!.mmsi, b: '211000001' });
    expect(v.separationViolations[0]!.distanceM).toBeCloseTo(180, 0);
    expect(v.speedViolations).toEqual([{ mmsi: '211000002', zoneId: zone.id, speedKnots: zone.limitKnots + 3.5, limitKnots: zone.limitKnots }]);
    expect(v.solver.queries.map((q) => q.result)).toEqual(['sat', 'unsat']);
    expect(v.proof).toContain(`${fleet[7]!.mmsi} and 211000001 are`);
    expect(v.proof).toContain('the list is complete');
    expect(v.crossCheck.agrees).toBe(true);
  });

  it('the threshold decides: the same pair is safe at 150 m and a violation at 463 m', async () => {
    const fleet = gridFleet(10, 1000);
    const pair = [...fleet, beside(fleet[0]!, 200, '211000003')];
    expect((await verifyFleet(pair, 150)).safe).toBe(true);
    expect((await verifyFleet(pair, 463)).separationViolations).toHaveLength(1);
  });

  it('a large fleet (grid of candidate pairs) agrees with the all-pairs plain check', async () => {
    const fleet = generateFleet(11, 400).map((s) => positionAt(s, new Date('2026-11-23T12:00:00Z')));
    const v = await verifyFleet(fleet, 463);
    const plain = plainCheck(fleet, 463);
    expect(v.solverPairs).toBeLessThan(v.pairs);
    expect(v.crossCheck.separationViolations).toBe(plain.separation.length);
    expect(v.separationViolations.length).toBe(Math.min(plain.separation.length, MAX_LISTED_VIOLATIONS));
    expect(v.separationViolations.length).toBeGreaterThan(0);
    const closestFirst = [...plain.separation].sort((a, b) => a.distanceM - b.distanceM).slice(0, v.separationViolations.length);
    expect(v.separationViolations.map((x) => x.distanceM)).toEqual(closestFirst.map((x) => x.distanceM));
    expect(v.crossCheck.agrees).toBe(true);
  });
});
