// Production mode is settled first (graphql-js reads NODE_ENV as it loads). What loads before main() runs
// is only what reads the configuration and opens the database: the embedded database opens on its own
// thread (platform/pglite-thread.ts) while everything else loads.
import './http/production-mode.js';
import { subgraphNames } from '../schema/subgraphs.js';
import { openRuntimeDatabase } from '../platform/db.js';
import { assertPortFree } from './http/port.js';
import { configOrExit } from './config.js';
import { closeOnSignal, exitOnStartFailure, productionModeUnlessSet } from './http/process.js';

/** `npm start`: the supergraph, configured from the environment (every subgraph in process by default). */
async function main(): Promise<void> {
  const config = configOrExit();
  // Checked before the server's modules (Apollo, the subgraphs, their models) are even loaded.
  await assertPortFree(config.HOST, config.PORT);
  // Before anything loads graphql-js.
  productionModeUnlessSet();
  // The database opens while the server's modules load (PGlite on its own thread meanwhile): unless every
  // subgraph is served elsewhere (SUBGRAPH_URLS), the start needs it. A failure is reported where it is used.
  const database = subgraphNames.some((name) => !(name in config.SUBGRAPH_URLS)) ? openRuntimeDatabase(config) : undefined;
  database?.catch(() => undefined);
  // The subgraphs' modules load before the gateway's own: loaded after them, the distributed gateway uses
  // 1.11-1.13x the CPU per federated query (`npm run bench -- gateway --baseline`, docs/performance.md);
  // what in the load order causes it is not known.
  await import('../subgraphs/registry.js');
  // `npm ci` builds the dashboard (the package's prepare script); an install that skipped scripts has it built here.
  const [{ dashboardBuilt }, { buildDashboard }] = await Promise.all([import('./dashboard/plugin.js'), import('./dashboard/build.js')]);
  if (!dashboardBuilt()) {
    console.log('ops-supergraph: building the dashboard (web/dist is missing)');
    await buildDashboard();
  }
  // Tracing, when the OTLP exporter settings ask for it, is installed before the gateway is built.
  const { startTracing, tracingConfigured } = await import('./observability/tracing.js');
  const tracing = tracingConfigured() ? await startTracing('ops-supergraph') : null;
  const { startServer } = await import('./server.js');
  const server = await startServer({ config, ...(database ? { database } : {}) });
  server.app.log.info(
    `ops-supergraph serving GraphQL at ${server.url}/graphql, REST under ${server.url}/rental and the dashboard at ${server.url}/${tracing ? '; tracing on (OTLP)' : ''}`,
  );
  // SIGHUP serves the supergraph file anew and reads TRUSTED_DOCUMENTS_DIR again; what does not load leaves
  // what was served, and says so in the log (and /health, for the supergraph).
  process.on('SIGHUP', () => {
    if (config.API_KEYS_FILE) {
      void server.reloadKeys().then((keys) => {
        if (!keys.ok) server.app.log.error(`API_KEYS_FILE not reloaded, the keys before are still served: ${keys.error}`);
        else server.app.log.info(`API_KEYS_FILE reloaded: ${keys.keys} keys; ${keys.ended} connections and streams of keys gone ended`);
      });
    }
    const supergraph = server.reloadSupergraph();
    if (!supergraph.ok) server.app.log.error(`supergraph not reloaded, the previous one is still served: ${supergraph.error}`);
    else if (!supergraph.unchanged)
      server.app.log.info(`supergraph ${supergraph.hash} served; ${supergraph.subscriptionsEnded} subscriptions it no longer allows ended`);
    if (config.TRUSTED_DOCUMENTS_DIR) {
      const documents = server.reloadDocuments();
      if (documents.ok) server.app.log.info(`trusted documents reloaded: ${documents.clients} clients`);
      else server.app.log.error(`trusted documents not reloaded, the previous ones are still served: ${documents.error}`);
    }
  });
  closeOnSignal({ close: async () => (await server.close(), await tracing?.shutdown()) }, server.app.log);
}

main().catch((error: unknown) => exitOnStartFailure(error, 'ops-supergraph'));
