import { z } from 'zod';
import { instant, orNull } from '../../platform/rest.js';

/*
 * The documented answers of the optimization REST paths (rest.ts): the OpenAPI document's schemas and,
 * outside production, the check on every answer. The overview repeats the status, the safety proof, the
 * fleet and the runs, so each of those is one component.
 */

const count = () => z.number().int().min(0);
const ms = (what: string) => z.number().describe(`${what}, milliseconds`);
const knots = (what: string) => z.number().describe(`${what}, knots`);
const metres = (what: string) => z.number().describe(`${what}, metres`);
const ratio = (what: string) => z.number().describe(`${what}: (F - Fmin) / (Fmax - Fmin) against the exact optimum (0..1; cut / maximum cut for MaxCut)`);
const bits = z
  .string()
  .regex(/^[01]*$/)
  .describe('One character per qubit, 0 or 1');

const coordinates = z
  .strictObject({ latitude: z.number().describe('Degrees (WGS 84)'), longitude: z.number().describe('Degrees (WGS 84)') })
  .meta({ id: 'OptimizationCoordinates' });

export const optimizationHealth = z.strictObject({
  service: z.literal('optimization'),
  version: z.literal('1.0'),
  status: z.enum(['ok', 'degraded']).describe('degraded when the database does not answer'),
  ready: z.boolean(),
  database: z.boolean().describe('Whether the database answers'),
  fleet_tick: count().describe('The newest fleet simulation step (0 when the database does not answer)'),
  solver_loaded: z.boolean().describe("Whether Z3's WebAssembly has been loaded (on the first proof)"),
});

export const optimizationStatus = z
  .strictObject({
    service: z.literal('optimization'),
    version: z.literal('1.0'),
    backend: z
      .strictObject({
        name: z.literal('statevector-simulator'),
        kind: z.literal('SIMULATOR'),
        description: z.string(),
        max_qubits: count(),
      })
      .describe('The simulator the runs execute on (never quantum hardware)'),
    limits: z.strictObject({
      max_qubits: count(),
      max_depth: count().describe('QAOA layers'),
      max_shots: count(),
      max_evaluations: count().describe('Circuit evaluations the angle optimizer may spend'),
      max_concurrent_runs: count(),
      max_estimated_seconds: z.number().describe('Estimated compute above which a run is refused, seconds'),
    }),
    fleet: z.strictObject({
      seed: z.number().int(),
      vessels: count(),
      tick: count().describe('The newest simulation step'),
      tick_interval_ms: count().describe('How often positions are recorded, milliseconds'),
      updated_at: instant(),
    }),
    runs: z.strictObject({ total: count(), running: count(), completed: count(), failed: count() }),
  })
  .meta({ id: 'OptimizationStatus' });

const vesselRef = z.strictObject({ mmsi: z.string(), name: z.string() }).meta({ id: 'OptimizationVesselRef' });
const separationViolation = z
  .strictObject({ vessel_a: vesselRef, vessel_b: vesselRef, distance_meters: metres('Distance between the two') })
  .meta({ id: 'OptimizationVesselPair' });

