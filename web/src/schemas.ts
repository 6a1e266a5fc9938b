import * as z from 'zod/mini';

/**
 * The shapes of the answers the dashboard reads (documents.ts), checked as they arrive: a field the page
 * relies on that is missing or of another type is an error shown in its panel, never an `undefined`
 * drawn on screen. Enum values are checked as strings, so a value added to the API later still renders.
 */

const coordinates = z.object({ latitude: z.number(), longitude: z.number() });
export type Coordinates = z.infer<typeof coordinates>;

const leg = z.object({
  depot: z.object({ id: z.string() }),
  status: z.string(),
  coordinates,
  departAt: z.string(),
  eta: z.string(),
});
export type Leg = z.infer<typeof leg>;

const delivery = z.object({
  id: z.string(),
  status: z.string(),
  customerName: z.string(),
  startTime: z.string(),
  machines: z.array(z.object({ id: z.string() })),
  location: z.object({ id: z.string() }),
  tracking: z.object({
    status: z.string(),
    coordinates,
    eta: z.string(),
    etaQ10: z.string(),
    etaQ90: z.string(),
    etaSource: z.string(),
    minutesRemaining: z.number(),
    distanceRemainingKm: z.number(),
    legs: z.array(leg),
  }),
});
export type Delivery = z.infer<typeof delivery>;

const fleetSummary = z.object({
  available: z.number(),
  reserved: z.number(),
  inUse: z.number(),
  total: z.number(),
  utilization: z.number(),
  surgeMultiplier: z.number(),
});
export type FleetSummary = z.infer<typeof fleetSummary>;

const place = z.object({ id: z.string(), name: z.string(), coordinates });
export type Place = z.infer<typeof place>;

export const rentalCursor = z.object({ eventCursor: z.string() });

export const rentalSnapshot = z.object({
  machines: z.array(z.object({ id: z.string(), name: z.string(), category: z.string(), status: z.string(), depot: z.object({ id: z.string() }) })),
  fleetSummary,
  depots: z.array(place),
  locations: z.array(place),
  bookings: z.object({ edges: z.array(z.object({ node: delivery })) }),
});
type RentalSnapshot = z.infer<typeof rentalSnapshot>;
export type Machine = RentalSnapshot['machines'][number];

export const bookingAnswer = z.object({ booking: z.nullable(delivery) });

export const machineEvent = z.object({
  machineStatusChanged: z.object({
    cursor: z.string(),
    machine: z.object({ id: z.string(), name: z.string() }),
    previousStatus: z.string(),
    status: z.string(),
    reason: z.string(),
    quoteId: z.nullable(z.string()),
    bookingId: z.nullable(z.string()),
    at: z.string(),
  }),
});
export type MachineEvent = z.infer<typeof machineEvent>['machineStatusChanged'];

export const fleetEvent = z.object({
  fleetSummaryChanged: z.object({ ...fleetSummary.shape, cursor: z.string(), at: z.string() }),
});
export type FleetEvent = z.infer<typeof fleetEvent>['fleetSummaryChanged'];

export const trackingEvent = z.object({
  trackingUpdated: z.object({
    cursor: z.string(),
    bookingId: z.string(),
    status: z.string(),
    coordinates,
    eta: z.string(),
    etaQ10: z.string(),
    etaQ90: z.string(),
    etaSource: z.string(),
    minutesRemaining: z.number(),
    distanceRemainingKm: z.number(),
    at: z.string(),
    booking: z.object({ tracking: z.object({ legs: z.array(leg) }) }),
  }),
});
export type TrackingEvent = z.infer<typeof trackingEvent>['trackingUpdated'];

const bondPath = z.object({
  id: z.string(),
  kind: z.string(),
  up: z.boolean(),
  latencyMs: z.number(),
  lossPct: z.number(),
  capacityMbps: z.number(),
  outageProbability: z.number(),
});
export type BondPath = z.infer<typeof bondPath>;

export const bondingCursor = z.object({ bondingEventCursor: z.string() });

const bondingSession = z.object({
  id: z.string(),
  userId: z.string(),
  state: z.string(),
  stateReason: z.string(),
  tick: z.number(),
  createdAt: z.string(),
  paths: z.array(bondPath),
  recommendation: z.object({
    feasible: z.boolean(),
    pair: z.nullable(z.object({ a: z.string(), b: z.string(), jointOutage: z.number() })),
    expectedGoodputMbps: z.number(),
  }),
  lastKey: z.nullable(z.object({ status: z.string(), bits: z.number(), qber: z.number(), eavesdropperDetected: z.boolean() })),
});
export type BondingSession = z.infer<typeof bondingSession>;

