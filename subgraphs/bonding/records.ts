import type { LinkModelState, PathState } from './link-model.js';
import type { Planes, SessionState } from './state-machine.js';

/*
 * The bonding subgraph's records: what its store reads and writes, its service returns and its resolvers
 * shape, and the events its subscription delivers.
 */

/** The outbox topics the bonding subgraph writes (subgraphs/bonding/store.ts) and its subscription reads. */
export const TOPICS = {
  /** key: session id */
  session: 'bonding.session',
} as const;

/**
 * The types the state tables' rows are (platform/state-trace.ts; index.ts declares the tables): sessions
 * and their key generations, both their user's.
 */
export const STATE_TYPES = { session: 'BondingSession', key: 'BondingKey' } as const;

export type SessionEventKind = 'started' | 'state' | 'metrics' | 'key' | 'closed';

export interface SessionEventPayload {
  sessionId: string;
  kind: SessionEventKind;
  state: SessionState;
  previousState: SessionState | null;
  tick: number;
  reason: string;
  paths: PathState[];
  at: string;
  /** The instance that ran the step (metrics and state events); not part of the API. */
  runner?: string;
}

export interface KeySummary {
  keyId: string | null;
  status: 'completed' | 'aborted';
  fingerprint: string | null;
  bits: number;
  qber: number;
  eavesdropperDetected: boolean;
  createdAt: string;
}

export interface SessionRecord {
  id: string;
  /** The tenant of the session's user. */
  tenant: string;
  /** The principal (in that tenant) that started it, or `sandbox` for an operator's own. */
  userId: string;
  state: SessionState;
  stateReason: string;
  seed: number;
  tick: number;
  model: LinkModelState;
  planes: Planes;
  lastKey: KeySummary | null;
  createdAt: Date;
  updatedAt: Date;
  closedAt: Date | null;
}

/** Open sessions by state. */
export interface Overview {
  openSessions: number;
  negotiating: number;
  bonded: number;
  degraded: number;
  down: number;
}
