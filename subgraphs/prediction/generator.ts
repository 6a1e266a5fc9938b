import { angleOf, encodeCyclic, type ModelName } from './features.js';
import { Random } from '../../platform/random.js';
import { sigmoid } from '../../platform/statistics.js';

/*
 * The generative process of the synthetic training data (no public data set exists for organ-transport
 * timing). Each model's sampler draws correlated features the way they arise in practice (the shift follows
 * the hour, snow follows the season, traffic follows the rush hours and the density), then the target
 * from a structural formula with interactions, heteroscedastic multiplicative noise and a long right
 * tail of incidents. docs/prediction.md describes the process in words; the numbers are below.
 *
 * Every numeric feature is drawn over the whole range the API accepts (features.ts), with a thin tail
 * where real transports are rare (a 1,200 km corridor, a 50th-floor handover, a queue of 40), so the
 * models learn the answer there instead of repeating the last one they saw. The target is a function of
 * the feature record alone plus noise (`dwellMinutes`, `travelMinutes`, `lockerLogit`), so the true
 * answer at any input can be simulated, which is how the tests check the models at the range edges.
 */

export interface Sample {
  /** Feature values by snake_case name (codes and flags as integers). */
  features: Record<string, number>;
  /** Minutes (dwell, travel) or 1/0 success (locker). */
  target: number;
  /** The true success probability of a locker sample (what a perfect model would say). */
  probability?: number;
}

const clip = (x: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, x));
/** Log-uniform on [lo, hi]: as many draws between 1 and 10 as between 10 and 100. */
const logUniform = (r: Random, lo: number, hi: number) => Math.exp(r.uniform(Math.log(lo), Math.log(hi)));
const round = (x: number, digits: number) => Number(x.toFixed(digits));

/** Relative activity at a facility or on the road by hour: morning and late-afternoon peaks. */
const rushCurve = (hour: number) => Math.exp(-(((hour - 8) / 1.2) ** 2)) + 0.9 * Math.exp(-(((hour - 17.5) / 1.5) ** 2));
/** Daytime activity inside a hospital, peaking late morning. */
const dayActivity = (hour: number) => Math.exp(-(((hour - 11) / 4) ** 2));
/** 1 in January, 0 in July. */
const winterness = (month: number) => (1 + Math.cos((2 * Math.PI * month) / 12)) / 2;

interface TimeContext {
  hour: number;
  day: number;
  month: number;
  weekend: boolean;
  night: boolean;
}

/** Transports run around the clock, most of them in daytime. Day 0 is Monday; month 0 is January. */
function sampleTime(r: Random): TimeContext {
  const hour = r.bernoulli(0.72) ? ((r.normal(13.5, 4.2) % 24) + 24) % 24 : r.uniform(0, 24);
  const day = r.int(7);
  const month = r.int(12);
  return { hour, day, month, weekend: day >= 5, night: hour < 6 || hour >= 22 };
}

function timeFeatures(t: TimeContext, withMonth: boolean, withDay: boolean): Record<string, number> {
  const [hourSin, hourCos] = encodeCyclic(t.hour, 24);
  const out: Record<string, number> = { hour_sin: round(hourSin, 6), hour_cos: round(hourCos, 6) };
  if (withDay) {
    const [s, c] = encodeCyclic(t.day, 7);
    out['day_sin'] = round(s, 6);
    out['day_cos'] = round(c, 6);
  }
  if (withMonth) {
    const [s, c] = encodeCyclic(t.month, 12);
    out['month_sin'] = round(s, 6);
    out['month_cos'] = round(c, 6);
  }
  return out;
}

/** 6% of an index's draws are uniform over all of [0, 1], so its extremes (gridlock, a severe storm) are in the data. */
const INDEX_TAIL = 0.06;
const congestionIndex = (r: Random, t: TimeContext, density: number) =>
  r.bernoulli(INDEX_TAIL) ? r.uniform(0, 1) : clip(0.08 + 0.45 * rushCurve(t.hour) * (t.weekend ? 0.4 : 1) + 0.25 * density + r.normal(0, 0.08), 0, 1);
