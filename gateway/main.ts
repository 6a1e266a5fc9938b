import { closeOnSignal, configOrExit } from './process.js';
import { startServer } from './server.js';

/** `npm start`: the supergraph, configured from the environment (every subgraph in process by default). */
async function main(): Promise<void> {
  const server = await startServer({ config: configOrExit() });
  server.app.log.info(`ops-supergraph serving GraphQL at ${server.url}/graphql and REST under ${server.url}/rental`);
  closeOnSignal(server, server.app.log);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
