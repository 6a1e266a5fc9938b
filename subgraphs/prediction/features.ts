import { z } from 'zod';

/*
 * The features of the three models, as data: names, kinds, integer codes and valid ranges. The REST
 * schemas, the GraphQL input checks, the model input vectors and the tables of docs/prediction.md all come from here.
 */

/** One value of an integer-coded categorical feature. */
export interface CodeSpec {
  code: number;
  /** The GraphQL enum value. */
  name: string;
  description: string;
}

/**
 * `number`: a real value in [min, max]; `count`: a whole number in [min, max]; `flag`: 0 or 1 (a Boolean
 * in GraphQL); `code`: one of `codes` (an enum in GraphQL); `cyclic`: sin or cos of an angle, in [-1, 1].
 */
type FeatureKind = 'number' | 'count' | 'flag' | 'code' | 'cyclic';

export interface FeatureSpec {
  /** snake_case, as REST callers send it; the GraphQL input field is its camelCase form. */
  name: string;
  kind: FeatureKind;
  min: number;
  max: number;
  unit?: string;
  description: string;
  codes?: readonly CodeSpec[];
  /** GraphQL enum type of a `code` feature. */
  enumType?: string;
}

const BUILDING_TYPES: readonly CodeSpec[] = [
  { code: 0, name: 'TRANSPLANT_CENTRE', description: 'academic hospital with a transplant programme' },
  { code: 1, name: 'GENERAL_HOSPITAL', description: 'regional general hospital' },
  { code: 2, name: 'COMMUNITY_HOSPITAL', description: 'small community hospital' },
  { code: 3, name: 'OPC_HUB', description: 'organ procurement centre hub' },
  { code: 4, name: 'LABORATORY', description: 'tissue-typing / cross-match laboratory' },
];

const ORGAN_TYPES: readonly CodeSpec[] = [
  { code: 0, name: 'KIDNEY', description: 'kidney (cold ischaemia tolerance about 24-36 h)' },
  { code: 1, name: 'LIVER', description: 'liver (about 8-12 h)' },
  { code: 2, name: 'HEART', description: 'heart (about 4-6 h)' },
  { code: 3, name: 'LUNG', description: 'lung (about 6-8 h)' },
  { code: 4, name: 'PANCREAS', description: 'pancreas (about 12-18 h)' },
];

const SECURITY_LEVELS: readonly CodeSpec[] = [
  { code: 0, name: 'OPEN', description: 'public entrance, no check' },
  { code: 1, name: 'BADGE', description: 'badge or reception sign-in' },
  { code: 2, name: 'ESCORTED', description: 'escort by facility staff required' },
  { code: 3, name: 'RESTRICTED', description: 'restricted wing: identity check and escort' },
];

const STAFF_SHIFTS: readonly CodeSpec[] = [
  { code: 0, name: 'DAY', description: '07:00-15:00' },
  { code: 1, name: 'EVENING', description: '15:00-23:00' },
  { code: 2, name: 'NIGHT', description: '23:00-07:00' },
];

const HANDOVER_PROTOCOLS: readonly CodeSpec[] = [
  { code: 0, name: 'DIRECT_TO_THEATRE', description: 'handed to the operating-theatre team' },
  { code: 1, name: 'RECEPTION', description: 'via the front desk, which calls the team' },
  { code: 2, name: 'COORDINATOR', description: 'via the transplant coordinator, who confirms with the OPC' },
  { code: 3, name: 'LAB_CHECK_IN', description: 'via laboratory check-in (paperwork and cross-match sample)' },
];

const PRESERVATION_METHODS: readonly CodeSpec[] = [
  { code: 0, name: 'STATIC_COLD_STORAGE', description: 'on ice in a cool box' },
  { code: 1, name: 'HYPOTHERMIC_PERFUSION', description: 'hypothermic machine perfusion device' },
  { code: 2, name: 'NORMOTHERMIC_PERFUSION', description: 'normothermic machine perfusion device' },
];

export const ROAD_TYPES: readonly CodeSpec[] = [
  { code: 0, name: 'URBAN', description: 'city streets' },
  { code: 1, name: 'ARTERIAL', description: 'arterial and ring roads' },
  { code: 2, name: 'MOTORWAY', description: 'motorway' },
  { code: 3, name: 'RURAL', description: 'rural roads' },
];