const weatherSeverity = (r: Random, t: TimeContext) => (r.bernoulli(INDEX_TAIL) ? r.uniform(0, 1) : r.beta(1.2 + 1.3 * winterness(t.month), 4));

/** Typical cold-ischaemia tolerance by organ code, minutes (kidney, liver, heart, lung, pancreas). */
const TOLERANCE_MIN = [1800, 600, 300, 420, 900] as const;
/** Ischaemic time left at arrival by organ, minutes: from none left to a little over the tolerance. */
const REMAINING_RANGE: readonly (readonly [number, number])[] = [
  [0, 1800],
  [0, 660],
  [0, 330],
  [0, 450],
  [0, 960],
];
const ORGAN_MIX = [0.5, 0.2, 0.1, 0.1, 0.1];

/** The hour of day of a record (decoded from its sin/cos pair). */
const hourOf = (f: Readonly<Record<string, number>>) => angleOf(f['hour_sin']!, f['hour_cos']!, 24);

/** Dwell features: where, what, who and when a handover happens. */
function dwellFeatures(r: Random): Record<string, number> {
  const t = sampleTime(r);
  const building = r.choice([0.32, 0.3, 0.16, 0.1, 0.12]);
  const organ = r.choice(ORGAN_MIX);
  const security = r.choice(
    building === 0 ? [0.1, 0.35, 0.35, 0.2] : building === 3 ? [0.2, 0.5, 0.2, 0.1] : building === 4 ? [0.1, 0.5, 0.3, 0.1] : [0.3, 0.45, 0.2, 0.05],
  );
  const shift = t.hour >= 7 && t.hour < 15 ? 0 : t.hour >= 15 && t.hour < 23 ? 1 : 2;
  const protocol = r.choice(building === 4 ? [0.05, 0.15, 0.2, 0.6] : building === 3 ? [0.1, 0.2, 0.6, 0.1] : [0.35, 0.3, 0.25, 0.1]);
  const preservation = r.choice(
    [
      [0.55, 0.4, 0.05],
      [0.5, 0.2, 0.3],
      [0.55, 0.05, 0.4],
      [0.6, 0.1, 0.3],
      [0.7, 0.25, 0.05],
    ][organ]!,
  );
  // Most handovers are low in the building; towers (20% of transplant centres, 8% of the other
  // facilities) put some of them as high as the 60th floor.
  let floor: number;
  if (r.bernoulli(building === 0 ? 0.2 : 0.08)) floor = 1 + r.int(60);
  else if (building >= 3) floor = r.int(4);
  else if (r.bernoulli(0.05)) floor = -1 - r.int(3);
  else if (r.bernoulli(0.25)) floor = 0;
  else floor = 1 + r.int(building === 0 ? 18 : 10);
  const elevator = floor === 0 ? r.bernoulli(0.7) : r.bernoulli(building === 2 ? 0.75 : 0.93);
  // Most facilities are regional; 5% are far from their procurement centre (100-1000 km).
  const distanceOpc = r.bernoulli(0.05) ? logUniform(r, 100, 1000) : clip(r.gamma(2, 30), 0, 1000);
  const density = building === 0 ? r.beta(3, 1.6) : r.beta(2, 2);
  const weather = weatherSeverity(r, t);
  const traffic = congestionIndex(r, t, density);
  const [lo, hi] = REMAINING_RANGE[organ]!;
  const remaining = r.uniform(lo, hi);
  const activity = dayActivity(t.hour);
  // On 8% of days a surge (a multi-organ procurement, a mass-casualty day) adds 3-50 waiting handovers.
  const surge = r.bernoulli(0.08) ? Math.floor(logUniform(r, 3, 51)) : 0;
  const queue = Math.min(50, r.poisson((0.4 + 2.2 * activity) * (t.weekend ? 0.6 : 1) * (building === 0 ? 1.4 : 1)) + surge);
  const experience = clip(r.gamma(2, 3), 0, 50);
  return {
    building_type: building,
    organ_type: organ,
    security_level: security,
    staff_shift: shift,
    handover_protocol: protocol,
    preservation_method: preservation,
    elevator_available: elevator ? 1 : 0,
    floor_number: floor,
    distance_to_opc_km: round(distanceOpc, 2),
    urban_density: round(density, 4),
    traffic_congestion: round(traffic, 4),
    weather_severity: round(weather, 4),
    ischaemic_remaining_min: round(remaining, 1),
    ...timeFeatures(t, true, true),
    is_weekend: t.weekend ? 1 : 0,
    queue_length: queue,
    courier_experience_years: round(experience, 2),
  };
}

