import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The peers' own package (bench/peers/package.json and its lockfile): not installed by the product's `npm ci`. */
const PEERS_DIR = fileURLToPath(new URL('.', import.meta.url));

/*
 * The Hive Gateway peers of `npm run bench -- gateway`: The Guild's own CLI, `hive-gateway supergraph
 * <file>`, with its defaults (one process: `--fork` defaults to 1), given only the supergraph file (the
 * benchmark's copy, with this run's subgraph URLs), the host, the port and bench/peers/hive.config.ts (which
 * signs each subgraph call, as the subgraph servers require); and the same with
 * `--hive-router-runtime`: Hive Router's Rust query planner (`@graphql-hive/router-runtime`, a native
 * addon installed from npm) in place of the default JavaScript runtime. Both live in a package of their
 * own, installed (`npm ci` in bench/peers) the first time a benchmark needs them, so `npm ci` at the root
 * installs only what the product and its tests need.
 */

/** Installs the peers from their lockfile when they are not there yet. */
export function ensurePeersInstalled(): void {
  if (existsSync(join(PEERS_DIR, 'node_modules', '@graphql-hive', 'gateway', 'package.json'))) return;
  console.log('installing the benchmark peers (bench/peers: npm ci), once');
  execFileSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: PEERS_DIR, stdio: 'inherit' });
}

/**
 * Hive Gateway's configurations, their environment described in each: `plain` signs the subgraph calls as the
 * demo principal; `cache` (`npm run bench -- cache`) signs them as each request's API key's principal and
 * turns Hive's response cache on.
 */
const HIVE_CONFIGS = { plain: join(PEERS_DIR, 'hive.config.ts'), cache: join(PEERS_DIR, 'hive-cache.config.ts') };

export function hiveGatewayArgs(supergraphFile: string, port: number, options: { rustPlanner?: boolean; config?: keyof typeof HIVE_CONFIGS } = {}): string[] {
  ensurePeersInstalled();
  const pkg = createRequire(join(PEERS_DIR, 'package.json')).resolve('@graphql-hive/gateway/package.json');
  return [
    join(dirname(pkg), 'dist', 'bin.js'),
    'supergraph',
    supergraphFile,
    '--host',
    '127.0.0.1',
    '--port',
    String(port),
    ...(options.rustPlanner ? ['--hive-router-runtime'] : []),
    '--config-path',
    HIVE_CONFIGS[options.config ?? 'plain'],
  ];
}
