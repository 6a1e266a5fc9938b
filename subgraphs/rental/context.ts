import DataLoader from 'dataloader';
import type { Clock } from '../../platform/clock.js';
import type { EventHub } from '../../platform/event-hub.js';
import { viewerOf, type Viewer } from '../../platform/ownership.js';
import type { Principal } from '../../platform/principal.js';
import type { BookingRecord, MachineStatusEvent } from './records.js';
import type { RentalService } from './service.js';
import type { TrackingEventPayload, TrackingState } from './tracking.js';

/*
 * What a rental resolver receives: the request's context, and the views some GraphQL types are resolved
 * from (their parents in schema-types.ts, generated from the SDL).
 */

export interface RentalContext {
  /** The rental rules (subgraphs/rental/service.ts): every read and change goes through it. */
  service: RentalService;
  events: EventHub;
  clock: Clock;
  /**
   * One instant per request, so every field of an answer agrees on expiry and tracking. A subscription
   * renews it, and the loaders, for each event it delivers.
   */
  now: Date;
  /** The raw Idempotency-Key header, validated where it is used. */
  idempotencyKey: string | undefined;
  /** Who the request acts for; its tenant's quotes and bookings are all it sees (every tenant's for an operator). */
  principal: Principal;
  /**
   * Whose rows the request may see (`viewerOf(principal)`, made with the context): what the reads of owned
   * rows take, which depend on its tenant (or its being an operator), not on which principal of it asks.
   */
  viewer: Viewer;
  loaders: ReturnType<typeof createLoaders>;
}

/**
 * Per-request loaders. Quotes and bookings of another tenant load as null, exactly as an unknown id, so
 * every path that reaches one (a root field, an entity reference, a subscription) answers as for nothing.
 */
export function createLoaders(service: RentalService, principal: Principal) {
  const viewer = viewerOf(principal);
  const byId = <T extends { id: string }>(fetch: (ids: readonly string[]) => Promise<T[]>, keep: (row: T | undefined) => T | null = (r) => r ?? null) =>
    new DataLoader<string, T | null>(async (ids) => {
      const rows = new Map((await fetch(ids)).map((r) => [r.id, r]));
      return ids.map((id) => keep(rows.get(id)));
    });
  return {
    machine: byId((ids) => service.machinesByIds(ids)),
    quote: byId((ids) => service.quotesByIds(ids, viewer)),
    booking: byId((ids) => service.bookingsByIds(ids, viewer)),
    bookingByQuote: new DataLoader<string, BookingRecord | null>(async (quoteIds) => {
      const rows = new Map((await service.bookingsByQuoteIds(quoteIds, viewer)).map((b) => [b.quoteId, b]));
      return quoteIds.map((id) => rows.get(id) ?? null);
    }),
  };
}

/** A ledger page: its edges and page info, and who reads it (its totalCount is read only when asked for). */
export interface BookingPageView {
  edges: { cursor: string; node: BookingRecord }[];
  pageInfo: { hasNextPage: boolean; endCursor: string | null };
  viewer: Viewer;
}

/** A booking's tracking as of the request's instant. */
export interface TrackingView {
  booking: BookingRecord;
  state: TrackingState;
  computedAt: Date;
}

/** A machine status event as delivered: its payload and its cursor. */
export interface MachineStatusView extends MachineStatusEvent {
  cursor: string;
}

/** A tracking event as delivered: its payload and its cursor. */
export type TrackingEventView = TrackingEventPayload & { cursor: string };