export const optimizationVerify = z
  .strictObject({
    safe: z.boolean(),
    status: z.enum(['proved_safe', 'violations_found']),
    min_separation_meters: metres('The separation threshold'),
    tick: count().describe('The fleet step the proof is about'),
    timestamp: instant(),
    vessel_count: count(),
    pairs: count().describe('All pairs, n(n-1)/2'),
    solver_pairs: count().describe('Pairs the solver was given (every pair up to 150 vessels; beyond, those a grid cannot rule out)'),
    separation_violations: z.array(separationViolation),
    speed_violations: z.array(
      z.strictObject({
        vessel: vesselRef,
        zone_id: z.string(),
        speed_knots: knots('Speed over ground'),
        limit_knots: knots('The zone limit'),
      }),
    ),
    closest_pair: orNull(separationViolation).describe('The closest pair of the fleet, violating or not; null with fewer than two vessels'),
    proof: z.string().describe('Human-readable proof: unsat of the negated property when safe, the witness and its completeness when not'),
    solver: z.strictObject({
      name: z.literal('z3'),
      version: z.string(),
      queries: z.array(z.strictObject({ query: z.string(), result: z.enum(['sat', 'unsat']), ms: count().describe('Solver time, milliseconds') })),
    }),
    cross_check: z
      .strictObject({
        method: z.string(),
        separation_violations: count(),
        speed_violations: count(),
        agrees: z.literal(true).describe('Always true in an answer: a disagreement is a server fault'),
      })
      .describe('The same properties re-checked by a plain computation'),
    duration_ms: count().describe('Milliseconds'),
  })
  .meta({
    id: 'OptimizationSafetyVerification',
    description: 'A Z3 proof of the fleet constraints (minimum separation of every pair, speed limit of every zone)',
  });

export const optimizationFleet = z
  .strictObject({
    tick: count().describe('The simulation step these positions belong to'),
    timestamp: instant(),
    vessel_count: count(),
    vessels: z.array(
      z
        .strictObject({
          mmsi: z
            .string()
            .regex(/^\d{9}$/)
            .describe('Maritime Mobile Service Identity, 9 digits'),
          name: z.string(),
          type: z.enum(['cargo', 'tanker', 'container', 'passenger', 'tug', 'pilot', 'fishing']),
          lane: z.string().describe('The traffic lane the simulation sails it on'),
          position: coordinates,
          speed_over_ground: knots('Speed over ground'),
          course_over_ground: z.number().describe('Course over ground, degrees'),
          heading: z.number().int().describe('True heading, degrees'),
          timestamp: instant(),
        })
        .meta({ id: 'OptimizationVessel' }),
    ),
    speed_zones: z.array(
      z.strictObject({
        id: z.string(),
        name: z.string(),
        center: coordinates,
        radius_meters: metres('Radius'),
        limit_knots: knots('Speed limit'),
      }),
    ),
  })
  .meta({ id: 'OptimizationFleetSnapshot', description: "Every vessel's newest position" });

const runStatus = z.enum(['running', 'completed', 'failed']);
const problem = z.enum(['convoy_maxcut', 'berth_qubo', 'regular3_maxcut']);

const runResult = z
  .strictObject({
    gammas: z.array(z.number()).describe('Optimized angles, one per layer'),
    betas: z.array(z.number()),
    energy: z.number().describe('Expected objective <F> at the optimized angles (larger is better)'),
    optimality_ratio: ratio('Ratio of the expected objective'),
    start_ratio: ratio('The same at the fixed starting angles, before the optimizer'),
    evaluations: count().describe('Circuit evaluations spent'),
    sampled_mean_ratio: ratio('Mean ratio of the shots'),
    best_sample_bits: bits,
    best_sample_energy: z.number(),
    best_sample_ratio: ratio('Ratio of the best shot'),
    optimum_probability: z.number().describe('Probability of measuring an optimal assignment (0..1)'),
    distinct_samples: count(),
    top_samples: z.array(z.strictObject({ bits, count: count(), energy: z.number() })),
    random_sample_best_ratio: ratio('Best of as many uniformly random assignments as shots'),
    refined: z
      .strictObject({ bits, energy: z.number(), ratio: ratio('After local search'), starts: count(), evaluations: count().describe('Move evaluations') })
      .describe('Local search from the best distinct samples'),
    baseline: z
      .strictObject({ energy: z.number(), ratio: ratio('Of the baseline'), starts: count(), evaluations: count().describe('Move evaluations') })
      .describe('Random-start local search with the same move budget'),
    optimum: z
      .strictObject({
        energy: z.number().describe('Fmax'),
        worst_energy: z.number().describe('Fmin'),
        bits,
        method: z.enum(['BRANCH_AND_BOUND', 'BRUTE_FORCE']),
        nodes: count().describe('Branch-and-bound nodes visited'),
        brute_force_agrees: z.boolean(),
      })
      .describe('The exact optimum'),
    timings: z.strictObject({
      diagonal_ms: ms('Cost diagonal'),
      optimize_ms: ms('Angle optimization'),
      simulate_ms: ms('Final simulation'),
      sample_ms: ms('Sampling'),
      exact_ms: ms('Exact optimum'),
      refine_ms: ms('Refinement and baseline'),
      total_ms: ms('Whole run'),
    }),
  })
  .meta({ id: 'OptimizationRunResult' });