/**
 * Dwell: minutes from arrival at the recipient facility to the handover of the organ, drawn for one
 * feature record (any record the API accepts).
 */
export function dwellMinutes(f: Readonly<Record<string, number>>, r: Random): number {
  const building = f['building_type']!;
  const organ = f['organ_type']!;
  const security = f['security_level']!;
  const shift = f['staff_shift']!;
  const protocol = f['handover_protocol']!;
  const preservation = f['preservation_method']!;
  const elevator = f['elevator_available'] === 1;
  const floor = f['floor_number']!;
  const distanceOpc = f['distance_to_opc_km']!;
  const density = f['urban_density']!;
  const traffic = f['traffic_congestion']!;
  const weather = f['weather_severity']!;
  const remaining = f['ischaemic_remaining_min']!;
  const queue = f['queue_length']!;
  const experience = f['courier_experience_years']!;
  const weekend = f['is_weekend'] === 1;
  const activity = dayActivity(hourOf(f));

  // Additive stages of the handover, minutes.
  const base = [12, 18, 24, 8, 10][building]!;
  const vertical = floor > 0 ? (elevator ? 0.35 * floor + r.gamma(2, 0.8 + 1.2 * activity) : 1.8 * floor) : floor < 0 ? (elevator ? 2 : 3) * -floor : 0;
  const securityMin = [0, 3, 8, 14][security]! * (shift === 2 && security >= 2 ? 1.5 : 1);
  const protocolMin = [2, 7, 5 + 0.02 * distanceOpc, 14][protocol]!;
  const preservationMin = [0, 6, 12][preservation]!;
  const queueMin = queue > 0 ? r.gamma(2 * queue, 2.5) : 0;
  const accessMin = 2 + 6 * density * (protocol === 0 ? 0.5 : 1) + 4 * traffic + 3 * weather;
  const stages = base + vertical + securityMin + protocolMin + preservationMin + queueMin + accessMin;

  // Multiplicative conditions: staffing, experience, season, urgency.
  const relative = remaining / TOLERANCE_MIN[organ]!;
  const urgency = (0.65 + 0.35 * sigmoid((relative - 0.3) / 0.08)) * (organ === 2 || organ === 3 ? 0.9 : 1);
  const multiplier = [1, 1.08, 1.25][shift]! * (weekend ? 1.15 : 1) * (1 + 0.3 * Math.exp(-experience / 2)) * (1 + 0.1 * f['month_cos']!) * urgency;

  const sigma = 0.14 + 0.1 * (shift === 2 ? 1 : 0) + 0.04 * security + 0.08 * (protocol === 3 ? 1 : 0) + 0.05 * weather;
  let minutes = stages * multiplier * Math.exp(r.normal(0, sigma));
  // Incidents: a badge that fails, a team still in theatre, lost paperwork.
  const incident = 0.03 + 0.05 * (security >= 2 ? 1 : 0) + 0.04 * (shift === 2 ? 1 : 0) + 0.03 * (queue >= 4 ? 1 : 0);
  if (r.bernoulli(incident)) minutes += 8 + r.gamma(1.3, 18);
  return Math.max(2, minutes);
}

function sampleDwell(r: Random): Sample {
  const features = dwellFeatures(r);
  return { features, target: dwellMinutes(features, r) };
}

/** Free-flow speed by road type (urban, arterial, motorway, rural), km/h. */
const ROAD_SPEED = [28, 48, 100, 70] as const;
/** Speed factor by road type and traffic level (free flow .. congested). */
const TRAFFIC_FACTOR = [
  [1, 0.85, 0.68, 0.5],
  [1, 0.82, 0.62, 0.42],
  [1, 0.88, 0.6, 0.35],
  [1, 0.92, 0.8, 0.65],
] as const;
/** Speed factor by weather (clear, rain, fog, snow/ice, storm). */
const WEATHER_FACTOR = [1, 0.9, 0.82, 0.65, 0.75] as const;

