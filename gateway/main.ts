import { assertPortFree } from './port.js';
import { closeOnSignal, configOrExit, exitOnStartFailure, productionModeUnlessSet } from './process.js';

/** `npm start`: the supergraph, configured from the environment (every subgraph in process by default). */
async function main(): Promise<void> {
  const config = configOrExit();
  // Checked before the server's modules (Apollo, the subgraphs, their models) are even loaded.
  await assertPortFree(config.HOST, config.PORT);
  productionModeUnlessSet();
  // Tracing, when the OTLP exporter settings ask for it, is installed before the gateway is built.
  const { startTracing, tracingConfigured } = await import('./tracing.js');
  const tracing = tracingConfigured() ? startTracing('ops-supergraph') : null;
  const { startServer } = await import('./server.js');
  const server = await startServer({ config });
  server.app.log.info(`ops-supergraph serving GraphQL at ${server.url}/graphql and REST under ${server.url}/rental${tracing ? '; tracing on (OTLP)' : ''}`);
  closeOnSignal({ close: async () => (await server.close(), await tracing?.shutdown()) }, server.app.log);
}

main().catch((error: unknown) => exitOnStartFailure(error, 'ops-supergraph'));
