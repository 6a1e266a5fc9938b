export interface LatLon {
  latitude: number;
  longitude: number;
}

const EARTH_RADIUS_KM = 6371.0088;
/** Roads are longer than the great circle; 1.25 is a common detour factor for regional trucking. */
const ROAD_DETOUR_FACTOR = 1.25;

const rad = (deg: number) => (deg * Math.PI) / 180;

/** Great-circle (haversine) distance in km. */
export function haversineKm(a: LatLon, b: LatLon): number {
  const dLat = rad(b.latitude - a.latitude);
  const dLon = rad(b.longitude - a.longitude);
  const h = Math.sin(dLat / 2) ** 2 + Math.cos(rad(a.latitude)) * Math.cos(rad(b.latitude)) * Math.sin(dLon / 2) ** 2;
  return 2 * EARTH_RADIUS_KM * Math.asin(Math.min(1, Math.sqrt(h)));
}

export function roadKm(a: LatLon, b: LatLon): number {
  return haversineKm(a, b) * ROAD_DETOUR_FACTOR;
}

/** The point a fraction `t` (0..1) of the way from a to b; linear in degrees, accurate at regional scale. */
export function interpolate(a: LatLon, b: LatLon, t: number): LatLon {
  const f = Math.min(1, Math.max(0, t));
  return {
    latitude: round6(a.latitude + (b.latitude - a.latitude) * f),
    longitude: round6(a.longitude + (b.longitude - a.longitude) * f),
  };
}

const round6 = (x: number) => Math.round(x * 1e6) / 1e6;
