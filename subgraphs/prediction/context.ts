import type { DwellReading } from './forecasts.js';
import type { QuantileTriple } from './metrics.js';
import type { ModelSet } from './model.js';

/*
 * What a prediction resolver receives: the request's context, and the views the forecast and model types
 * are resolved from (their parents in schema-types.ts, generated from the SDL).
 */

export interface PredictionContext {
  models: ModelSet;
}

/** A forecast as the resolvers pass it on: the quantiles plus what the type shows besides. */
export interface TransitView extends QuantileTriple {
  version: string;
  departAt: Date | null;
}

/** The Booking fields this subgraph receives from the rental subgraph (a representation). */
export interface BookingRepresentation {
  id: string;
  deliveryDistanceKm?: number;
  deliveryDepartAt?: string | Date;
}

/** A dwell forecast: the quantiles, what they mean for the organ, and the model that made them. */
export type DwellView = QuantileTriple & DwellReading & { version: string };

/** A locker forecast and its model. */
export interface LockerView {
  successProbability: number;
  version: string;
}

/** A quantile model with its held-out metrics. */
export interface QuantileInfo {
  model: ModelSet['dwell'];
  metrics: ModelSet['metrics']['dwell'];
}

/** The locker classifier with its held-out metrics. */
export interface ClassifierInfo {
  model: ModelSet['locker'];
  metrics: ModelSet['metrics']['locker'];
}
