/**
 * Every GraphQL document the dashboard sends, all over the one graphql-ws connection. Each stays inside the
 * gateway's request limits (depth 10, cost 5000, 200 fields; test/gateway/dashboard/dashboard.test.ts checks them with the
 * gateway's own limiter). A stream's resume cursor is its `$after` variable.
 */

/** The newest rental event cursor, read before the snapshot so that the streams opened after it miss nothing. */
export const RENTAL_CURSOR = /* GraphQL */ `
  query DashboardRentalCursor {
    eventCursor
  }
`;

const DELIVERY_LEG = /* GraphQL */ `
  fragment DashboardLeg on DeliveryLeg {
    depot {
      id
    }
    status
    coordinates {
      latitude
      longitude
    }
    departAt
    eta
  }
`;

const DELIVERY_BOOKING = /* GraphQL */ `
  fragment DashboardDelivery on Booking {
    id
    status
    customerName
    startTime
    machines {
      id
    }
    location {
      id
    }
    tracking {
      status
      coordinates {
        latitude
        longitude
      }
      eta
      etaQ10
      etaQ90
      etaSource
      minutesRemaining
      distanceRemainingKm
      legs {
        ...DashboardLeg
      }
    }
  }
  ${DELIVERY_LEG}
`;

/** Who the page acts for: which panels its credential may fill. */
export const VIEWER = /* GraphQL */ `
  query DashboardViewer {
    viewer {
      id
      tenant
      scopes
      operator
    }
  }
`;

/** The rental snapshot: machines, fleet summary, the map's depots and sites, and the newest bookings with their deliveries. */
export const RENTAL_SNAPSHOT = /* GraphQL */ `
  query DashboardRental {
    machines {
      id
      name
      category
      status
      depot {
        id
      }
    }
    fleetSummary {
      available
      reserved
      inUse
      total
      utilization
      surgeMultiplier
    }
    depots {
      id
      name
      coordinates {
        latitude
        longitude
      }
    }
    locations {
      id
      name
      coordinates {
        latitude
        longitude
      }
    }
    bookings(first: 20) {
      edges {
        node {
          ...DashboardDelivery
        }
      }
    }
  }
  ${DELIVERY_BOOKING}
`;

/** One booking's delivery, when a confirmation announces it. */
export const BOOKING = /* GraphQL */ `
  query DashboardBooking($id: ID!) {
    booking(id: $id) {
      ...DashboardDelivery
    }
  }
  ${DELIVERY_BOOKING}
`;

export const MACHINE_EVENTS = /* GraphQL */ `
  subscription DashboardMachines($after: ID) {
    machineStatusChanged(after: $after) {
      cursor
      machine {
        id
        name
      }
      previousStatus
      status
      reason
      quoteId
      bookingId
      at
    }
  }
`;

export const FLEET_EVENTS = /* GraphQL */ `
  subscription DashboardFleet($after: ID) {
    fleetSummaryChanged(after: $after) {
      cursor
      available
      reserved
      inUse
      total
      utilization
      surgeMultiplier
      at
    }
  }
`;

export const TRACKING_EVENTS = /* GraphQL */ `
  subscription DashboardTracking($bookingId: ID!, $after: ID) {
    trackingUpdated(bookingId: $bookingId, after: $after) {
      cursor
      bookingId
      status
      coordinates {
        latitude
        longitude
      }
      eta
      etaQ10
      etaQ90
      etaSource
      minutesRemaining
      distanceRemainingKm
      at
      booking {
        tracking {
          legs {
            ...DashboardLeg
          }
        }
      }
    }
  }
  ${DELIVERY_LEG}
`;

const BOND_PATH = /* GraphQL */ `
  fragment DashboardBondPath on BondPath {
    id
    kind
    up
    latencyMs
    lossPct
    capacityMbps
    outageProbability
  }
`;

export const BONDING_CURSOR = /* GraphQL */ `
  query DashboardBondingCursor {
    bondingEventCursor
  }
`;

