import DataLoader from 'dataloader';
import type { Clock } from '../../platform/clock.js';
import type { EventHub } from '../../platform/event-hub.js';
import { isOperator, type Principal } from '../../platform/principal.js';
import type { BondingStore, SessionEventPayload, SessionRecord } from './store.js';

/*
 * What a bonding resolver receives: the request's context, and the views some GraphQL types are resolved
 * from (their parents in schema-types.ts, generated from the SDL).
 */

export interface BondingContext {
  store: BondingStore;
  events: EventHub;
  clock: Clock;
  now: Date;
  /** No credential configured: the demo principal is every user, as the sandbox has always been. */
  demoMode: boolean;
  /** Who the request acts for: a session's user is the principal that started it. */
  principal: Principal;
  loaders: ReturnType<typeof createLoaders>;
}

/** A session is its user's; operators see every session (but distil no one else's keys). */
export const mayView = (principal: Principal, session: SessionRecord, demoMode: boolean) =>
  demoMode || isOperator(principal) || session.userId === principal.id;

/** Per-request loaders: a session the principal may not see loads as null, exactly as an unknown id. */
export function createLoaders(store: BondingStore, principal: Principal, demoMode: boolean) {
  return {
    session: new DataLoader<string, SessionRecord | null>(async (ids) => {
      const rows = new Map((await store.sessionsByIds(ids)).map((r) => [r.id, r]));
      return ids.map((id) => {
        const row = rows.get(id);
        return row && mayView(principal, row, demoMode) ? row : null;
      });
    }),
  };
}

/** A session event as delivered: its payload and its cursor. */
export interface EventView extends SessionEventPayload {
  cursor: string;
}