export const bondingSnapshot = z.object({
  bondingOverview: z.object({
    openSessions: z.number(),
    negotiating: z.number(),
    bonded: z.number(),
    degraded: z.number(),
    down: z.number(),
    keySource: z.string(),
    tickMs: z.number(),
  }),
  bondingSessions: z.array(bondingSession),
});
export type BondingSnapshot = z.infer<typeof bondingSnapshot>;

export const bondingEvent = z.object({
  bondingSessionUpdated: z.object({
    cursor: z.string(),
    sessionId: z.string(),
    kind: z.string(),
    state: z.string(),
    previousState: z.nullable(z.string()),
    tick: z.number(),
    reason: z.string(),
    at: z.string(),
    paths: z.array(bondPath),
  }),
});
export type BondingEvent = z.infer<typeof bondingEvent>['bondingSessionUpdated'];

export const optimizationCursor = z.object({ optimizationEventCursor: z.nullable(z.string()) });

const run = z.object({
  id: z.string(),
  status: z.string(),
  problem: z.string(),
  size: z.number(),
  qubits: z.number(),
  depth: z.number(),
  createdAt: z.string(),
  durationMs: z.nullable(z.number()),
  result: z.nullable(z.object({ optimalityRatio: z.number(), refined: z.object({ ratio: z.number() }), baseline: z.object({ ratio: z.number() }) })),
});
export type Run = z.infer<typeof run>;

// The optimization root fields are nullable: null while the subgraph cannot answer.
export const optimizationSnapshot = z.object({
  optimizationStatus: z.nullable(
    z.object({
      backend: z.object({ name: z.string(), maxQubits: z.number() }),
      runs: z.object({ total: z.number(), running: z.number(), completed: z.number(), failed: z.number() }),
      fleet: z.object({ vessels: z.number(), tick: z.number(), tickIntervalMs: z.number() }),
    }),
  ),
  quantumRuns: z.nullable(z.object({ totalCount: z.number(), edges: z.array(z.object({ node: run })) })),
});
export type OptimizationSnapshot = z.infer<typeof optimizationSnapshot>;

const vessel = z.object({ mmsi: z.string(), name: z.string(), type: z.string(), position: coordinates, speedOverGround: z.number() });
export type Vessel = z.infer<typeof vessel>;

const speedZone = z.object({ id: z.string(), name: z.string(), center: coordinates, radiusMeters: z.number(), limitKnots: z.number() });
export type SpeedZone = z.infer<typeof speedZone>;

export const vesselFleet = z.object({
  vesselFleet: z.nullable(z.object({ tick: z.number(), vessels: z.array(vessel), speedZones: z.array(speedZone) })),
});

export const runEvent = z.object({
  quantumRunCompleted: z.object({ cursor: z.string(), status: z.string(), at: z.string(), run }),
});

export const vesselEvent = z.object({
  vesselPositionsChanged: z.object({ cursor: z.string(), tick: z.number(), at: z.string(), vessels: z.array(vessel) }),
});
export type VesselEvent = z.infer<typeof vesselEvent>['vesselPositionsChanged'];

export const featuresSnapshot = z.object({
  featureStoreHealth: z.object({
    ok: z.boolean(),
    uptimeSeconds: z.number(),
    seed: z.number(),
    policies: z.number(),
    claims: z.nullable(z.number()),
    onlineStore: z.string(),
    checks: z.array(z.object({ name: z.string(), ok: z.boolean(), detail: z.string(), milliseconds: z.number() })),
  }),
  materializations: z.array(z.object({ id: z.string(), asOf: z.string(), rowsWritten: z.number(), onlineStore: z.string(), materializedAt: z.string() })),
});
export type FeaturesSnapshot = z.infer<typeof featuresSnapshot>;

export const viewerAnswer = z.object({
  viewer: z.object({ id: z.string(), tenant: z.string(), scopes: z.array(z.string()), operator: z.boolean() }),
});
export type Viewer = z.infer<typeof viewerAnswer>['viewer'];
