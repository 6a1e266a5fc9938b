import DataLoader from 'dataloader';
import type { Clock } from '../../platform/clock.js';
import type { EventHub } from '../../platform/event-hub.js';
import type { Principal } from '../../platform/principal.js';
import type { SessionEventPayload, SessionRecord } from './records.js';
import type { BondingService } from './service.js';

/*
 * What a bonding resolver receives: the request's context, and the views some GraphQL types are resolved
 * from (their parents in schema-types.ts, generated from the SDL).
 */

export interface BondingContext {
  /** The bonding rules (subgraphs/bonding/service.ts): every read and change goes through it. */
  service: BondingService;
  events: EventHub;
  clock: Clock;
  now: Date;
  /** Who the request acts for: a session's user is the principal that started it. */
  principal: Principal;
  loaders: ReturnType<typeof createLoaders>;
}

/**
 * Per-request loaders: a session is its user's (in its tenant); operators, and demo mode's one principal,
 * see every session (but distil no one else's keys). One the principal may not see loads as null, exactly
 * as an unknown id.
 */
export function createLoaders(service: BondingService, principal: Principal) {
  return {
    session: new DataLoader<string, SessionRecord | null>(async (ids) => {
      const rows = new Map((await service.sessionsByIds(ids, principal)).map((r) => [r.id, r]));
      return ids.map((id) => rows.get(id) ?? null);
    }),
  };
}

/** A session event as delivered: its payload and its cursor. */
export interface EventView extends SessionEventPayload {
  cursor: string;
}
