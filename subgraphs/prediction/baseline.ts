import { vectorNames } from './features.js';

/*
 * Physical baselines of the quantile models. A tree ensemble is piecewise constant: past its last split on
 * a feature it repeats the answer it gave there, so a model of ln(minutes) says the same for a 250 km and a
 * 1,500 km corridor. The models therefore predict ln(minutes / baseline), where the baseline is a plain
 * physical estimate that keeps growing with the inputs that drive the time (distance at a free-flow speed,
 * floors climbed, handovers waiting): the trees learn the ratio, which changes slowly, and every answer is
 * the baseline times that ratio. Inside the training data this changes nothing the trees could not learn;
 * at its thin edges, and between bins, the answer still follows distance, floor and queue.
 *
 * The baselines are deliberately simple and are not the generator's formulas: a free-flow speed per road
 * type, a lift or stair time per floor, a service time per waiting handover. Their fixed parts are about
 * the typical time spent apart from those (the first and last mile of a corridor, the rest of a handover),
 * so the ratio stays nearly flat as distance, floors or the queue grow: the trees then have little slope
 * to learn, and their noise cannot turn a longer trip or a higher floor into a shorter answer.
 */

/** Free-flow speed by road type (urban, arterial, motorway, rural), km/h: typical posted limits. */
const FREE_FLOW_KMH = [30, 50, 100, 80] as const;

export interface Baseline {
  /** Stored in each artifact, and checked at load: a model is only valid with the baseline it was trained on. */
  name: string;
  /** What docs/prediction.md says about it. */
  description: string;
  /** Baseline minutes of one record; `f` reads a feature by its snake_case name. */
  minutes(f: (name: string) => number): number;
}

export const BASELINES: Readonly<Record<'dwell' | 'travel', Baseline>> = {
  travel: {
    name: 'travel/free-flow-2',
    description: '10 min + distance_km at the free-flow speed of the road type (urban 30, arterial 50, motorway 100, rural 80 km/h)',
    minutes: (f) => 10 + (60 * f('distance_km')) / FREE_FLOW_KMH[f('road_type')]!,
  },
  dwell: {
    name: 'dwell/handover-2',
    description: '40 min + 0.4 min per floor from the ground by lift (1.8 min by the stairs when elevator_available is 0) + 5 min per handover in queue_length',
    minutes: (f) => 40 + Math.abs(f('floor_number')) * (f('elevator_available') === 1 ? 0.4 : 1.8) + 5 * f('queue_length'),
  },
};

/** The baseline of a model as a function of its input vector (features.ts `toVector` order). */
export function vectorBaseline(model: 'dwell' | 'travel'): (x: ArrayLike<number>) => number {
  const index = new Map(vectorNames(model).map((name, i) => [name, i]));
  const baseline = BASELINES[model];
  return (x) =>
    baseline.minutes((name) => {
      const i = index.get(name);
      if (i === undefined) throw new Error(`the ${model} baseline reads unknown feature ${name}`);
      return x[i]!;
    });
}
