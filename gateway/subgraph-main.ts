import { argv, env, exit } from 'node:process';
import { subgraphNames, subgraphPorts, type SubgraphName } from '../schema/subgraphs.js';
import { assertPortFree } from './http/port.js';
import { configOrExit } from './config.js';
import { closeOnSignal, exitOnStartFailure, productionModeUnlessSet } from './http/process.js';

/** `npm run subgraph -- <name>`: one subgraph as its own server, on PORT or its own port (rental 4101, ...). */
async function main(): Promise<void> {
  const name = argv[2];
  if (!subgraphNames.includes(name as SubgraphName)) usage();
  const port = env['PORT'] || String(subgraphPorts[name as SubgraphName]);
  const config = configOrExit({ ...env, PORT: port });
  // Checked before the subgraph's modules are loaded and its database opened.
  await assertPortFree(config.HOST, config.PORT);
  productionModeUnlessSet();
  const { startTracing, tracingConfigured } = await import('./observability/tracing.js');
  const tracing = tracingConfigured() ? await startTracing(`ops-supergraph-${name}`) : null;
  const [{ subgraphs }, { startSubgraphServer }] = await Promise.all([import('../subgraphs/registry.js'), import('./subgraph-host/server.js')]);
  const module = subgraphs.find((m) => m.name === name);
  if (!module) usage();
  const server = await startSubgraphServer({ config, module });
  server.app.log.info(`subgraph ${module.name} serving GraphQL at ${server.graphqlUrl}`);
  closeOnSignal({ close: async () => (await server.close(), await tracing?.shutdown()) }, server.app.log);
}

function usage(): never {
  console.error(`usage: npm run subgraph -- <name>   (one of: ${subgraphNames.join(', ')})`);
  exit(2);
}

main().catch((error: unknown) => exitOnStartFailure(error, `subgraph ${argv[2] ?? ''}`.trim()));
