import { interpolate, type LatLon } from './geo.js';
import { after, ruleForecast, type EtaSource, type TravelForecast, type TravelForecaster } from './travel.js';

/** Delivery planning constants. */
export const DELIVERY = {
  /** Loading at the depot between dispatch and departure. */
  loadingMinutes: 15,
  /** Trucks are planned to be on site this long before the rental starts, at the forecast's q90. */
  arrivalBufferMinutes: 30,
} as const;

const LOAD_MS = DELIVERY.loadingMinutes * 60_000;
const BUFFER_MS = DELIVERY.arrivalBufferMinutes * 60_000;

export type TrackingStatus = 'scheduled' | 'dispatched' | 'in_transit' | 'on_site' | 'completed';

/**
 * The forecast a truck runs on: road minutes for `remainingKm` of road from the instant `from` (its
 * departure, or the instant the run was forecast again on the road, see `reforecastLeg`).
 */
interface LegForecast extends TravelForecast {
  from: string;
  remainingKm: number;
}

/** A planned truck run, fixed at confirmation and stored with the booking. */
export interface PlannedLeg {
  depotId: string;
  machineIds: string[];
  distanceKm: number;
  dispatchAt: string;
  departAt: string;
  /** The median arrival (the forecast's q50): when the truck is on site. */
  arriveAt: string;
  /** Absent in plans stored before forecasts: the 45 km/h rule from the departure. */
  forecast?: LegForecast;
}

/** The forecast a quoted run was promised against (a quote stored before forecasts: the rule). */
export const quotedForecast = (run: QuotedRun): TravelForecast => run.travel ?? ruleForecast(run.distanceKm);

/** A quote's delivery run, with the forecast its earliest start was promised against. */
export interface QuotedRun {
  depotId: string;
  machineIds: string[];
  distanceKm: number;
  /**
   * The run's forecast for a departure when the quote expires (the latest a confirmation can dispatch
   * it). Absent in quotes stored before forecasts: the rule.
   */
  travel?: TravelForecast;
}

/** When a run leaves its depot if it is dispatched when the quote expires (the latest confirmation). */
export const promiseDeparture = (expiresAt: Date) => new Date(expiresAt.getTime() + LOAD_MS);

/**
 * The earliest start a quote can promise: trucks are dispatched when the booking is confirmed, and a quote
 * can be confirmed until it expires, so each run leaves at the latest at `promiseDeparture(expiresAt)`
 * and is on site by its forecast's q90 from there; rounded up to the whole minute. A start at or after it
 * is met by `planLegs` whenever within the quote's life the booking is confirmed.
 */
export function earliestStart(runs: readonly QuotedRun[], expiresAt: Date): Date {
  const depart = promiseDeparture(expiresAt).getTime();
  const arrival = Math.max(depart, ...runs.map((r) => after(depart, quotedForecast(r).q90)));
  return new Date(Math.ceil(arrival / 60_000) * 60_000);
}

/** The forecast a stored leg runs on (a plan stored before forecasts: the rule from its departure). */
function legForecast(leg: PlannedLeg): LegForecast {
  return leg.forecast ?? { ...ruleForecast(leg.distanceKm), from: leg.departAt, remainingKm: leg.distanceKm };
}

/**
 * Plans one truck run per depot from the runs' travel forecasts: each leaves so that it is on site
 * `arrivalBufferMinutes` before the start at its q90, never before the booking is confirmed and loaded.
 * The forecast depends on the departure (rush hours) and the departure on the forecast, so the departure
 * is iterated to its fixed point (at most four forecasts, usually two); where a rush hour's start leaves
 * none, the latest departure on time is searched for instead (`latestOnTime`). A run that cannot make the start
 * when it leaves now (its median arrival after the start) leaves instead when the quote's promise has it
 * leave, on the forecast the promise was made with: a start at or after the quote's earliest start is met
 * whenever within the quote's life it is confirmed (when prediction answered the quote).
 */
