import { fileURLToPath } from 'node:url';
import { createdId, defineSubgraph, type OwnedType } from '../../platform/subgraph.js';
import { createLoaders, type RentalContext } from './context.js';
import { rentalResolvers } from './resolvers.js';
import { rentalConfig } from './config.js';
import { rentalRoutes } from './rest.js';
import { createQuoteSigner } from './signing.js';
import { RentalService } from './service.js';
import { STATE_TYPES, TOPICS } from './records.js';
import { RentalStore } from './store.js';
import { predictionForecaster } from './travel.js';
import { periodic } from '../../platform/periodic.js';
import { viewerOf } from '../../platform/ownership.js';

export const rental = defineSubgraph({
  name: 'rental',
  config: rentalConfig,
  readiness: 'rental_machines',
  resolvers: rentalResolvers,
  restPrefix: '/rental',
  routes: rentalRoutes,
  migrations: [{ owner: 'rental', dir: fileURLToPath(new URL('./migrations/', import.meta.url)) }],
  peers: ['prediction'],
  shared: ['Machine'],
  // A delivery in transit publishes its position every few seconds: after an hour only the newest per
  // booking is kept (its status changes, which carry their own positions, are kept whole).
  retention: [{ topic: TOPICS.tracking, compact: { afterS: 3600, where: `o.payload->>'status' = 'in_transit'` } }],
  // Its state (platform/state-trace.ts): the fleet is everyone's, quotes and bookings their tenant's. Every
  // write to one appends events tagged with what it changed (subgraphs/rental/store.ts). The ledger's counts
  // are the bookings' (`Booking`): the bookings' triggers write them, unseen by the state check, and the
  // booking events carry the owner's tag (`Booking@tenant`) a count read depends on. Depots and sites are
  // fixed by migrations; a signing key is stored at start with its event (signing.ts).
  state: {
    rental_machines: { type: STATE_TYPES.machine, grain: 'everyone' },
    rental_quotes: { type: STATE_TYPES.quote, grain: 'tenant' },
    rental_bookings: { type: STATE_TYPES.booking, grain: 'tenant' },
    rental_booking_counts: { type: STATE_TYPES.booking, grain: 'tenant' },
    rental_depots: { type: STATE_TYPES.depot, grain: 'everyone' },
    rental_locations: { type: STATE_TYPES.location, grain: 'everyone' },
    rental_signing_keys: { type: STATE_TYPES.signingKey, grain: 'everyone' },
  },
  owned: [
    {
      type: 'Quote',
      table: 'rental_quotes',
      owner: { tenant: 'tenant', principal: 'principal' },
      grain: 'tenant',
      idArguments: ['quoteId'],
      unknownId: '00000000-0000-4000-8000-000000000000',
      inputs: { customerName: 'Matrix BV', customer_name: 'Matrix BV' },
      make: (run) => makeQuote(run),
    },
    {
      type: 'Booking',
      table: 'rental_bookings',
      owner: { tenant: 'tenant', principal: 'principal' },
      grain: 'tenant',
      idArguments: ['bookingId'],
      unknownId: 'BK-000000000000',
      make: async (run) => {
        const quoteId = await makeQuote(run);
        const booked = await run('mutation($i: ConfirmBookingInput!) { confirmBooking(input: $i) { id } }', { i: { quoteId, customerName: 'Matrix BV' } });
        return createdId(booked, 'confirmBooking');
      },
    },
  ],
  async start({ db, config, clock, events, peers }) {
    const signer = await createQuoteSigner(db, config.QUOTE_SIGNING_KEY);
    const store = await RentalStore.open(db, { onEvents: () => void events.wake() });
    const service = new RentalService(store, signer, {
      quoteTtlSeconds: config.QUOTE_TTL_SECONDS,
      trackingTickMs: config.TRACKING_TICK_MS,
      // Truck runs are forecast by the prediction subgraph's travel model, the one that answers
      // Booking.deliveryForecast; the 45 km/h rule only while it cannot answer.
      forecast: predictionForecaster(peers),
    });

    // The sweeper releases machines of expired quotes even when nobody asks; the tracker publishes
    // delivery progress. Both are safe to run on every instance (conditional updates).
    const sweeper = periodic(() => service.releaseExpired(clock.now()), config.QUOTE_SWEEP_INTERVAL_MS);
    const tracker = periodic(() => service.publishTracking(clock.now()), Math.min(config.TRACKING_TICK_MS, 1000));

    return {
      context(request): RentalContext {
        return {
          service,
          events,
          clock,
          now: clock.now(),
          idempotencyKey: request.headers['idempotency-key'],
          principal: request.principal,
          viewer: viewerOf(request.principal),
          loaders: createLoaders(service, request.principal),
        };
      },
      async close() {
        await Promise.all([sweeper.stop(), tracker.stop()]);
      },
    };
  },
});

/** A quote for the first available machine, two days ahead (a start every depot can reach). */
async function makeQuote(run: Parameters<OwnedType['make']>[0]): Promise<string> {
  const fleet = await run('{ machines { id status } }');
  const free = (fleet['machines'] as { id: string; status: string }[]).find((m) => m.status === 'AVAILABLE');
  if (!free) throw new Error('no available machine to quote');
  const startTime = new Date(Date.now() + 48 * 3_600_000).toISOString();
  const quote = await run('mutation($i: CreateQuoteInput!) { createQuote(input: $i) { id } }', {
    i: { machineIds: [free.id], locationId: 'LOC-001', startTime, durationHours: 2 },
  });
  return createdId(quote, 'createQuote');
}