export const WEATHER_CONDITIONS: readonly CodeSpec[] = [
  { code: 0, name: 'CLEAR', description: 'dry, good visibility' },
  { code: 1, name: 'RAIN', description: 'rain' },
  { code: 2, name: 'FOG', description: 'fog, poor visibility' },
  { code: 3, name: 'SNOW_ICE', description: 'snow or ice on the road' },
  { code: 4, name: 'STORM', description: 'storm, strong wind' },
];

export const TRAFFIC_LEVELS: readonly CodeSpec[] = [
  { code: 0, name: 'FREE_FLOW', description: 'free flow' },
  { code: 1, name: 'MODERATE', description: 'moderate' },
  { code: 2, name: 'HEAVY', description: 'heavy' },
  { code: 3, name: 'CONGESTED', description: 'stop-and-go' },
];

const codeOf = (name: string, enumType: string, codes: readonly CodeSpec[], description: string): FeatureSpec => ({
  name,
  kind: 'code',
  min: 0,
  max: codes.length - 1,
  description,
  codes,
  enumType,
});
const flag = (name: string, description: string): FeatureSpec => ({ name, kind: 'flag', min: 0, max: 1, description });
const index01 = (name: string, description: string): FeatureSpec => ({ name, kind: 'number', min: 0, max: 1, description });
const cyclic = (name: string, description: string): FeatureSpec => ({ name, kind: 'cyclic', min: -1, max: 1, description });

const HOUR = [cyclic('hour_sin', 'sin(2π·hour/24), hour of day in [0, 24) local time'), cyclic('hour_cos', 'cos(2π·hour/24)')];
const DAY = [cyclic('day_sin', 'sin(2π·day/7), day of week 0 = Monday .. 6 = Sunday'), cyclic('day_cos', 'cos(2π·day/7)')];
const MONTH = [cyclic('month_sin', 'sin(2π·month/12), month 0 = January .. 11 = December'), cyclic('month_cos', 'cos(2π·month/12)')];
const URBAN_DENSITY = index01('urban_density', 'built-up density around the site, 0 rural .. 1 inner city');
const TRAFFIC_CONGESTION = index01('traffic_congestion', 'local congestion index, 0 empty roads .. 1 gridlock');
const WEATHER_SEVERITY = index01('weather_severity', 'weather severity index, 0 clear .. 1 severe storm');
const ORGAN = codeOf('organ_type', 'OrganType', ORGAN_TYPES, 'organ being transported');

/** Dwell time at the recipient facility: the 15 features the specification names, then 7 more. */
export const DWELL_FEATURES: readonly FeatureSpec[] = [
  codeOf('building_type', 'BuildingType', BUILDING_TYPES, 'kind of recipient facility'),
  ORGAN,
  codeOf('security_level', 'SecurityLevel', SECURITY_LEVELS, 'access control between entrance and handover point'),
  codeOf('staff_shift', 'StaffShift', STAFF_SHIFTS, 'shift on duty at arrival'),
  codeOf('handover_protocol', 'HandoverProtocol', HANDOVER_PROTOCOLS, 'who receives the organ'),
  codeOf('preservation_method', 'PreservationMethod', PRESERVATION_METHODS, 'how the organ is preserved'),
  flag('elevator_available', '1 when a usable lift serves the handover floor'),
  { name: 'floor_number', kind: 'count', min: -3, max: 60, description: 'floor of the handover point (0 = ground, negative = basement)' },
  { name: 'distance_to_opc_km', kind: 'number', min: 0, max: 1000, unit: 'km', description: 'distance from the facility to its organ procurement centre' },
  URBAN_DENSITY,
  TRAFFIC_CONGESTION,
  WEATHER_SEVERITY,
  { name: 'ischaemic_remaining_min', kind: 'number', min: 0, max: 2880, unit: 'min', description: 'cold-ischaemia time left at arrival' },
  ...HOUR,
  ...DAY,
  ...MONTH,
  flag('is_weekend', '1 on Saturday and Sunday'),
  { name: 'queue_length', kind: 'count', min: 0, max: 50, description: 'handovers already waiting at the facility' },
  { name: 'courier_experience_years', kind: 'number', min: 0, max: 50, unit: 'years', description: "courier's years of experience" },
];

