import { execute, parse, type GraphQLSchema } from 'graphql';
import { SYSTEM_PRINCIPAL } from '../../platform/principal.js';
import type { SubgraphModule } from '../../platform/subgraph.js';
import { prediction } from '../../subgraphs/prediction/index.js';
import { subgraphs } from '../../subgraphs/registry.js';

/** A prediction subgraph that starts but fails every request, as an unreachable one does. */
const unreachablePrediction: typeof prediction = {
  ...prediction,
  async start(deps) {
    const instance = await prediction.start(deps);
    return {
      ...instance,
      context: () => {
        throw new Error('connect ECONNREFUSED 127.0.0.1:4102');
      },
    };
  },
};

/** Every subgraph, prediction unreachable. */
export const withPredictionUnreachable = (): SubgraphModule[] => subgraphs.map((m) => (m.name === 'prediction' ? unreachablePrediction : m));

/** Valid feature payloads of the three models, as REST clients send them (snake_case, integer codes). */

export const dwellFeatures = {
  building_type: 0,
  organ_type: 2,
  security_level: 2,
  staff_shift: 0,
  handover_protocol: 0,
  preservation_method: 0,
  elevator_available: 1,
  floor_number: 4,
  distance_to_opc_km: 35,
  urban_density: 0.7,
  traffic_congestion: 0.4,
  weather_severity: 0.2,
  ischaemic_remaining_min: 150,
  hour_sin: 0.5,
  hour_cos: -0.866025,
  day_sin: 0,
  day_cos: 1,
  month_sin: 0.5,
  month_cos: 0.866025,
  is_weekend: 0,
  queue_length: 2,
  courier_experience_years: 5,
};

export const travelFeatures = {
  origin_density: 0.6,
  destination_density: 0.8,
  distance_km: 42,
  road_type: 2,
  weather: 1,
  traffic: 2,
  public_holiday: 0,
  peak_hour: 1,
  hour_sin: 0.866025,
  hour_cos: -0.5,
  day_sin: 0.781831,
  day_cos: 0.62349,
};

export const lockerFeatures = {
  organ_type: 0,
  locker_distance_km: 3,
  locker_occupancy: 0.5,
  temperature_controlled: 1,
  handoff_window_min: 120,
  urban_density: 0.6,
  weather_severity: 0.1,
  traffic_congestion: 0.3,
  hour_sin: 0.5,
  hour_cos: -0.866025,
};

/** The same payloads as GraphQL inputs (camelCase, enum names, Booleans). */
export const dwellInput = {
  buildingType: 'TRANSPLANT_CENTRE',
  organType: 'HEART',
  securityLevel: 'ESCORTED',
  staffShift: 'DAY',
  handoverProtocol: 'DIRECT_TO_THEATRE',
  preservationMethod: 'STATIC_COLD_STORAGE',
  elevatorAvailable: true,
  floorNumber: 4,
  distanceToOpcKm: 35,
  urbanDensity: 0.7,
  trafficCongestion: 0.4,
  weatherSeverity: 0.2,
  ischaemicRemainingMin: 150,
  hourSin: 0.5,
  hourCos: -0.866025,
  daySin: 0,
  dayCos: 1,
  monthSin: 0.5,
  monthCos: 0.866025,
  isWeekend: false,
  queueLength: 2,
  courierExperienceYears: 5,
};

export const travelInput = {
  originDensity: 0.6,
  destinationDensity: 0.8,
  distanceKm: 42,
  roadType: 'MOTORWAY',
  weather: 'RAIN',
  traffic: 'HEAVY',
  publicHoliday: false,
  peakHour: true,
  hourSin: 0.866025,
  hourCos: -0.5,
  daySin: 0.781831,
  dayCos: 0.62349,
};

export const lockerInput = {
  organType: 'KIDNEY',
  lockerDistanceKm: 3,
  lockerOccupancy: 0.5,
  temperatureControlled: true,
  handoffWindowMin: 120,
  urbanDensity: 0.6,
  weatherSeverity: 0.1,
  trafficCongestion: 0.3,
  hourSin: 0.5,
  hourCos: -0.866025,
};

/** Prediction's own forecast of a truck run (Booking.deliveryForecast from a representation). */
export interface RunForecast {
  q10Minutes: number;
  q50Minutes: number;
  q90Minutes: number;
  arrivalQ10: string;
  arrivalQ50: string;
  arrivalQ90: string;
  modelVersion: string;
}

/**
 * Asks a prediction subgraph instance directly (its `_entities`, as the gateway would) for the forecast of
 * a run of `distanceKm` leaving at `departAt`: the figure tracking and quotes must agree with.
 */
export async function runForecast(
  instance: { schema: GraphQLSchema; context(request: { headers: Record<string, string>; principal: typeof SYSTEM_PRINCIPAL }): unknown },
  distanceKm: number,
  departAt: number | string,
): Promise<RunForecast> {
  const result = await execute({
    schema: instance.schema,
    document: parse(`query($r: [_Any!]!) { _entities(representations: $r) { ... on Booking {
      deliveryForecast { q10Minutes q50Minutes q90Minutes arrivalQ10 arrivalQ50 arrivalQ90 modelVersion } } } }`),
    variableValues: {
      r: [{ __typename: 'Booking', id: 'probe', deliveryDistanceKm: distanceKm, deliveryDepartAt: new Date(departAt).toISOString() }],
    },
    contextValue: instance.context({ headers: {}, principal: SYSTEM_PRINCIPAL }),
  });
  if (result.errors) throw new Error(JSON.stringify(result.errors));
  return (result.data as { _entities: { deliveryForecast: RunForecast }[] })._entities[0]!.deliveryForecast;
}
