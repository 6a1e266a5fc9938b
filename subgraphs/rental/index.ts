import { fileURLToPath } from 'node:url';
import { buildSubgraphSchema } from '@apollo/subgraph';
import { parse } from 'graphql';
import type { SubgraphModule } from '../../platform/subgraph.js';
import { readSubgraphSdl } from '../../platform/subgraph.js';
import { createLoaders, resolverMap, type RentalContext } from './resolvers.js';
import { rentalRoutes } from './rest.js';
import { createQuoteSigner } from './signing.js';
import { RentalStore } from './store.js';

export const rental: SubgraphModule = {
  name: 'rental',
  restPrefix: '/rental',
  migrations: [{ owner: 'rental', dir: fileURLToPath(new URL('./migrations/', import.meta.url)) }],
  async start({ db, config, clock }) {
    const signer = await createQuoteSigner(db, config.QUOTE_SIGNING_KEY);
    const store = new RentalStore(db, signer, config.QUOTE_TTL_SECONDS);
    const schema = buildSubgraphSchema({ typeDefs: parse(readSubgraphSdl('rental')), resolvers: resolverMap });

    // The sweeper releases machines of expired quotes even when nobody asks.
    let sweeping = false;
    const sweeper = setInterval(() => {
      if (sweeping) return;
      sweeping = true;
      store
        .releaseExpired(clock.now())
        .catch(() => undefined)
        .finally(() => {
          sweeping = false;
        });
    }, config.QUOTE_SWEEP_INTERVAL_MS);
    sweeper.unref();

    return {
      schema,
      routes: rentalRoutes,
      context(request): RentalContext {
        return {
          store,
          signer,
          now: clock.now(),
          idempotencyKey: request.headers['idempotency-key'],
          loaders: createLoaders(store),
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
        clearInterval(sweeper);
        while (sweeping) await new Promise((r) => setTimeout(r, 5));
      },
    };
  },
};
