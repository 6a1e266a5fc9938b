import { z } from 'zod';
import { PROBLEM_KINDS, SIZE_RANGE } from './instances.js';
import { MAX_DEPTH } from './qaoa.js';

const MAX_SHOTS = 100_000;
const MAX_EVALUATIONS = 500;
const MAX_REFINE_TOP = 64;
export const MAX_RUNS_PAGE = 100;
const MAX_TRACK = 200;
const MAX_MMSI_FILTER = 100;

const whole = (min: number, max: number) => z.number().int('must be a whole number').min(min, `must be at least ${min}`).max(max, `must be at most ${max}`);

/** startQuantumRun's input; sizes are checked against the problem kind below. */
export const startRunInput = z
  .object({
    problem: z.enum(PROBLEM_KINDS),
    size: z.number().int('must be a whole number'),
    depth: whole(1, MAX_DEPTH).default(1),
    shots: whole(1, MAX_SHOTS).default(1024),
    seed: whole(0, 2_147_483_647).default(1),
    maxEvaluations: whole(1, MAX_EVALUATIONS).default(60),
    refineTop: whole(1, MAX_REFINE_TOP).default(8),
  })
  .superRefine((input, ctx) => {
    const range = SIZE_RANGE[input.problem];
    if (input.size < range.min || input.size > range.max) {
      ctx.addIssue({ code: 'custom', path: ['size'], message: `must be from ${range.min} to ${range.max} for ${input.problem}` });
    } else if (range.even && input.size % 2 !== 0) {
      ctx.addIssue({ code: 'custom', path: ['size'], message: `must be even for ${input.problem} (a 3-regular graph has an even number of vertices)` });
    }
  });
export type StartRunInput = z.infer<typeof startRunInput>;

export const mmsiArg = z.string().regex(/^\d{9}$/, 'must be a 9-digit MMSI');
export const mmsiFilter = z
  .array(mmsiArg)
  .min(1, 'must name at least one vessel')
  .max(MAX_MMSI_FILTER, `must name at most ${MAX_MMSI_FILTER} vessels`)
  .nullish();
export const trackLast = whole(1, MAX_TRACK);
export const runsFirst = whole(1, MAX_RUNS_PAGE);
export const minSeparation = z.number().min(50, 'must be at least 50').max(5000, 'must be at most 5000').nullish();
export const runId = z.string().uuid('must be a run id (UUID)');