export async function planLegs(args: {
  runs: readonly QuotedRun[];
  confirmedAt: Date;
  startTime: Date;
  expiresAt: Date;
  forecast: TravelForecaster;
}): Promise<PlannedLeg[]> {
  const { runs, startTime } = args;
  const start = startTime.getTime();
  const target = start - BUFFER_MS;
  const earliestDepart = args.confirmedAt.getTime() + LOAD_MS;
  const departureFor = (f: TravelForecast) => Math.max(earliestDepart, Math.floor(target - f.q90 * 60_000));
  const ask = (departs: number[]) => args.forecast(runs.map((r, i): Run => ({ distanceKm: r.distanceKm, departAt: new Date(departs[i]!) })));

  let departs = runs.map((r) => departureFor(ruleForecast(r.distanceKm)));
  let forecasts = await ask(departs);
  const seen = runs.map((_, i) => [{ depart: departs[i]!, forecast: forecasts[i]! }]);
  let converged = false;
  for (let round = 0; round < 3 && !converged; round++) {
    const next = forecasts.map(departureFor);
    converged = next.every((t, i) => t === departs[i]);
    if (converged) break;
    departs = next;
    forecasts = await ask(departs);
    forecasts.forEach((forecast, i) => seen[i]!.push({ depart: departs[i]!, forecast }));
  }
  if (!converged) ({ departs, forecasts } = await latestOnTime(seen, { target, earliestDepart, ask: args.forecast, runs }));
  return runs.map((run, i) => {
    let depart = departs[i]!;
    let forecast = forecasts[i]!;
    const promised = run.travel;
    if (after(depart, forecast.q50) > start && promised?.source === 'model') {
      const promisedDepart = promiseDeparture(args.expiresAt).getTime();
      if (after(promisedDepart, promised.q50) <= start) {
        depart = promisedDepart;
        forecast = promised;
      }
    }
    const departAt = new Date(depart).toISOString();
    return {
      depotId: run.depotId,
      machineIds: run.machineIds,
      distanceKm: run.distanceKm,
      dispatchAt: new Date(depart - LOAD_MS).toISOString(),
      departAt,
      arriveAt: new Date(after(depart, forecast.q50)).toISOString(),
      forecast: { ...forecast, from: departAt, remainingKm: run.distanceKm },
    };
  });
}

interface Tried {
  depart: number;
  forecast: TravelForecast;
}

/**
 * The latest departure of each run that is on site by `target` at its q90, when the departure and the
 * forecast have no fixed point: road time steps up where a rush hour begins, so leaving just before it
 * arrives early and leaving at the fixed point's place arrives late, and the iteration swings between the
 * two. From the departures tried, the latest on time and the earliest late one after it bound the answer;
 * halving that interval (all runs' probes asked together) finds it to the minute in at most eight more
 * forecasts. A run with nothing on time among its tries steps back half an hour at a time (three times at
 * most); leaving at `earliestDepart` counts as on time, as nothing earlier can be done.
 */
async function latestOnTime(
  seen: Tried[][],
  ctx: { target: number; earliestDepart: number; ask: TravelForecaster; runs: readonly QuotedRun[] },
): Promise<{ departs: number[]; forecasts: TravelForecast[] }> {
  const onTime = (t: Tried) => t.depart <= ctx.earliestDepart || after(t.depart, t.forecast.q90) <= ctx.target;
  const probe = async (departs: Map<number, number>): Promise<Map<number, Tried>> => {
    const order = [...departs.entries()];
    const answers = await ctx.ask(order.map(([i, d]) => ({ distanceKm: ctx.runs[i]!.distanceKm, departAt: new Date(d) })));
    return new Map(order.map(([i, depart], k) => [i, { depart, forecast: answers[k]! }]));
  };
  const lo = seen.map((tries) => tries.filter(onTime).sort((a, b) => b.depart - a.depart)[0]);
  for (let back = 1; back <= 3 && lo.some((t) => t === undefined); back++) {
    const wanted = new Map<number, number>();
    lo.forEach((t, i) => {
      if (t) return;
      const earliestTried = Math.min(...seen[i]!.map((s) => s.depart));
      wanted.set(i, Math.max(ctx.earliestDepart, earliestTried - back * 30 * 60_000));
    });
    for (const [i, tried] of await probe(wanted)) {
      seen[i]!.push(tried);
      if (onTime(tried)) lo[i] = tried;
    }
  }
  const hi = seen.map((tries, i) => {
    const floor = lo[i]?.depart ?? -Infinity;
    return tries.filter((t) => t.depart > floor && !onTime(t)).sort((a, b) => a.depart - b.depart)[0];
  });
  for (let step = 0; step < 8; step++) {
    const wanted = new Map<number, number>();
    lo.forEach((l, i) => {
      const h = hi[i];
      if (l && h && h.depart - l.depart > 60_000) wanted.set(i, Math.floor((l.depart + h.depart) / 2));
    });
    if (wanted.size === 0) break;
    for (const [i, tried] of await probe(wanted)) {
      if (onTime(tried)) lo[i] = tried;
      else hi[i] = tried;
    }
  }
  // Nothing on time even half an hour back three times: the earliest try, the least late.
  const chosen = seen.map((tries, i) => lo[i] ?? tries.reduce((a, b) => (b.depart < a.depart ? b : a)));
  return { departs: chosen.map((t) => t.depart), forecasts: chosen.map((t) => t.forecast) };
}