/** Travel features: a corridor and the conditions along it. */
function travelFeatures(r: Random): Record<string, number> {
  const t = sampleTime(r);
  const holiday = r.bernoulli(0.03);
  const peak = !t.weekend && !holiday && ((t.hour >= 7 && t.hour < 9.5) || (t.hour >= 16 && t.hour < 19));
  // Hops across a campus or a town (10%), local runs (40%), intercity (38%) and long hauls up to the
  // 1,500 km the API accepts (12%).
  const kind = r.choice([0.1, 0.4, 0.38, 0.12]);
  const distance = clip(
    kind === 0 ? logUniform(r, 0.1, 5) : kind === 1 ? r.logNormal(Math.log(12), 0.7) : kind === 2 ? r.logNormal(Math.log(90), 0.55) : logUniform(r, 150, 1500),
    0.1,
    1500,
  );
  // The road type follows the distance, and every type occurs at every distance (a short motorway hop).
  const road = distance < 8 ? r.choice([0.58, 0.34, 0.03, 0.05]) : distance < 40 ? r.choice([0.15, 0.5, 0.25, 0.1]) : r.choice([0.02, 0.1, 0.68, 0.2]);
  const origin = road === 0 ? r.beta(4, 1.8) : r.beta(2, 2.5);
  const destination = r.beta(3, 1.8);
  const w = winterness(t.month);
  const weather = r.choice([0.55 - 0.15 * w, 0.25, 0.08 + 0.04 * w, 0.02 + 0.12 * w, 0.05 + 0.04 * w]);
  const intensity =
    0.3 +
    (peak ? 1.6 : 0.6 * rushCurve(t.hour)) +
    0.8 * ((origin + destination) / 2) -
    (holiday ? 1 : 0) -
    (t.weekend ? 0.6 : 0) -
    (t.night ? 0.6 : 0) +
    r.normal(0, 0.5);
  const traffic = intensity < 0.6 ? 0 : intensity < 1.3 ? 1 : intensity < 2 ? 2 : 3;
  return {
    origin_density: round(origin, 4),
    destination_density: round(destination, 4),
    distance_km: round(distance, 2),
    road_type: road,
    weather,
    traffic,
    public_holiday: holiday ? 1 : 0,
    peak_hour: peak ? 1 : 0,
    ...timeFeatures(t, false, true),
  };
}

/** Travel: minutes from departure to arrival along a corridor, drawn for one feature record. */
export function travelMinutes(f: Readonly<Record<string, number>>, r: Random): number {
  const distance = f['distance_km']!;
  const road = f['road_type']!;
  const weather = f['weather']!;
  const traffic = f['traffic']!;
  const origin = f['origin_density']!;
  const destination = f['destination_density']!;
  const hour = hourOf(f);
  const night = hour < 6 || hour >= 22;
  const fast = road === 2 || road === 3;
  const speed = ROAD_SPEED[road]! * TRAFFIC_FACTOR[road]![traffic]! * WEATHER_FACTOR[weather]! ** (fast ? 1.3 : 1) * (night ? 1.06 : 1);
  const nominal = (distance / speed) * 60 + 2 + 7 * origin + 9 * destination;
  const sigma = 0.06 + 0.045 * traffic + (weather >= 3 ? 0.07 : weather >= 1 ? 0.025 : 0) + 0.12 / Math.sqrt(1 + distance / 4);
  let minutes = nominal * Math.exp(r.normal(0, sigma));
  // Incidents (accidents, closures, diversions) become likelier with distance, bad weather and traffic.
  const incident = 1 - Math.exp(-distance * (0.0012 + 0.0025 * (weather >= 3 ? 1 : 0) + 0.0008 * traffic));
  if (r.bernoulli(incident)) minutes += r.gamma(1.2, 10 + 0.08 * distance);
  return minutes;
}

function sampleTravel(r: Random): Sample {
  const features = travelFeatures(r);
  return { features, target: travelMinutes(features, r) };
}

