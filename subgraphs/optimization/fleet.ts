import { bearingOf, KNOT_MPS, LocalPlane, type LatLon, type Point } from './geo.js';
import { Random } from '../../platform/random.js';

/**
 * A simulated AIS fleet in the approaches to Rotterdam. Every vessel sails a traffic lane back and forth
 * at its own speed, keeping to starboard of the lane's centre line; its position is a pure function of its
 * track parameters and the time, so every instance computes the same fleet at the same instant.
 */

const VESSEL_TYPES = ['CARGO', 'TANKER', 'CONTAINER', 'PASSENGER', 'TUG', 'PILOT', 'FISHING'] as const;
export type VesselType = (typeof VESSEL_TYPES)[number];

/** The fleet's reference point (the Maasmond, the port entrance): the local plane's origin. */
const PORT_ENTRANCE: LatLon = { latitude: 51.9817, longitude: 4.0558 };
export const plane = new LocalPlane(PORT_ENTRANCE);

interface Lane {
  name: string;
  waypoints: LatLon[];
}

/** Traffic lanes, as waypoints (lat, lon), each ending at or near the port entrance. */
export const LANES: readonly Lane[] = [
  { name: 'Maasgeul', waypoints: [{ latitude: 52.017, longitude: 3.62 }, { latitude: 51.995, longitude: 3.9 }, PORT_ENTRANCE] },
  {
    name: 'Eurogeul',
    waypoints: [
      { latitude: 52.07, longitude: 3.3 },
      { latitude: 52.02, longitude: 3.62 },
      { latitude: 51.995, longitude: 3.9 },
    ],
  },
  {
    name: 'North approach',
    waypoints: [
      { latitude: 52.25, longitude: 3.95 },
      { latitude: 52.08, longitude: 3.98 },
      { latitude: 51.99, longitude: 4.02 },
    ],
  },
  {
    name: 'South approach',
    waypoints: [
      { latitude: 51.78, longitude: 3.75 },
      { latitude: 51.9, longitude: 3.92 },
      { latitude: 51.975, longitude: 4.03 },
    ],
  },
  { name: 'Nieuwe Waterweg', waypoints: [PORT_ENTRANCE, { latitude: 51.955, longitude: 4.12 }, { latitude: 51.905, longitude: 4.25 }] },
];

/** Zones with a speed limit (circles in the local plane). */
export interface SpeedZone {
  id: string;
  name: string;
  center: LatLon;
  radiusM: number;
  limitKnots: number;
}

export const SPEED_ZONES: readonly SpeedZone[] = [
  { id: 'ZONE-MAASMOND', name: 'Maasmond port entrance', center: PORT_ENTRANCE, radiusM: 3000, limitKnots: 10 },
  { id: 'ZONE-WATERWEG', name: 'Nieuwe Waterweg', center: { latitude: 51.93, longitude: 4.19 }, radiusM: 6000, limitKnots: 8 },
  { id: 'ZONE-PILOT', name: 'Pilot boarding area', center: { latitude: 52.0, longitude: 3.85 }, radiusM: 2500, limitKnots: 14 },
];

export interface VesselTrack {
  lane: number;
  /** Where on the lane (metres along, out and back) the vessel is at the epoch. */
  phaseM: number;
  speedKnots: number;
  /** Distance to starboard of the lane's centre line. */
  offsetM: number;
  /** Constant difference between heading and course (drift), degrees. */
  driftDeg: number;
}

export interface VesselSpec {
  mmsi: string;
  name: string;
  type: VesselType;
  track: VesselTrack;
}

export interface VesselPosition {
  mmsi: string;
  latitude: number;
  longitude: number;
  /** Speed over ground, knots. */
  sog: number;
  /** Course over ground, degrees. */
  cog: number;
  heading: number;
}

/** Flag-state prefixes (maritime identification digits) of the simulated fleet. */
const MIDS = ['244', '245', '246', '211', '205', '219', '235', '257'];
const NAME_A = ['North', 'Delta', 'Maas', 'Sea', 'Nordic', 'Amber', 'Silver', 'Baltic', 'Iron', 'Coral', 'Polar', 'Orion'];
const NAME_B = ['Star', 'Trader', 'Spirit', 'Pride', 'Express', 'Carrier', 'Runner', 'Voyager', 'Horizon', 'Falcon', 'Breeze', 'Tide'];
const SPEEDS: Record<VesselType, [number, number]> = {
  CARGO: [9, 13],
  TANKER: [8, 12],
  CONTAINER: [12, 16],
  PASSENGER: [14, 18],
  TUG: [6, 10],
  PILOT: [12, 18],
  FISHING: [5, 9],
};

/** The simulation's epoch: track phases are measured from it. */
const EPOCH_MS = Date.UTC(2026, 0, 1);

/** A seeded fleet of `size` vessels with distinct 9-digit MMSIs. */
export function generateFleet(seed: number, size: number): VesselSpec[] {
  const rng = new Random(seed, 'fleet');
  const seen = new Set<string>();
  const fleet: VesselSpec[] = [];
  while (fleet.length < size) {
    const mmsi = `${MIDS[rng.int(MIDS.length)]}${String(rng.int(1_000_000)).padStart(6, '0')}`;
    if (seen.has(mmsi)) continue;
    seen.add(mmsi);
    const type = VESSEL_TYPES[rng.int(VESSEL_TYPES.length)]!;
    const [lo, hi] = SPEEDS[type];
    const lane = rng.int(LANES.length);
    fleet.push({
      mmsi,
      name: `${NAME_A[rng.int(NAME_A.length)]} ${NAME_B[rng.int(NAME_B.length)]}`.toUpperCase(),
      type,
      track: {
        lane,
        phaseM: rng.range(0, 2 * laneLength(lane)),
        speedKnots: Math.round(rng.range(lo, hi) * 10) / 10,
        offsetM: Math.round(rng.range(250, 900)),
        driftDeg: Math.round(rng.range(-4, 4) * 10) / 10,
      },
    });
  }
  return fleet;
}