/** Corridor travel time: the 8 features the specification names, then 4 cyclic time encodings. */
export const TRAVEL_FEATURES: readonly FeatureSpec[] = [
  index01('origin_density', 'built-up density at the origin, 0 rural .. 1 inner city'),
  index01('destination_density', 'built-up density at the destination'),
  { name: 'distance_km', kind: 'number', min: 0.1, max: 1500, unit: 'km', description: 'road distance of the corridor' },
  codeOf('road_type', 'RoadType', ROAD_TYPES, 'dominant road type of the corridor'),
  codeOf('weather', 'WeatherCondition', WEATHER_CONDITIONS, 'weather along the corridor'),
  codeOf('traffic', 'TrafficLevel', TRAFFIC_LEVELS, 'traffic level along the corridor'),
  flag('public_holiday', '1 on a public holiday'),
  flag('peak_hour', '1 during the weekday rush hours (07:00-09:30, 16:00-19:00)'),
  ...HOUR,
  ...DAY,
];

/** Diversion of a handover to an alternate temperature-monitored locker. */
const LOCKER_FEATURES: readonly FeatureSpec[] = [
  ORGAN,
  { name: 'locker_distance_km', kind: 'number', min: 0, max: 100, unit: 'km', description: 'distance from the courier to the locker' },
  index01('locker_occupancy', 'share of locker compartments in use, 0 .. 1'),
  flag('temperature_controlled', '1 when the locker has an actively cooled compartment'),
  { name: 'handoff_window_min', kind: 'number', min: 1, max: 1440, unit: 'min', description: 'time until the receiving team must collect the organ' },
  URBAN_DENSITY,
  WEATHER_SEVERITY,
  TRAFFIC_CONGESTION,
  ...HOUR,
];

export type ModelName = 'dwell' | 'travel' | 'locker';

export const MODEL_FEATURES: Readonly<Record<ModelName, readonly FeatureSpec[]>> = {
  dwell: DWELL_FEATURES,
  travel: TRAVEL_FEATURES,
  locker: LOCKER_FEATURES,
};

/**
 * Features the models compute from the inputs: the angle behind each sin/cos pair, in its natural unit.
 * One split on an hour is one threshold instead of two on its sin and cos.
 */
interface DerivedFeature {
  name: string;
  sin: string;
  cos: string;
  period: number;
}

const DERIVED_FEATURES: Readonly<Record<ModelName, readonly DerivedFeature[]>> = {
  dwell: [
    { name: 'hour_of_day', sin: 'hour_sin', cos: 'hour_cos', period: 24 },
    { name: 'day_of_week', sin: 'day_sin', cos: 'day_cos', period: 7 },
    { name: 'month_of_year', sin: 'month_sin', cos: 'month_cos', period: 12 },
  ],
  travel: [
    { name: 'hour_of_day', sin: 'hour_sin', cos: 'hour_cos', period: 24 },
    { name: 'day_of_week', sin: 'day_sin', cos: 'day_cos', period: 7 },
  ],
  locker: [{ name: 'hour_of_day', sin: 'hour_sin', cos: 'hour_cos', period: 24 }],
};

/**
 * The inputs that drive each model's answer most, in vector names: the held-out metrics report coverage
 * (or calibration, for the locker) within each of their deciles, and the tests hold every decile to the
 * target, so the intervals are right where users look and not only on average.
 */
export const SEGMENT_FEATURES: Readonly<Record<ModelName, readonly string[]>> = {
  dwell: ['floor_number', 'queue_length', 'distance_to_opc_km', 'hour_of_day'],
  travel: ['distance_km', 'hour_of_day'],
  locker: ['locker_distance_km', 'handoff_window_min', 'hour_of_day'],
};

/** The angle of a sin/cos pair as a value in [0, period). */
export function angleOf(sin: number, cos: number, period: number): number {
  const turns = Math.atan2(sin, cos) / (2 * Math.PI);
  return ((turns + 1) % 1) * period;
}

/** sin/cos encoding of a value with the given period. */
export function encodeCyclic(value: number, period: number): [number, number] {
  const angle = (2 * Math.PI * value) / period;
  return [Math.sin(angle), Math.cos(angle)];
}

/** How far sin² + cos² of a pair may stray from 1 (clients round their encodings). */
const CYCLIC_TOLERANCE = 0.05;

/** Feature names of a model in vector order: the inputs, then the derived features. */
export function vectorNames(model: ModelName): string[] {
  return [...MODEL_FEATURES[model].map((f) => f.name), ...DERIVED_FEATURES[model].map((d) => d.name)];
}

/** The model input vector of one validated record (inputs in spec order, then derived features). */
export function toVector(model: ModelName, record: Readonly<Record<string, number>>): Float64Array {
  const specs = MODEL_FEATURES[model];
  const derived = DERIVED_FEATURES[model];
  const vector = new Float64Array(specs.length + derived.length);
  specs.forEach((spec, i) => {
    vector[i] = record[spec.name] ?? Number.NaN;
  });
  derived.forEach((d, j) => {
    vector[specs.length + j] = angleOf(record[d.sin] ?? 0, record[d.cos] ?? 1, d.period);
  });
  return vector;
}