const runHead = {
  id: z.uuid(),
  status: runStatus,
  problem,
  size: count().describe('Vessels or vertices'),
  qubits: count(),
  depth: count().describe('QAOA layers'),
  shots: count(),
  backend: z.literal('statevector-simulator'),
  created_at: instant(),
  completed_at: instant().nullable().describe('null while running'),
  duration_ms: count().nullable().describe('Milliseconds; null while running'),
  error: z.string().nullable().describe('Why it failed; null otherwise'),
};

export const optimizationRun = z
  .strictObject({
    ...runHead,
    seed: z.number().int(),
    max_evaluations: count(),
    refine_top: count(),
    fleet_tick: count().nullable().describe('The fleet step the instance was built from (null for regular3_maxcut, which does not use the fleet)'),
    instance: z.strictObject({
      description: z.string(),
      variables: z.array(z.string()).describe('What each qubit stands for (an MMSI, a vessel-slot pair, a vertex)'),
      edges: z.array(z.strictObject({ u: count(), v: count(), weight: z.number() })),
    }),
    result: orNull(runResult).describe('null until completed'),
  })
  .meta({ id: 'OptimizationRun', description: 'A hybrid quantum-classical run on the state-vector simulator' });

const runSummary = z
  .strictObject({
    ...runHead,
    result: z
      .strictObject({
        energy: z.number(),
        optimality_ratio: ratio('Ratio of the expected objective'),
        best_sample_ratio: ratio('Ratio of the best shot'),
        refined: z.strictObject({ ratio: ratio('After local search') }),
        baseline: z.strictObject({ ratio: ratio('Of the baseline') }),
        optimum: z.strictObject({ energy: z.number(), method: z.enum(['BRANCH_AND_BOUND', 'BRUTE_FORCE']) }),
      })
      .nullable()
      .describe('null until completed'),
  })
  .meta({ id: 'OptimizationRunSummary' });

export const optimizationRefined = z
  .strictObject({
    run: z.strictObject({
      id: z.uuid(),
      problem,
      size: count(),
      qubits: count(),
      depth: count(),
      shots: count(),
      backend: z.literal('statevector-simulator'),
    }),
    optimality_ratio: ratio("Ratio of the optimized circuit's expectation"),
    best_sample_ratio: ratio('Ratio of the best raw sample'),
    refined_ratio: ratio('Ratio after local search from the best samples'),
    baseline_ratio: ratio('Random-start local search with the same move budget'),
    completed_at: instant(),
  })
  .meta({ id: 'OptimizationRefinedResult', description: "The newest completed run's ratios after classical refinement, beside the baseline's" });

const page = <T extends z.ZodType>(run: T) => ({
  runs: z.array(run).describe('Newest first'),
  next_cursor: z.string().nullable().describe('Pass as ?cursor= for the next page; null on the last page'),
  total: count().describe('Runs recorded'),
});

export const optimizationRuns = z.strictObject(page(optimizationRun));

export const optimizationOverview = z.strictObject({
  status: optimizationStatus,
  verify: optimizationVerify,
  fleet: optimizationFleet,
  quantum: z.strictObject({
    ...page(runSummary),
    latest_refined: orNull(optimizationRefined).describe('null before any run completed'),
  }),
});
