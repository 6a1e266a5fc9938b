import { assertPortFree } from './http/port.js';
import { configOrExit } from './config.js';
import { closeOnSignal, exitOnStartFailure, productionModeUnlessSet } from './http/process.js';

/** `npm start`: the supergraph, configured from the environment (every subgraph in process by default). */
async function main(): Promise<void> {
  const config = configOrExit();
  // Checked before the server's modules (Apollo, the subgraphs, their models) are even loaded.
  await assertPortFree(config.HOST, config.PORT);
  // Before anything loads graphql-js (the dashboard's module reaches the error catalogue).
  productionModeUnlessSet();
  // `npm ci` builds the dashboard (the package's prepare script); an install that skipped scripts has it built here.
  const { buildDashboard, dashboardBuilt } = await import('./http/dashboard.js');
  if (!dashboardBuilt()) {
    console.log('ops-supergraph: building the dashboard (web/dist is missing)');
    await buildDashboard();
  }
  // Tracing, when the OTLP exporter settings ask for it, is installed before the gateway is built.
  const { startTracing, tracingConfigured } = await import('./observability/tracing.js');
  const tracing = tracingConfigured() ? startTracing('ops-supergraph') : null;
  const { startServer } = await import('./server.js');
  const server = await startServer({ config });
  server.app.log.info(
    `ops-supergraph serving GraphQL at ${server.url}/graphql, REST under ${server.url}/rental and the dashboard at ${server.url}/${tracing ? '; tracing on (OTLP)' : ''}`,
  );
  closeOnSignal({ close: async () => (await server.close(), await tracing?.shutdown()) }, server.app.log);
}

main().catch((error: unknown) => exitOnStartFailure(error, 'ops-supergraph'));
