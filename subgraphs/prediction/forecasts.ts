import { encodeCyclic, ROAD_TYPES, TRAFFIC_LEVELS, WEATHER_CONDITIONS } from './features.js';
import type { QuantileTriple } from './metrics.js';

/*
 * What the subgraph makes of the models' raw answers: the dwell risk reading, the cold-chain margin
 * composition and the travel features of a rental delivery.
 */

type RiskLevel = 'LOW' | 'MODERATE' | 'HIGH' | 'BREACH';

/** Worst-case margins (minutes) below which the risk reads HIGH, then MODERATE. */
const RISK_THRESHOLDS = { high: 45, moderate: 120 } as const;

const r1 = (x: number) => Math.round(x * 10) / 10;
const fmt = (x: number) => r1(x).toFixed(1);

function riskOf(worstCaseMargin: number): RiskLevel {
  if (worstCaseMargin < 0) return 'BREACH';
  if (worstCaseMargin < RISK_THRESHOLDS.high) return 'HIGH';
  if (worstCaseMargin < RISK_THRESHOLDS.moderate) return 'MODERATE';
  return 'LOW';
}

export interface DwellReading {
  worstCaseMarginMinutes: number;
  risk: RiskLevel;
  interpretation: string;
}

/** The dwell risk sentence: the expected dwell, its interval, and the margin its q90 leaves. */
export function readDwell(q: QuantileTriple, ischaemicRemainingMin: number): DwellReading {
  const margin = r1(ischaemicRemainingMin - q.q90);
  const risk = riskOf(margin);
  const lead = { LOW: 'Low risk', MODERATE: 'Moderate risk', HIGH: 'High risk', BREACH: 'Breach risk' }[risk];
  const expected = `dwell is expected to take ${fmt(q.q50)} min (80% interval ${fmt(q.q10)}-${fmt(q.q90)} min)`;
  const tail =
    risk === 'BREACH'
      ? `the worst case (q90) exceeds the ${fmt(ischaemicRemainingMin)} min of ischaemic time remaining by ${fmt(-margin)} min (worst-case margin ${fmt(margin)} min)`
      : `the worst case (q90) leaves a margin of ${fmt(margin)} min of the ${fmt(ischaemicRemainingMin)} min of ischaemic time remaining`;
  return { worstCaseMarginMinutes: margin, risk, interpretation: `${lead}: ${expected}; ${tail}.` };
}

interface MarginCase {
  totalMinutes: number;
  marginMinutes: number;
}

export interface ColdChain {
  best: MarginCase;
  median: MarginCase;
  worst: MarginCase;
  worstCaseBreach: boolean;
}

/** The console's composition: travel + dwell at the same quantile, against the ischaemic time left. */
export function composeColdChain(dwell: QuantileTriple, travel: QuantileTriple, ischaemicRemainingMin: number): ColdChain {
  const at = (key: keyof QuantileTriple): MarginCase => {
    const total = r1(travel[key] + dwell[key]);
    return { totalMinutes: total, marginMinutes: r1(ischaemicRemainingMin - total) };
  };
  const worst = at('q90');
  return { best: at('q10'), median: at('q50'), worst, worstCaseBreach: worst.marginMinutes < 0 };
}

/** Time zone of the rental depots and sites: rush hours and holidays are local. */
const DELIVERY_TIME_ZONE = 'Europe/Amsterdam';
/** Fixed-date public holidays in the Netherlands (MM-DD). */
const FIXED_HOLIDAYS = new Set(['01-01', '04-27', '12-25', '12-26']);
/** Depots stand on industrial estates at the city edge; sites are in built-up areas. */
const DELIVERY_DENSITY = { origin: 0.5, destination: 0.6 } as const;

const code = (table: typeof ROAD_TYPES, name: string) => table.find((c) => c.name === name)!.code;

interface LocalTime {
  hour: number;
  weekday: number;
  monthDay: string;
}

const localFormat = new Intl.DateTimeFormat('en-GB', {
  timeZone: DELIVERY_TIME_ZONE,
  hourCycle: 'h23',
  weekday: 'short',
  month: '2-digit',
  day: '2-digit',
  hour: '2-digit',
  minute: '2-digit',
});
const WEEKDAYS = ['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'];

function localTime(at: Date): LocalTime {
  const parts = Object.fromEntries(localFormat.formatToParts(at).map((p) => [p.type, p.value]));
  return {
    hour: Number(parts['hour']) + Number(parts['minute']) / 60,
    weekday: WEEKDAYS.indexOf(parts['weekday'] ?? 'Mon'),
    monthDay: `${parts['month']}-${parts['day']}`,
  };
}

/**
 * The 12 travel features of a rental delivery leg: its road distance and its planned departure (local
 * time gives the hour, the day, the rush hours and the fixed-date holidays); the rest is documented
 * defaults: densities above, the road type by distance, clear weather (the most common condition), and
 * traffic by the time of day.
 */
export function deliveryTravelFeatures(distanceKm: number, departAt: Date): Record<string, number> {
  const local = localTime(departAt);
  const weekend = local.weekday >= 5;
  const holiday = FIXED_HOLIDAYS.has(local.monthDay);
  const peak = !weekend && !holiday && ((local.hour >= 7 && local.hour < 9.5) || (local.hour >= 16 && local.hour < 19));
  const night = local.hour < 6 || local.hour >= 22;
  const [hourSin, hourCos] = encodeCyclic(local.hour, 24);
  const [daySin, dayCos] = encodeCyclic(local.weekday, 7);
  const road = distanceKm >= 20 ? 'MOTORWAY' : distanceKm >= 5 ? 'ARTERIAL' : 'URBAN';
  const traffic = peak ? 'HEAVY' : night || weekend || holiday ? 'FREE_FLOW' : 'MODERATE';
  return {
    origin_density: DELIVERY_DENSITY.origin,
    destination_density: DELIVERY_DENSITY.destination,
    distance_km: Math.min(1500, Math.max(0.1, distanceKm)),
    road_type: code(ROAD_TYPES, road),
    weather: code(WEATHER_CONDITIONS, 'CLEAR'),
    traffic: code(TRAFFIC_LEVELS, traffic),
    public_holiday: holiday ? 1 : 0,
    peak_hour: peak ? 1 : 0,
    hour_sin: hourSin,
    hour_cos: hourCos,
    day_sin: daySin,
    day_cos: dayCos,
  };
}
