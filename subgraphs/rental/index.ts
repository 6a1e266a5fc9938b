import { fileURLToPath } from 'node:url';
import { buildSubgraphSchema } from '@apollo/subgraph';
import { parse } from 'graphql';
import type { SubgraphModule } from '../../platform/subgraph.js';
import { readSubgraphSdl } from '../../platform/subgraph.js';
import { createLoaders, type RentalContext } from './context.js';
import { resolverMap } from './resolvers.js';
import { rentalRoutes } from './rest.js';
import { createQuoteSigner } from './signing.js';
import { RentalStore } from './store.js';
import { predictionForecaster } from './travel.js';
import { periodic } from '../../platform/periodic.js';

export const rental: SubgraphModule = {
  name: 'rental',
  restPrefix: '/rental',
  routes: rentalRoutes,
  migrations: [{ owner: 'rental', dir: fileURLToPath(new URL('./migrations/', import.meta.url)) }],
  peers: ['prediction'],
  async start({ db, config, clock, events, peers }) {
    const signer = await createQuoteSigner(db, config.QUOTE_SIGNING_KEY);
    const store = await RentalStore.open(db, signer, {
      quoteTtlSeconds: config.QUOTE_TTL_SECONDS,
      trackingTickMs: config.TRACKING_TICK_MS,
      onEvents: () => void events.wake(),
      // Truck runs are forecast by the prediction subgraph's travel model, the one that answers
      // Booking.deliveryForecast; the 45 km/h rule only while it cannot answer.
      forecast: predictionForecaster(peers),
    });
    const schema = buildSubgraphSchema({ typeDefs: parse(readSubgraphSdl('rental')), resolvers: resolverMap });

    // The sweeper releases machines of expired quotes even when nobody asks; the tracker publishes
    // delivery progress. Both are safe to run on every instance (conditional updates).
    const sweeper = periodic(() => store.releaseExpired(clock.now()), config.QUOTE_SWEEP_INTERVAL_MS);
    const tracker = periodic(() => store.publishTracking(clock.now()), Math.min(config.TRACKING_TICK_MS, 1000));

    return {
      schema,
      context(request): RentalContext {
        return {
          store,
          signer,
          events,
          clock,
          now: clock.now(),
          idempotencyKey: request.headers['idempotency-key'],
          principal: request.principal,
          loaders: createLoaders(store, request.principal),
        };
      },
      async ready() {
        try {
          await db.query('SELECT 1 FROM rental_machines LIMIT 1');
          return true;
        } catch {
          return false;
        }
      },
      async close() {
        await Promise.all([sweeper.stop(), tracker.stop()]);
      },
    };
  },
};
