/** Mean Earth radius (IUGG), metres. */
const EARTH_RADIUS_M = 6_371_008.8;
const METRES_PER_NM = 1852;
export const KNOT_MPS = METRES_PER_NM / 3600;

export interface LatLon {
  latitude: number;
  longitude: number;
}

export interface Point {
  x: number;
  y: number;
}

const rad = (deg: number) => (deg * Math.PI) / 180;
const deg = (r: number) => (r * 180) / Math.PI;

/**
 * A local plane (equirectangular about a reference point): x east, y north, in metres. Over the few tens
 * of kilometres of a port approach its distances are within 0.1% of great-circle ones, and a distance
 * computed in it is exact arithmetic on the projected coordinates, which is what the verifier needs.
 */
export class LocalPlane {
  private readonly cos0: number;

  constructor(readonly origin: LatLon) {
    this.cos0 = Math.cos(rad(origin.latitude));
  }

  project(p: LatLon): Point {
    return {
      x: EARTH_RADIUS_M * rad(p.longitude - this.origin.longitude) * this.cos0,
      y: EARTH_RADIUS_M * rad(p.latitude - this.origin.latitude),
    };
  }

  unproject(p: Point): LatLon {
    return {
      latitude: this.origin.latitude + deg(p.y / EARTH_RADIUS_M),
      longitude: this.origin.longitude + deg(p.x / (EARTH_RADIUS_M * this.cos0)),
    };
  }
}

/** Great-circle distance, metres. */
export function haversineM(a: LatLon, b: LatLon): number {
  const dLat = rad(b.latitude - a.latitude);
  const dLon = rad(b.longitude - a.longitude);
  const h = Math.sin(dLat / 2) ** 2 + Math.cos(rad(a.latitude)) * Math.cos(rad(b.latitude)) * Math.sin(dLon / 2) ** 2;
  return 2 * EARTH_RADIUS_M * Math.asin(Math.min(1, Math.sqrt(h)));
}

/** Compass bearing of the vector (dx east, dy north), degrees 0..360. */
export function bearingOf(dx: number, dy: number): number {
  const b = deg(Math.atan2(dx, dy));
  return (b + 360) % 360;
}
