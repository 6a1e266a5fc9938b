import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/*
 * The Hive Gateway peers of `npm run bench -- gateway`: The Guild's own CLI, `hive-gateway supergraph
 * <file>`, with its defaults (one process: `--fork` defaults to 1), given only the supergraph file (the
 * benchmark's copy, with this run's subgraph URLs), the host and the port; and the same with
 * `--hive-router-runtime`: Hive Router's Rust query planner (`@graphql-hive/router-runtime`, a native
 * addon installed from npm) in place of the default JavaScript runtime.
 */
export function hiveGatewayArgs(supergraphFile: string, port: number, options: { rustPlanner?: boolean } = {}): string[] {
  const pkg = createRequire(import.meta.url).resolve('@graphql-hive/gateway/package.json');
  return [
    join(dirname(pkg), 'dist', 'bin.js'),
    'supergraph',
    supergraphFile,
    '--host',
    '127.0.0.1',
    '--port',
    String(port),
    ...(options.rustPlanner ? ['--hive-router-runtime'] : []),
  ];
}
