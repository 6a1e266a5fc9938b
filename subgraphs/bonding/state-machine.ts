import { recommend } from './recommend.js';
import { KIND_PROFILES, unavailability, type LinkChange, type PathState } from './link-model.js';

/**
 * The session state machine. A session starts NEGOTIATING (its paths are being probed); every link-model
 * step sets the state from the number of paths up: two or more BONDED (a redundant pair exists), one
 * DEGRADED (traffic flows, no redundancy), none DOWN. CLOSED (on request, or after
 * BONDING_SESSION_TTL_SECONDS without activity) is terminal: the link model stops.
 *
 *   negotiating -> bonded | degraded | down | closed
 *   bonded      -> degraded | down | closed
 *   degraded    -> bonded | down | closed
 *   down        -> bonded | degraded | closed
 *   closed      -> (none)
 */
export type SessionState = 'negotiating' | 'bonded' | 'degraded' | 'down' | 'closed';

export const TRANSITIONS: Readonly<Record<SessionState, readonly SessionState[]>> = {
  negotiating: ['bonded', 'degraded', 'down', 'closed'],
  bonded: ['degraded', 'down', 'closed'],
  degraded: ['bonded', 'down', 'closed'],
  down: ['bonded', 'degraded', 'closed'],
  closed: [],
};

type Health = 'ok' | 'degraded' | 'critical';

export interface PlaneRecord {
  health: Health;
  lastAction: string;
  lastActionAt: string;
}

export interface Planes {
  data: PlaneRecord;
  control: PlaneRecord;
  security: PlaneRecord;
  intelligence: PlaneRecord;
}

export function initialPlanes(pathCount: number, at: string): Planes {
  return {
    data: { health: 'degraded', lastAction: 'no traffic yet: paths are being probed', lastActionAt: at },
    control: { health: 'ok', lastAction: `negotiating ${pathCount} paths`, lastActionAt: at },
    security: { health: 'degraded', lastAction: 'no session key yet', lastActionAt: at },
    intelligence: { health: 'degraded', lastAction: 'waiting for the first probe', lastActionAt: at },
  };
}

/** The state the paths call for, and why. */
function stateFor(paths: readonly PathState[], pair: { a: string; b: string } | null): { state: SessionState; reason: string } {
  const up = paths.filter((p) => p.up);
  if (up.length >= 2) {
    const via = pair ? `; redundant pair ${pair.a} + ${pair.b}` : '';
    return { state: 'bonded', reason: `${up.length} of ${paths.length} paths up${via}` };
  }
  if (up.length === 1) return { state: 'degraded', reason: `only ${up[0]!.id} is up: no redundancy` };
  return { state: 'down', reason: `all ${paths.length} paths are down` };
}

/** Outage probability of a path's own faults under the link model (its kind's long-run unavailability). */
export const ownOutageOf = (p: { kind: PathState['kind'] }) => unavailability(KIND_PROFILES[p.kind]);

export interface StepOutcome {
  state: SessionState;
  reason: string;
  planes: Planes;
  changed: boolean;
}

const pct = (x: number) => `${Math.round(x * 100)}%`;

/** After a link-model step: the new state, and what each plane did. */
export function afterStep(
  previous: { state: SessionState; planes: Planes },
  paths: readonly PathState[],
  changes: readonly LinkChange[],
  at: string,
): StepOutcome {
  const rec = recommend(
    paths.map((p) => ({ ...p, ownOutage: ownOutageOf(p) })),
    {},
  );
  const { state, reason } = stateFor(paths, rec.pair);
  const planes: Planes = { ...previous.planes };
  const pathChanges = changes.filter((c) => c.pathId !== null);
  const moved = state !== previous.state;
  if (moved || pathChanges.length > 0 || previous.state === 'negotiating') {
    const what = pathChanges.map((c) => `${c.pathId} ${c.change} (${c.cause})`).join(', ');
    const action = moved ? `${previous.state} -> ${state}${what ? `: ${what}` : `: ${reason}`}` : what || reason;
    planes.control = { health: 'ok', lastAction: action, lastActionAt: at };
    const weights = rec.weights.map((w) => `${w.pathId} ${pct(w.weight)}`).join(', ');
    planes.data = {
      health: state === 'bonded' ? 'ok' : state === 'degraded' ? 'degraded' : 'critical',
      lastAction: rec.weights.length > 0 ? `split traffic over ${rec.weights.length} paths: ${weights}` : 'no path up: traffic stopped',
      lastActionAt: at,
    };
  }
  const pairText = rec.pair
    ? `recommended ${rec.pair.a} + ${rec.pair.b} (joint outage ${rec.pair.jointOutage.toExponential(2)})`
    : 'no redundant pair available';
  if (pairText !== previous.planes.intelligence.lastAction) {
    planes.intelligence = { health: rec.pair ? 'ok' : 'degraded', lastAction: pairText, lastActionAt: at };
  }
  return { state, reason, planes, changed: moved };
}
