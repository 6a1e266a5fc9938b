import { argv, env, exit } from 'node:process';
import { subgraphPorts } from '../schema/subgraphs.js';
import { subgraphs } from '../subgraphs/registry.js';
import { closeOnSignal, configOrExit } from './process.js';
import { startSubgraphServer } from './subgraph-server.js';

/** `npm run subgraph -- <name>`: one subgraph as its own server, on PORT or its own port (rental 4101, ...). */
async function main(): Promise<void> {
  const name = argv[2];
  const module = subgraphs.find((m) => m.name === name);
  if (!module) {
    console.error(`usage: npm run subgraph -- <name>   (one of: ${subgraphs.map((m) => m.name).join(', ')})`);
    exit(2);
  }
  const port = env['PORT'] || String(subgraphPorts[module.name as keyof typeof subgraphPorts]);
  const server = await startSubgraphServer({ config: configOrExit({ ...env, PORT: port }), module });
  server.app.log.info(`subgraph ${module.name} serving GraphQL at ${server.graphqlUrl}`);
  closeOnSignal(server, server.app.log);
}

main().catch((error: unknown) => {
  console.error(error);
  exit(1);
});