/** A run forecast by the rule, not yet on site at `now`: forecast again once prediction answers. */
export function needsForecast(leg: PlannedLeg, now: Date): boolean {
  return legForecast(leg).source === 'rule' && now.getTime() < Date.parse(leg.arriveAt);
}

/** A stretch of road to forecast: its distance and the instant the truck sets out on it. */
export interface Run {
  distanceKm: number;
  departAt: Date;
}

/**
 * What a run is forecast again for at `now`: before its departure, the whole road from the planned
 * departure; on the road, the distance left from where the truck is now.
 */
export function reforecastRun(leg: PlannedLeg, state: LegState, now: Date): Run {
  const departed = now.getTime() >= Date.parse(leg.departAt);
  return departed ? { distanceKm: state.distanceRemainingKm, departAt: now } : { distanceKm: leg.distanceKm, departAt: new Date(leg.departAt) };
}

/** The leg on the forecast of `run` (from `reforecastRun`): the truck keeps its place, and arrives at the median. */
export function reforecastLeg(leg: PlannedLeg, run: Run, forecast: TravelForecast): PlannedLeg {
  const from = run.departAt.getTime();
  return {
    ...leg,
    arriveAt: new Date(after(from, forecast.q50)).toISOString(),
    forecast: { ...forecast, from: run.departAt.toISOString(), remainingKm: run.distanceKm },
  };
}

export interface LegState {
  leg: PlannedLeg;
  status: TrackingStatus;
  coordinates: LatLon;
  distanceRemainingKm: number;
  /** The median arrival. */
  eta: Date;
  /** The arrival at the forecast's q10 and q90 for the road left. */
  etaQ10: Date;
  etaQ90: Date;
  etaSource: EtaSource;
  etaModelVersion: string | null;
}

const km2 = (x: number) => Math.round(x * 100) / 100;

/**
 * Where a leg is at `now`: a pure function of the stored plan and time, so it survives restarts. With no
 * telemetry, the truck covers its road at its forecast's median pace: the median ETA stands, and the
 * q10-q90 band is the forecast's, scaled to the share of the road still ahead.
 */
export function legState(leg: PlannedLeg, depot: LatLon, site: LatLon, now: Date, completed: boolean): LegState {
  const f = legForecast(leg);
  const t = now.getTime();
  const dispatch = Date.parse(leg.dispatchAt);
  const depart = Date.parse(leg.departAt);
  const from = Date.parse(f.from);
  const arrive = Date.parse(leg.arriveAt);
  const eta = new Date(arrive);
  const source = { etaSource: f.source, etaModelVersion: f.version };
  const band = (q10: number, q90: number) => ({ eta, etaQ10: new Date(q10), etaQ90: new Date(q90), ...source });
  const waiting = (status: TrackingStatus): LegState => ({
    leg,
    status,
    coordinates: depot,
    distanceRemainingKm: leg.distanceKm,
    ...band(after(from, f.q10), after(from, f.q90)),
  });
  if (completed || t >= arrive) {
    return { leg, status: completed ? 'completed' : 'on_site', coordinates: site, distanceRemainingKm: 0, ...band(arrive, arrive) };
  }
  if (t < dispatch) return waiting('scheduled');
  if (t < depart) return waiting('dispatched');
  if (t < from) {
    // On the road before the run was forecast again: the stretch it had covered by then, at an even pace.
    const remainingKm = leg.distanceKm - (leg.distanceKm - f.remainingKm) * ((t - depart) / (from - depart));
    return {
      leg,
      status: 'in_transit',
      coordinates: interpolate(depot, site, leg.distanceKm > 0 ? 1 - remainingKm / leg.distanceKm : 1),
      distanceRemainingKm: km2(remainingKm),
      ...band(after(from, f.q10), after(from, f.q90)),
    };
  }
  const ahead = arrive > from ? (arrive - t) / (arrive - from) : 0;
  const remainingKm = f.remainingKm * ahead;
  const progress = leg.distanceKm > 0 ? 1 - remainingKm / leg.distanceKm : 1;
  return {
    leg,
    status: 'in_transit',
    coordinates: interpolate(depot, site, progress),
    distanceRemainingKm: km2(remainingKm),
    ...band(Math.min(arrive, after(t, f.q10 * ahead)), Math.max(arrive, after(t, f.q90 * ahead))),
  };
}

