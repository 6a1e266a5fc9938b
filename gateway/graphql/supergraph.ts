import { readFileSync, unwatchFile, watchFile } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Clock } from '../../platform/clock.js';
import { sectionOf } from '../../platform/config.js';
import { readCheckedInSupergraph } from '../../schema/supergraph-file.js';
import { sourcesConfig, type SourcesConfig } from '../sources/config.js';
import { createFederatedGateway, type FederatedGateway } from '../sources/federated-gateway.js';
import { securityConfig, type SecurityConfig } from '../security/config.js';
import { requestLimitsOf } from '../security/limits.js';
import { subscriptionsConfig, type SubscriptionsConfig } from '../subscriptions/config.js';
import type { SubscriptionExecutor } from '../subscriptions/executor.js';
import { federatedSubscriptions } from '../subscriptions/federated.js';
import { graphqlConfig, type GraphQLConfig } from './config.js';
import { ServedSupergraph, type ReloadResult } from './served-supergraph.js';

export interface SupergraphOptions {
  config: GraphQLConfig & SourcesConfig & SubscriptionsConfig & SecurityConfig;
  /** The subgraphs' clock (the state cache reads their answers' bounds by it). */
  clock: Clock;
}

/**
 * The `supergraph` part: the supergraph served (SUPERGRAPH_FILE, or the one checked in) and what is made
 * from it, swapped whole by a reload (gateway/graphql/served-supergraph.ts): `app.supergraph`, the query
 * planner and its data sources (`app.federation`), federated subscriptions (`app.subscriptions`). The file
 * is served anew when it changes (looked at every SUPERGRAPH_POLL_MS, by its size and time).
 */
export const supergraphPlugin = fp(
  async (app: FastifyInstance, options: SupergraphOptions) => {
    const config = { ...sectionOf(graphqlConfig, options.config, 'supergraph'), ...sectionOf(sourcesConfig, options.config, 'supergraph') };
    const limits = requestLimitsOf(sectionOf(securityConfig, options.config, 'supergraph'));
    const supergraph = ServedSupergraph.initial(readSupergraph(config.SUPERGRAPH_FILE), limits);
    const { modules, remoteUrls, local, signer, trust, log: eventLog } = app.subgraphs;
    const parts = { supergraphSdl: supergraph.plannerSdl, remoteUrls, local, signer, trust, metrics: app.metrics, log: app.log };
    // An entry's life is capped by the `@cacheControl` hints of the supergraph served when it is stored.
    const cacheCap = (query: string) => supergraph.cachePolicies.capOf(query);
    const federation = createFederatedGateway({ ...parts, config, modules, eventLog, cacheCap, clock: options.clock });
    app.addHook('onClose', () => federation.close());
    const { subscriptions, close } = federatedSubscriptions({
      ...parts,
      config: sectionOf(subscriptionsConfig, options.config, 'supergraph'),
      dataSources: () => federation.dataSources,
    });
    app.addHook('onClose', close);
    supergraph.attach(federation, subscriptions);
    app.decorate('supergraph', supergraph);
    app.decorate('federation', federation);
    app.decorate('subscriptions', subscriptions);
    app.decorate('reloadSupergraph', () => reload(supergraph, config.SUPERGRAPH_FILE));
    app.warmUp.add('subscription planner', () => subscriptions.warm());
    if (config.SUPERGRAPH_FILE) watch(app, supergraph, config.SUPERGRAPH_FILE, config.SUPERGRAPH_POLL_MS);
  },
  { name: 'supergraph', fastify: '5.x', dependencies: ['metrics', 'warm-up', 'subgraphs'] },
);

/** The supergraph to serve: SUPERGRAPH_FILE when set, else the one checked in with the code. */
function readSupergraph(file: string | undefined): string {
  return file ? readFileSync(file, 'utf8') : readCheckedInSupergraph();
}

/** Reads the supergraph again and serves it, built and checked whole first; on a failure the one served stays. */
function reload(supergraph: ServedSupergraph, file: string | undefined): ReloadResult {
  let sdl: string;
  try {
    sdl = readSupergraph(file);
  } catch (error) {
    return { ok: false, error: error instanceof Error ? error.message : String(error) };
  }
  return supergraph.reload(sdl);
}

/** Serves `file` anew whenever it changes, from the moment every part is ready until the app closes. */
function watch(app: FastifyInstance, supergraph: ServedSupergraph, file: string, intervalMs: number): void {
  const changed = () => {
    const result = reload(supergraph, file);
    if (!result.ok) app.log.error(`supergraph not reloaded from ${file}, the previous one is still served: ${result.error}`);
    else if (!result.unchanged)
      app.log.info(`supergraph ${result.hash} served from ${file}; ${result.subscriptionsEnded} subscriptions it no longer allows ended`);
  };
  app.addHook('onReady', async () => {
    watchFile(file, { interval: intervalMs, persistent: false }, changed);
  });
  // Before the app drains: a change that comes while it closes serves nothing.
  app.addHook('preClose', async () => {
    unwatchFile(file, changed);
  });
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The supergraph served now, and what a reload swaps with it. */
    supergraph: ServedSupergraph;
    /** The query planner and its data sources, made from the supergraph. */
    federation: FederatedGateway;
    /** Federated subscriptions: shared upstream streams, made from the supergraph. */
    subscriptions: SubscriptionExecutor;
    /**
     * Reads SUPERGRAPH_FILE (or the checked-in supergraph) again and serves it (`SIGHUP`, or the file
     * changing): built and checked whole first; on a failure the supergraph served before stays.
     */
    reloadSupergraph(): ReloadResult;
  }
}
