import { z } from 'zod';
import { instant, orNull } from '../../platform/rest.js';

/*
 * The documented answers of the bonding REST paths (rest.ts): the OpenAPI document's schemas and, outside
 * production, the check on every answer. The session snapshot and the recommendation are components:
 * every session path answers the one, and the optimize path and every session carry the other.
 */

// Computed in floating point, so documented as 0..1 rather than checked to the last ulp.
const probability = (what: string) => z.number().describe(`${what} (0..1)`);
const mbps = (what: string) => z.number().describe(`${what}, Mbit/s`);
const ms = (what: string) => z.number().describe(`${what}, milliseconds`);
const sessionId = z
  .string()
  .regex(/^BS-[0-9a-f]{12}$/)
  .describe('BS- and 12 hex digits');

export const bondingHealth = z.strictObject({
  status: z.literal('ok'),
  service: z.literal('bonding'),
  version: z.literal('1.0'),
  sessions: z
    .strictObject({
      open: z.number().int().min(0),
      negotiating: z.number().int().min(0),
      bonded: z.number().int().min(0),
      degraded: z.number().int().min(0),
      down: z.number().int().min(0),
    })
    .describe('Open sessions, in all and by state'),
  key_source: z.string().describe('How session keys are made: a BB84 simulation in software, ML-KEM-768 and HKDF-SHA256'),
  link_model: z.strictObject({
    tick_ms: z.number().int().describe('Wall-clock interval of a link-model step, milliseconds'),
    simulated_seconds_per_tick: z.number().describe('Simulated seconds one step advances'),
  }),
});

const bondingPair = z
  .strictObject({
    a: z.string().describe('Path id'),
    b: z.string().describe('Path id'),
    joint_outage: probability('Probability that both paths are down at once, under their failure correlation'),
    availability: probability('1 - joint_outage: the share of time at least one of the two is up'),
    outage_a: probability('Probability that path a is down'),
    outage_b: probability('Probability that path b is down'),
    correlation: z.number().describe("Pearson correlation of the two paths' down indicators (-1..1)"),
    shared_risk: z.array(z.string()).describe('Shared-risk groups both paths are in'),
    combined_capacity_mbps: mbps('The two capacities added'),
    protected_rate_mbps: mbps('The rate that survives either path failing'),
    expected_goodput_mbps: mbps('Sum of capacity x (1 - loss) x (1 - outage) of the two'),
    max_latency_ms: ms('The higher latency of the two'),
  })
  .meta({ id: 'BondingPathPair', description: `A redundant path pair (the specification's "Bell-state" pair)` });

export const bondingRecommendation = z
  .strictObject({
    feasible: z.boolean().describe('false when no pair meets the constraints (then pair is null and the explanation says why)'),
    explanation: z.string().describe('Why this pair (or why none), and what each constraint ruled out'),
    pair: orNull(bondingPair).describe('The pair with the lowest joint outage; null when none is feasible'),
    runner_up: orNull(bondingPair).describe('The next best pair; null when there is none'),
    weights: z
      .array(
        z.strictObject({
          path_id: z.string(),
          weight: probability("Share of the traffic, proportional to the path's expected goodput"),
          outage: probability('Probability that the path is down'),
          expected_goodput_mbps: mbps('capacity x (1 - loss) x (1 - outage)'),
        }),
      )
      .describe('Traffic split over every usable path'),
    expected_goodput_mbps: mbps('Expected goodput of the whole bond'),
    ruled_out: z
      .array(
        z.strictObject({
          constraint: z.enum(['up', 'max_latency_ms', 'max_jitter_ms', 'max_loss_pct', 'min_combined_capacity_mbps']),
          limit: z.number().nullable().describe('The limit applied; null for up'),
          count: z.number().int().min(0).describe('Paths excluded (pairs, for min_combined_capacity_mbps)'),
          examples: z.array(z.string()).describe('Up to 20 of the excluded paths'),
        }),
      )
      .describe('What each constraint excluded'),
    paths_considered: z.number().int().min(0),
    paths_usable: z.number().int().min(0).describe('Paths up and within the per-path constraints'),
    pairs_total: z.number().int().min(0),
    pairs_evaluated: z.number().int().min(0).describe('Pairs whose joint outage was computed (the rest were excluded by the bound or by capacity)'),
    method: z.string().describe('How the pair was searched'),
    elapsed_ms: ms('Search time'),
  })
  .meta({ id: 'BondingRecommendation' });

const planeHealth = z.enum(['ok', 'degraded', 'critical']);
const plane = z
  .strictObject({ health: planeHealth, last_action: z.string(), last_action_at: instant() })
  .meta({ id: 'BondingPlane', description: 'One of the four planes: its health and what it last did' });

