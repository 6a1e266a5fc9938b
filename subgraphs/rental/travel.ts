import { PeerUnavailable, type Peers } from '../../platform/peers.js';

/** Where a truck run's road minutes come from: the prediction subgraph's travel model, or the rule. */
export type EtaSource = 'model' | 'rule';

/** Road minutes of a truck run at q10 / q50 / q90 and their source. The rule has no spread. */
export interface TravelForecast {
  source: EtaSource;
  /** The travel model's version; null for the rule. */
  version: string | null;
  q10: number;
  q50: number;
  q90: number;
}

/** The fallback while prediction cannot answer: a low-loader's average speed on regional roads. */
const RULE_SPEED_KMH = 45;

export function ruleForecast(distanceKm: number): TravelForecast {
  const minutes = (distanceKm / RULE_SPEED_KMH) * 60;
  return { source: 'rule', version: null, q10: minutes, q50: minutes, q90: minutes };
}

/**
 * The instant `minutes` after `fromMs`, computed as prediction computes its arrivals (a Date of the sum),
 * so an ETA and the forecast's arrival for the same run are the same millisecond.
 */
export const after = (fromMs: number, minutes: number) => new Date(fromMs + minutes * 60_000).getTime();

/** Forecasts for truck runs (road distance, departure), one per run, in order; never fails. */
export type TravelForecaster = (runs: readonly { distanceKm: number; departAt: Date }[]) => Promise<TravelForecast[]>;

/**
 * Prediction's own answer for a booking's delivery (`Booking.deliveryForecast`, resolved from the run's
 * distance and departure), so tracking and the forecast a client reads beside it are one computation.
 */
const DELIVERY_FORECASTS = /* GraphQL */ `
  query RentalTravelForecasts($representations: [_Any!]!) {
    _entities(representations: $representations) {
      ... on Booking {
        deliveryForecast {
          q10Minutes
          q50Minutes
          q90Minutes
          modelVersion
        }
      }
    }
  }
`;

interface ForecastAnswer {
  _entities: ({ deliveryForecast: { q10Minutes: number; q50Minutes: number; q90Minutes: number; modelVersion: string } | null } | null)[];
}

/** The forecaster over the prediction peer; while prediction cannot answer, every run gets the rule. */
export function predictionForecaster(peers: Peers, onUnavailable?: (error: PeerUnavailable) => void): TravelForecaster {
  return async (runs) => {
    if (runs.length === 0) return [];
    let answer: ForecastAnswer;
    try {
      answer = await peers.query<ForecastAnswer>('prediction', DELIVERY_FORECASTS, {
        representations: runs.map((run, i) => ({
          __typename: 'Booking',
          id: `run-${i}`,
          deliveryDistanceKm: run.distanceKm,
          deliveryDepartAt: run.departAt.toISOString(),
        })),
      });
    } catch (error) {
      if (!(error instanceof PeerUnavailable)) throw error;
      onUnavailable?.(error);
      return runs.map((run) => ruleForecast(run.distanceKm));
    }
    return runs.map((run, i) => {
      const f = answer._entities[i]?.deliveryForecast;
      return f ? { source: 'model', version: f.modelVersion, q10: f.q10Minutes, q50: f.q50Minutes, q90: f.q90Minutes } : ruleForecast(run.distanceKm);
    });
  };
}
