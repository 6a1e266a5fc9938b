import { interpolate, type LatLon } from './geo.js';

/** Delivery simulation constants. */
export const DELIVERY = {
  /** Average speed of a low-loader on regional roads. */
  speedKmh: 45,
  /** Loading at the depot between dispatch and departure. */
  loadingMinutes: 15,
  /** Trucks aim to arrive this long before the rental starts. */
  arrivalBufferMinutes: 30,
} as const;

export type TrackingStatus = 'scheduled' | 'dispatched' | 'in_transit' | 'on_site' | 'completed';

/** A planned truck run, fixed at confirmation and stored with the booking. */
export interface PlannedLeg {
  depotId: string;
  machineIds: string[];
  distanceKm: number;
  dispatchAt: string;
  departAt: string;
  arriveAt: string;
}

/** Road time of a truck run, milliseconds: the distance at the low-loader's average speed. */
export const roadMs = (distanceKm: number) => (distanceKm / DELIVERY.speedKmh) * 3_600_000;

/**
 * When every truck run is on site if all are dispatched at `dispatchAt`: loading at the depot, then the
 * road time. The same figures `planLegs` schedules with, so a quote's promise and its tracking agree.
 */
export function earliestArrival(deliveries: readonly { distanceKm: number }[], dispatchAt: Date): Date {
  const longest = Math.max(0, ...deliveries.map((d) => roadMs(d.distanceKm)));
  return new Date(dispatchAt.getTime() + DELIVERY.loadingMinutes * 60_000 + longest);
}

/**
 * The earliest start a quote can promise: trucks are dispatched when the booking is confirmed, and a quote
 * can be confirmed until it expires, so its machines are on site by `earliestArrival(deliveries,
 * expiresAt)`, rounded up to the whole minute. A start at or after it is always met by `planLegs`, whenever
 * within the quote's life the booking is confirmed.
 */
export function earliestStart(deliveries: readonly { distanceKm: number }[], expiresAt: Date): Date {
  return new Date(Math.ceil(earliestArrival(deliveries, expiresAt).getTime() / 60_000) * 60_000);
}

/**
 * Plans one truck run per depot: dispatched so it arrives `arrivalBufferMinutes` before the start,
 * but never before the booking is confirmed.
 */
export function planLegs(
  deliveries: { depotId: string; machineIds: string[]; distanceKm: number }[],
  confirmedAt: Date,
  startTime: Date,
): PlannedLeg[] {
  return deliveries.map((d) => {
    const travelMs = roadMs(d.distanceKm);
    const loadMs = DELIVERY.loadingMinutes * 60_000;
    const idealDispatch = startTime.getTime() - DELIVERY.arrivalBufferMinutes * 60_000 - travelMs - loadMs;
    const dispatch = Math.max(confirmedAt.getTime(), idealDispatch);
    return {
      depotId: d.depotId,
      machineIds: d.machineIds,
      distanceKm: d.distanceKm,
      dispatchAt: new Date(dispatch).toISOString(),
      departAt: new Date(dispatch + loadMs).toISOString(),
      arriveAt: new Date(dispatch + loadMs + travelMs).toISOString(),
    };
  });
}

export interface LegState {
  leg: PlannedLeg;
  status: TrackingStatus;
  coordinates: LatLon;
  distanceRemainingKm: number;
}

export interface TrackingState {
  status: TrackingStatus;
  coordinates: LatLon;
  eta: Date;
  minutesRemaining: number;
  distanceRemainingKm: number;
  legs: LegState[];
}

