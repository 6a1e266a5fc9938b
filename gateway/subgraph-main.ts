import { argv, env, exit } from 'node:process';
import { ConfigError, loadConfig } from '../platform/config.js';
import { subgraphPorts } from '../schema/subgraphs.js';
import { subgraphs } from '../subgraphs/registry.js';
import { startSubgraphServer } from './subgraph-server.js';

/** `npm run subgraph -- <name>`: one subgraph as its own server, on PORT or its own port (rental 4101, ...). */
async function main(): Promise<void> {
  const name = argv[2];
  const module = subgraphs.find((m) => m.name === name);
  if (!module) {
    console.error(`usage: npm run subgraph -- <name>   (one of: ${subgraphs.map((m) => m.name).join(', ')})`);
    exit(2);
  }
  let config;
  try {
    const port = env['PORT'] || String(subgraphPorts[module.name as keyof typeof subgraphPorts]);
    config = loadConfig({ ...env, PORT: port });
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(error.message);
      exit(2);
    }
    throw error;
  }
  const server = await startSubgraphServer({ config, module });
  server.app.log.info(`subgraph ${module.name} serving GraphQL at ${server.graphqlUrl}`);
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    server.app.log.info(`${signal}: shutting down`);
    server.close().then(
      () => exit(0),
      (error: unknown) => {
        console.error(error);
        exit(1);
      },
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

main().catch((error: unknown) => {
  console.error(error);
  exit(1);
});