const lanePoints = LANES.map((l) => l.waypoints.map((p) => plane.project(p)));

function laneLength(lane: number): number {
  const pts = lanePoints[lane]!;
  let total = 0;
  for (let i = 1; i < pts.length; i++) total += Math.hypot(pts[i]!.x - pts[i - 1]!.x, pts[i]!.y - pts[i - 1]!.y);
  return total;
}

/** The speed a vessel keeps at a point: its own, or 0.5 kn under the limit of a zone it is in. */
function speedAt(p: Point, own: number): number {
  let v = own;
  for (const z of SPEED_ZONES) {
    const c = plane.project(z.center);
    if (Math.hypot(p.x - c.x, p.y - c.y) <= z.radiusM) v = Math.min(v, z.limitKnots - 0.5);
  }
  return v;
}

/** Resolution of a vessel's speed profile along its lane, metres. */
const STEP_M = 25;

interface Profile {
  /** Seconds from the lane's start to each step point, outbound then back (2 x steps + 1 points). */
  seconds: Float64Array;
  /** Metres along the out-and-back path of each point. */
  metres: Float64Array;
}
const profiles = new Map<string, Profile>();

/** Where on the lane (centre line, direction, starboard offset applied) a vessel is after `m` metres of out-and-back. */
function pointAlong(track: VesselTrack, m: number): { p: Point; dx: number; dy: number } {
  const pts = lanePoints[track.lane]!;
  const length = laneLength(track.lane);
  const outbound = m < length;
  let along = outbound ? m : 2 * length - m;
  let seg = 0;
  for (; seg < pts.length - 2; seg++) {
    const l = Math.hypot(pts[seg + 1]!.x - pts[seg]!.x, pts[seg + 1]!.y - pts[seg]!.y);
    if (along <= l) break;
    along -= l;
  }
  const a = pts[seg]!;
  const b = pts[seg + 1]!;
  const l = Math.hypot(b.x - a.x, b.y - a.y);
  const ux = (b.x - a.x) / l;
  const uy = (b.y - a.y) / l;
  const t = Math.min(along, l);
  const dx = outbound ? ux : -ux;
  const dy = outbound ? uy : -uy;
  // Starboard is to the right of the direction of travel.
  return { p: { x: a.x + ux * t + dy * track.offsetM, y: a.y + uy * t - dx * track.offsetM }, dx, dy };
}

/** Time along the out-and-back path at the speed the vessel keeps at each point (slower inside zones). */
function profileOf(track: VesselTrack): Profile {
  const key = JSON.stringify(track);
  const cached = profiles.get(key);
  if (cached) return cached;
  const total = 2 * laneLength(track.lane);
  const count = Math.ceil(total / STEP_M);
  const seconds = new Float64Array(count + 1);
  const metres = new Float64Array(count + 1);
  for (let k = 1; k <= count; k++) {
    metres[k] = Math.min(total, k * STEP_M);
    const mid = pointAlong(track, (metres[k - 1]! + metres[k]!) / 2).p;
    seconds[k] = seconds[k - 1]! + (metres[k]! - metres[k - 1]!) / (speedAt(mid, track.speedKnots) * KNOT_MPS);
  }
  const profile = { seconds, metres };
  profiles.set(key, profile);
  return profile;
}

/** A vessel's position at `at`: it sails its speed profile from its phase at the epoch, out and back. */
export function positionAt(spec: VesselSpec, at: Date): VesselPosition {
  const { track } = spec;
  const profile = profileOf(track);
  const period = profile.seconds[profile.seconds.length - 1]!;
  const total = profile.metres[profile.metres.length - 1]!;
  const startSeconds = interpolate(profile.metres, profile.seconds, ((track.phaseM % total) + total) % total);
  const t = ((((at.getTime() - EPOCH_MS) / 1000 + startSeconds) % period) + period) % period;
  const m = interpolate(profile.seconds, profile.metres, t);
  const { p, dx, dy } = pointAlong(track, m);
  const ll = plane.unproject(p);
  const cog = bearingOf(dx, dy);
  return {
    mmsi: spec.mmsi,
    latitude: Math.round(ll.latitude * 1e6) / 1e6,
    longitude: Math.round(ll.longitude * 1e6) / 1e6,
    sog: Math.round(speedAt(p, track.speedKnots) * 10) / 10,
    cog: Math.round(cog * 10) / 10,
    heading: Math.round((((cog + track.driftDeg) % 360) + 360) % 360),
  };
}

/** y at x on the increasing polyline (xs, ys). */
function interpolate(xs: Float64Array, ys: Float64Array, x: number): number {
  let lo = 0;
  let hi = xs.length - 1;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (xs[mid]! <= x) lo = mid;
    else hi = mid;
  }
  const span = xs[hi]! - xs[lo]!;
  return span > 0 ? ys[lo]! + ((ys[hi]! - ys[lo]!) * (x - xs[lo]!)) / span : ys[lo]!;
}