/** Where a leg is at `now`: a pure function of the stored plan and time, so it survives restarts. */
export function legState(leg: PlannedLeg, depot: LatLon, site: LatLon, now: Date, completed: boolean): LegState {
  const t = now.getTime();
  const dispatch = Date.parse(leg.dispatchAt);
  const depart = Date.parse(leg.departAt);
  const arrive = Date.parse(leg.arriveAt);
  if (completed) return { leg, status: 'completed', coordinates: site, distanceRemainingKm: 0 };
  if (t < dispatch) return { leg, status: 'scheduled', coordinates: depot, distanceRemainingKm: leg.distanceKm };
  if (t < depart) return { leg, status: 'dispatched', coordinates: depot, distanceRemainingKm: leg.distanceKm };
  if (t < arrive) {
    const progress = (t - depart) / (arrive - depart);
    return {
      leg,
      status: 'in_transit',
      coordinates: interpolate(depot, site, progress),
      distanceRemainingKm: Math.round(leg.distanceKm * (1 - progress) * 100) / 100,
    };
  }
  return { leg, status: 'on_site', coordinates: site, distanceRemainingKm: 0 };
}

/** The booking follows its last-arriving leg: it is on site only when every machine is. */
export function trackingState(
  legs: PlannedLeg[],
  places: { depot: (id: string) => LatLon; site: LatLon },
  now: Date,
  completed: boolean,
): TrackingState {
  const states = legs.map((leg) => legState(leg, places.depot(leg.depotId), places.site, now, completed));
  const critical = states.reduce((a, b) => (Date.parse(b.leg.arriveAt) > Date.parse(a.leg.arriveAt) ? b : a));
  const eta = new Date(Date.parse(critical.leg.arriveAt));
  return {
    status: critical.status,
    coordinates: critical.coordinates,
    eta,
    minutesRemaining: completed ? 0 : Math.max(0, Math.round(((eta.getTime() - now.getTime()) / 60_000) * 10) / 10),
    distanceRemainingKm: critical.distanceRemainingKm,
    legs: states,
  };
}

/** A published tracking update (outbox topic `rental.tracking`, key = booking id). */
export interface TrackingEventPayload {
  bookingId: string;
  status: TrackingStatus;
  latitude: number;
  longitude: number;
  eta: string;
  minutesRemaining: number;
  distanceRemainingKm: number;
  at: string;
}

const ORDER: TrackingStatus[] = ['scheduled', 'dispatched', 'in_transit', 'on_site', 'completed'];

export function trackingPayload(bookingId: string, state: TrackingState, at: Date): TrackingEventPayload {
  return {
    bookingId,
    status: state.status,
    latitude: state.coordinates.latitude,
    longitude: state.coordinates.longitude,
    eta: state.eta.toISOString(),
    minutesRemaining: state.minutesRemaining,
    distanceRemainingKm: state.distanceRemainingKm,
    at: at.toISOString(),
  };
}

/**
 * What the tracker publishes for a booking observed at `now`, given what it published last: one event per
 * status it has entered since (at the planned instant of each transition), or, still in transit, a
 * position update once `tickMs` has passed. Empty when nothing is due.
 */
export function dueTrackingEvents(args: {
  bookingId: string;
  legs: PlannedLeg[];
  places: { depot: (id: string) => LatLon; site: LatLon };
  published: { status: TrackingStatus; at: Date };
  now: Date;
  tickMs: number;
}): { events: TrackingEventPayload[]; status: TrackingStatus } {
  const { legs, places, published, now, bookingId } = args;
  const current = trackingState(legs, places, now, false);
  const from = ORDER.indexOf(published.status);
  const to = ORDER.indexOf(current.status);
  if (to > from) {
    const critical = legs.reduce((a, b) => (Date.parse(b.arriveAt) > Date.parse(a.arriveAt) ? b : a));
    const enteredAt: Record<TrackingStatus, string> = {
      scheduled: critical.dispatchAt,
      dispatched: critical.dispatchAt,
      in_transit: critical.departAt,
      on_site: critical.arriveAt,
      completed: now.toISOString(),
    };
    const events = ORDER.slice(from + 1, to + 1).map((status) => {
      const at = new Date(enteredAt[status]);
      return trackingPayload(bookingId, trackingState(legs, places, at, false), at);
    });
    return { events, status: current.status };
  }
  if (current.status === 'in_transit' && now.getTime() - published.at.getTime() >= args.tickMs) {
    return { events: [trackingPayload(bookingId, current, now)], status: current.status };
  }
  return { events: [], status: published.status };
}