export const BONDING_SNAPSHOT = /* GraphQL */ `
  query DashboardBonding {
    bondingOverview {
      openSessions
      negotiating
      bonded
      degraded
      down
      keySource
      tickMs
    }
    bondingSessions(first: 6) {
      id
      userId
      state
      stateReason
      tick
      createdAt
      paths {
        ...DashboardBondPath
      }
      recommendation {
        feasible
        pair {
          a
          b
          jointOutage
        }
        expectedGoodputMbps
      }
      lastKey {
        status
        bits
        qber
        eavesdropperDetected
      }
    }
  }
  ${BOND_PATH}
`;

export const BONDING_EVENTS = /* GraphQL */ `
  subscription DashboardBondingSession($sessionId: ID!, $after: ID) {
    bondingSessionUpdated(sessionId: $sessionId, after: $after) {
      cursor
      sessionId
      kind
      state
      previousState
      tick
      reason
      at
      paths {
        ...DashboardBondPath
      }
    }
  }
  ${BOND_PATH}
`;

export const OPTIMIZATION_CURSOR = /* GraphQL */ `
  query DashboardOptimizationCursor {
    optimizationEventCursor
  }
`;

const RUN = /* GraphQL */ `
  fragment DashboardRun on QuantumRun {
    id
    status
    problem
    size
    qubits
    depth
    createdAt
    durationMs
    result {
      optimalityRatio
      refined {
        ratio
      }
      baseline {
        ratio
      }
    }
  }
`;

export const OPTIMIZATION_SNAPSHOT = /* GraphQL */ `
  query DashboardOptimization {
    optimizationStatus {
      backend {
        name
        maxQubits
      }
      runs {
        total
        running
        completed
        failed
      }
      fleet {
        vessels
        tick
        tickIntervalMs
      }
    }
    quantumRuns(first: 5) {
      totalCount
      edges {
        node {
          ...DashboardRun
        }
      }
    }
  }
  ${RUN}
`;

export const VESSEL_FLEET = /* GraphQL */ `
  query DashboardVessels {
    vesselFleet {
      tick
      vessels {
        mmsi
        name
        type
        position {
          latitude
          longitude
        }
        speedOverGround
      }
      speedZones {
        id
        name
        center {
          latitude
          longitude
        }
        radiusMeters
        limitKnots
      }
    }
  }
`;

export const RUN_EVENTS = /* GraphQL */ `
  subscription DashboardRuns($after: ID) {
    quantumRunCompleted(after: $after) {
      cursor
      status
      at
      run {
        ...DashboardRun
      }
    }
  }
  ${RUN}
`;

export const VESSEL_EVENTS = /* GraphQL */ `
  subscription DashboardVesselPositions($after: ID) {
    vesselPositionsChanged(after: $after) {
      cursor
      tick
      at
      vessels {
        mmsi
        name
        type
        position {
          latitude
          longitude
        }
        speedOverGround
      }
    }
  }
`;

export const FEATURES_SNAPSHOT = /* GraphQL */ `
  query DashboardFeatures {
    featureStoreHealth {
      ok
      uptimeSeconds
      seed
      policies
      claims
      onlineStore
      checks {
        name
        ok
        detail
        milliseconds
      }
    }
    materializations(first: 3) {
      id
      asOf
      rowsWritten
      onlineStore
      materializedAt
    }
  }
`;

/** Every document, by name: the test runs each through the gateway's request limits. */
export const DOCUMENTS = {
  VIEWER,
  RENTAL_CURSOR,
  RENTAL_SNAPSHOT,
  BOOKING,
  MACHINE_EVENTS,
  FLEET_EVENTS,
  TRACKING_EVENTS,
  BONDING_CURSOR,
  BONDING_SNAPSHOT,
  BONDING_EVENTS,
  OPTIMIZATION_CURSOR,
  OPTIMIZATION_SNAPSHOT,
  VESSEL_FLEET,
  RUN_EVENTS,
  VESSEL_EVENTS,
  FEATURES_SNAPSHOT,
} as const;