const camelName = (snake: string) => snake.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());

const describeCodes = (codes: readonly CodeSpec[]) => codes.map((c) => `${c.code} (${c.name.toLowerCase()})`).join(', ');

/** The zod check of one feature as REST sends it: a JSON number (codes and flags as integers). */
function restField(spec: FeatureSpec): z.ZodType<number> {
  const base = z.number({ error: (issue) => (issue.input === undefined ? 'is required' : 'must be a number') });
  switch (spec.kind) {
    case 'code':
      return base.int('must be an integer code').refine((v) => spec.codes!.some((c) => c.code === v), `must be one of ${describeCodes(spec.codes!)}`);
    case 'flag':
      return base.int('must be 0 or 1').min(0, 'must be 0 or 1').max(1, 'must be 0 or 1');
    case 'count':
      return base.int('must be a whole number').min(spec.min, `must be at least ${spec.min}`).max(spec.max, `must be at most ${spec.max}`);
    default:
      return base.finite().min(spec.min, `must be at least ${spec.min}`).max(spec.max, `must be at most ${spec.max}`);
  }
}

/** Adds an issue on each member of a sin/cos pair that is not (nearly) on the unit circle. */
function checkCyclicPairs(model: ModelName, value: Readonly<Record<string, number>>, ctx: z.RefinementCtx, name: (snake: string) => string): void {
  for (const d of DERIVED_FEATURES[model]) {
    const s = value[name(d.sin)];
    const c = value[name(d.cos)];
    if (s === undefined || c === undefined) continue;
    if (Math.abs(s * s + c * c - 1) > CYCLIC_TOLERANCE) {
      const message = `${d.sin} and ${d.cos} must be the sin and cos of one angle (sin² + cos² = 1)`;
      ctx.addIssue({ code: 'custom', path: [name(d.sin)], message });
    }
  }
}

/** REST body schema of one model: every feature required, by its snake_case name. */
export function restFeatureSchema(model: ModelName) {
  const shape: Record<string, z.ZodType<number>> = {};
  for (const spec of MODEL_FEATURES[model]) shape[spec.name] = restField(spec);
  return z
    .object(shape)
    .superRefine((value, ctx) => checkCyclicPairs(model, value as Record<string, number>, ctx, (s) => s))
    .transform((value) => value as Record<string, number>);
}

/** A GraphQL input value: Int/Float for numbers, Boolean for flags, enum names for codes. */
export type GraphQLFeatureValue = number | boolean | string;

/** The range checks on a GraphQL input, after GraphQL has checked the types; yields the numeric record. */
export function graphqlFeatureSchema(model: ModelName) {
  const shape: Record<string, z.ZodType<number>> = {};
  for (const spec of MODEL_FEATURES[model]) {
    const key = camelName(spec.name);
    if (spec.kind === 'code') {
      const byName = new Map(spec.codes!.map((c) => [c.name, c.code]));
      shape[key] = z
        .string()
        .refine((v) => byName.has(v), `must be one of ${spec.codes!.map((c) => c.name).join(', ')}`)
        .transform((v) => byName.get(v)!);
    } else if (spec.kind === 'flag') {
      shape[key] = z.boolean().transform((v) => (v ? 1 : 0));
    } else {
      shape[key] = restField(spec);
    }
  }
  return z
    .object(shape)
    .superRefine((value, ctx) => checkCyclicPairs(model, value as Record<string, number>, ctx, camelName))
    .transform((value) => {
      const record: Record<string, number> = {};
      for (const spec of MODEL_FEATURES[model]) record[spec.name] = (value as Record<string, number>)[camelName(spec.name)]!;
      return record;
    });
}

/** The GraphQL input of a numeric REST record: camelCase names, enum names for codes, Booleans for flags. */
export function toGraphQLInput(model: ModelName, record: Readonly<Record<string, number>>): Record<string, GraphQLFeatureValue> {
  const input: Record<string, GraphQLFeatureValue> = {};
  for (const spec of MODEL_FEATURES[model]) {
    const value = record[spec.name]!;
    const key = camelName(spec.name);
    if (spec.kind === 'code') input[key] = spec.codes!.find((c) => c.code === value)!.name;
    else if (spec.kind === 'flag') input[key] = value === 1;
    else input[key] = value;
  }
  return input;
}