const keyStatus = z.enum(['completed', 'aborted']).describe('aborted: no key (QBER over the threshold, or too few bits left)');

export const bondingSession = z
  .strictObject({
    session_id: sessionId,
    user_id: z.string(),
    state: z
      .enum(['negotiating', 'bonded', 'degraded', 'down', 'closed'])
      .describe('bonded: two or more paths up; degraded: one; down: none; closed is terminal'),
    state_reason: z.string().describe('Why the session is in its state'),
    seed: z.number().int().min(0).describe('Seed of the link model: the same seed and paths give the same metrics, step by step'),
    tick: z.number().int().min(0).describe('Link-model steps taken'),
    simulated_seconds: z.number().min(0).describe('Simulated seconds the link model has advanced'),
    created_at: instant(),
    updated_at: instant(),
    closed_at: instant().nullable(),
    paths: z.array(
      z
        .strictObject({
          id: z.string(),
          kind: z.enum(['fiber', 'cable', 'dsl', '5g', 'lte', 'satellite', 'microwave']),
          shared_risk: z.array(z.string()).describe('Shared-risk groups (conduit:..., cell-site:..., operator-core:..., power:..., weather:...)'),
          latency_ms: ms('Latency'),
          jitter_ms: ms('Jitter'),
          loss_pct: z.number().min(0).max(100).describe('Packet loss, percent'),
          capacity_mbps: mbps('Capacity'),
          up: z.boolean(),
          outage_probability: probability('Long-run probability that the path is down (own faults and its shared-risk groups)'),
        })
        .meta({ id: 'BondingPath', description: 'A bonded path with its metrics at the newest link-model step' }),
    ),
    planes: z.strictObject({ data: plane, control: plane, security: plane, intelligence: plane }),
    recommendation: bondingRecommendation,
    last_key: orNull(
      z
        .strictObject({
          key_id: z.string().nullable().describe('QK- and 16 hex digits; null when aborted'),
          status: keyStatus,
          fingerprint: z.string().nullable().describe('First 16 bytes of SHA-256 of the key, hex; null when aborted'),
          bits: z.number().int().describe('Key length asked for'),
          qber: probability('Quantum bit error rate measured on the sample'),
          eavesdropper_detected: z.boolean(),
          created_at: instant(),
        })
        .meta({ id: 'BondingKeySummary' }),
    ).describe('The newest key generation of the session; null before the first'),
  })
  .meta({ id: 'BondingSession', description: 'A bonding session snapshot' });

export const bondingKey = z.strictObject({
  session_id: sessionId,
  status: keyStatus,
  reason: z.string(),
  key_id: z.string().nullable().describe('QK- and 16 hex digits; null when aborted'),
  fingerprint: z.string().nullable().describe('First 16 bytes of SHA-256 of the hybrid key, hex; null when aborted'),
  bits: z.number().int().describe('Final key length asked for, bits'),
  raw_bits: z.number().int().min(0).describe('Qubits sent'),
  sifted_bits: z.number().int().min(0).describe('Bits left where the bases agreed'),
  sample_bits: z.number().int().min(0).describe('Sifted bits disclosed to estimate the error rate'),
  qber: probability('Quantum bit error rate measured on the sample'),
  qber_upper_bound: probability('Upper confidence bound of the QBER'),
  qber_threshold: probability('QBER above which the run aborts (0.11)'),
  errors_corrected: z.number().int().min(0),
  leaked_bits: z.number().int().min(0).describe('Bits disclosed by error correction'),
  secure_bits: z.number().int().describe('Bits left after privacy amplification'),
  final_bits: z.number().int().min(0).describe('Bits of the QKD key used; 0 when aborted'),
  residual_errors: z.number().int().min(0),
  eavesdropper_detected: z.boolean(),
  attempts: z.number().int().min(0),
  kem: z.literal('ML-KEM-768'),
  kdf: z.literal('HKDF-SHA256'),
  key: z.string().nullable().describe('The hybrid key in hex, only in demo mode (no API_KEYS); null otherwise and when aborted'),
  simulated: z.literal(true).describe('Always true: BB84 here is a software simulation, not quantum hardware'),
  created_at: instant(),
  elapsed_ms: ms('Generation time'),
});

export type BondingHealth = z.infer<typeof bondingHealth>;
export type BondingRecommendation = z.infer<typeof bondingRecommendation>;
export type BondingSession = z.infer<typeof bondingSession>;
export type BondingKey = z.infer<typeof bondingKey>;