export interface TrackingState {
  status: TrackingStatus;
  coordinates: LatLon;
  eta: Date;
  etaQ10: Date;
  etaQ90: Date;
  etaSource: EtaSource;
  etaModelVersion: string | null;
  minutesRemaining: number;
  distanceRemainingKm: number;
  legs: LegState[];
}

/** The leg that arrives last: the booking is on site when it is. */
export const criticalLeg = (legs: readonly PlannedLeg[]): PlannedLeg => legs.reduce((a, b) => (Date.parse(b.arriveAt) > Date.parse(a.arriveAt) ? b : a));

/** The booking follows its last-arriving leg: its status, place, ETA and band are that truck's. */
export function trackingState(legs: PlannedLeg[], places: { depot: (id: string) => LatLon; site: LatLon }, now: Date, completed: boolean): TrackingState {
  const states = legs.map((leg) => legState(leg, places.depot(leg.depotId), places.site, now, completed));
  const last = criticalLeg(legs);
  const critical = states.find((s) => s.leg === last)!;
  return {
    status: critical.status,
    coordinates: critical.coordinates,
    eta: critical.eta,
    etaQ10: critical.etaQ10,
    etaQ90: critical.etaQ90,
    etaSource: critical.etaSource,
    etaModelVersion: critical.etaModelVersion,
    minutesRemaining: completed ? 0 : Math.max(0, Math.round(((critical.eta.getTime() - now.getTime()) / 60_000) * 10) / 10),
    distanceRemainingKm: critical.distanceRemainingKm,
    legs: states,
  };
}

/**
 * Until when `trackingState(legs, …, now, completed)` may be served as it is: one tick of the tracker
 * (`tickMs`, the cadence its positions are published at) and never past the next instant a leg changes
 * status (dispatch, departure, a forecast taken again on the road, arrival). Null once every leg is on site
 * or the booking is completed: nothing of it moves with the clock any more.
 */
export function trackingHoldsUntil(legs: readonly PlannedLeg[], now: Date, tickMs: number, completed: boolean): Date | null {
  const t = now.getTime();
  if (completed || legs.every((leg) => t >= Date.parse(leg.arriveAt))) return null;
  let until = t + tickMs;
  for (const leg of legs) {
    for (const at of [leg.dispatchAt, leg.departAt, legForecast(leg).from, leg.arriveAt]) {
      const instant = Date.parse(at);
      if (instant > t && instant < until) until = instant;
    }
  }
  return new Date(until);
}

/** A published tracking update (outbox topic `rental.tracking`, key = booking id). */
export interface TrackingEventPayload {
  bookingId: string;
  status: TrackingStatus;
  latitude: number;
  longitude: number;
  eta: string;
  /** Absent in events published before forecasts (the rule: equal to `eta`). */
  etaQ10?: string;
  etaQ90?: string;
  etaSource?: EtaSource;
  etaModelVersion?: string | null;
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
    etaQ10: state.etaQ10.toISOString(),
    etaQ90: state.etaQ90.toISOString(),
    etaSource: state.etaSource,
    etaModelVersion: state.etaModelVersion,
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
    const critical = criticalLeg(legs);
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