/** Sets the overall success rate near the 52% the specification validates against. */
const LOCKER_INTERCEPT = 2.65;
/** Scales the logit: how decisive the features are (the best achievable ROC-AUC). */
const LOCKER_SCALE = 1.45;

/** The true log-odds that a diversion to a locker succeeds. */
export function lockerLogit(f: Readonly<Record<string, number>>, hour: number): number {
  const organ = f['organ_type']!;
  const distance = f['locker_distance_km']!;
  const occupancy = f['locker_occupancy']!;
  const cooled = f['temperature_controlled'] === 1;
  const traffic = f['traffic_congestion']!;
  const weather = f['weather_severity']!;
  const night = hour < 6 || hour >= 22;
  const logit =
    LOCKER_INTERCEPT -
    0.2 * distance * (1 + 1.2 * traffic) -
    3.2 * sigmoid((occupancy - 0.85) / 0.035) -
    0.9 * occupancy +
    (cooled ? 0.5 : 0) -
    (!cooled && (organ === 2 || organ === 3) ? 2.2 : 0) -
    (!cooled && organ === 1 ? 0.8 : 0) +
    1.0 * Math.log(f['handoff_window_min']! / 90) +
    0.8 * (f['urban_density']! - 0.5) -
    2.0 * weather * weather -
    0.8 * traffic -
    (night ? 0.7 : 0);
  return LOCKER_SCALE * logit;
}

/** Locker diversion: whether the organ reaches the receiving team through the locker in time. */
function sampleLocker(r: Random): Sample {
  const t = sampleTime(r);
  const organ = r.choice(ORGAN_MIX);
  // Most lockers are a few km away; 8% of diversions consider one up to the 100 km the API accepts.
  const distance = r.bernoulli(0.08) ? logUniform(r, 5, 100) : clip(r.gamma(2, 2.2), 0, 100);
  const occupancy = clip(r.beta(2.2 + 1.5 * dayActivity(t.hour), 2), 0, 1);
  const cooled = r.bernoulli(0.6);
  // 8% of windows anywhere from 1 minute to a day (log-uniform), the rest around two hours.
  const window = r.bernoulli(0.08) ? logUniform(r, 1, 1440) : clip(r.logNormal(Math.log(110), 0.65), 1, 1440);
  const density = r.beta(2, 2);
  const weather = weatherSeverity(r, t);
  const traffic = congestionIndex(r, t, density);
  const features: Record<string, number> = {
    organ_type: organ,
    locker_distance_km: round(distance, 3),
    locker_occupancy: round(occupancy, 4),
    temperature_controlled: cooled ? 1 : 0,
    handoff_window_min: round(window, 1),
    urban_density: round(density, 4),
    weather_severity: round(weather, 4),
    traffic_congestion: round(traffic, 4),
    ...timeFeatures(t, false, false),
  };
  const probability = sigmoid(lockerLogit(features, t.hour));
  return { features, target: r.bernoulli(probability) ? 1 : 0, probability };
}

/**
 * Inputs whose data stops short of the accepted range on purpose: their effect is complete before the data
 * ends, so the answer at the data's edge is the right answer beyond it (the tests check it against the
 * simulated truth at the range's end). Every other numeric input is drawn across its whole range.
 */
export const SATURATING_INPUTS: Readonly<Record<ModelName, Readonly<Record<string, string>>>> = {
  dwell: {
    ischaemic_remaining_min:
      "urgency speeds a handover only while little of the organ's tolerance is left; beyond the tolerance (30 h for a kidney, the longest) more time left changes nothing",
    courier_experience_years:
      "a novice courier's extra time fades within a few years (1 + 0.3·e^(-years/2)); past 25 years the data thins out and nothing changes",
  },
  travel: {},
  locker: {},
};

const SAMPLERS: Readonly<Record<ModelName, (r: Random) => Sample>> = {
  dwell: sampleDwell,
  travel: sampleTravel,
  locker: sampleLocker,
};

/** `n` independent samples of one model's process; the same seed gives the same data. */
export function generate(model: ModelName, n: number, seed: number): Sample[] {
  const r = new Random(seed, model);
  return Array.from({ length: n }, () => SAMPLERS[model](r));
}
