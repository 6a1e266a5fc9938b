import { hiveGatewayArgs } from '../peers/hive.js';
import type { Target } from './measure.js';
import { unsharedWanted, type Options } from './options.js';
import { freePort } from './processes.js';
import { log, type BenchRun } from './run-context.js';
import type { SubgraphServers } from './subgraph-servers.js';

/**
 * This project's gateway with nothing shared between requests: no collapsing of identical fetches, no fetch
 * cache, no state cache (whose answers one request's fetch leaves for the next).
 */
export const PROJECT_UNSHARED_ENV = { GATEWAY_COLLAPSE_FETCHES: 'false', GATEWAY_FETCH_CACHE_MB: '0', STATE_CACHE_MB: '0' };
/** Hive Gateway with nothing shared (bench/peers/hive.config.ts): its HTTP transport's deduplication of identical subgraph requests in flight off. */
const HIVE_UNSHARED_ENV = { HIVE_DEDUPLICATE_INFLIGHT_REQUESTS: 'false' };

/** A target before it is started: how its process runs and what it is. */
interface Spec {
  key: string;
  label: string;
  args: string[];
  env: Record<string, string>;
  remoteSubgraphs: boolean;
  project: boolean;
  unshared?: boolean;
  cwd?: string;
}

/**
 * Starts the gateways under test, each its own process: the project's gateway (distributed mode), then the
 * peers or, with `--baseline`, the baseline tree's servers, then `npm start` on PGlite and on PostgreSQL;
 * only those of `--targets` when it is given.
 */
export async function startTargets(run: BenchRun, options: Options, subgraphs: SubgraphServers): Promise<Target[]> {
  log('starting the gateways');
  const specs = await targetSpecs(run, options, subgraphs);
  const unknown = [...(options.targets ?? [])].filter((key) => !specs.some((s) => s.key === key));
  if (unknown.length > 0) throw new Error(`--targets: no target ${unknown.join(', ')} (${specs.map((s) => s.key).join(', ')})`);
  return Promise.all(
    specs
      .filter((s) => !options.targets || options.targets.has(s.key))
      .map(async ({ key, label, args, env: extra, cwd, unshared, ...shape }) => ({
        key,
        label,
        server: await run.start(key, args, extra, cwd),
        unshared: unshared === true,
        ...shape,
      })),
  );
}

async function targetSpecs(run: BenchRun, options: Options, { urls, supergraphFile }: SubgraphServers): Promise<Spec[]> {
  const postgres = run.postgres;
  return [
    projectServer('project', 'project gateway (distributed)', { SUBGRAPH_URLS: urls, ...options.treeEnv }),
    ...(unsharedWanted(options)
      ? [
          projectServer(
            'project-unshared',
            'project gateway (distributed), nothing shared',
            { SUBGRAPH_URLS: urls, ...PROJECT_UNSHARED_ENV, ...options.treeEnv },
            { unshared: true },
          ),
        ]
      : []),
    ...(options.baseline ? baselineSpecs(run, options, options.baseline, urls) : await peerSpecs(options, urls, supergraphFile)),
    projectServer('one-process-pglite', 'npm start (PGlite)', { DATA_DIR: run.copyOfTemplate('one-process'), ...options.treeEnv }),
    ...(postgres
      ? [
          projectServer('one-process-postgres', 'npm start (PostgreSQL)', {
            DATABASE_URL: postgres.url,
            DATABASE_SCHEMA: postgres.schema,
            ...options.treeEnv,
          }),
        ]
      : []),
  ];
}

/** The peers on the same subgraphs: stock @apollo/gateway, Hive Gateway, and Hive Gateway with the Rust planner. */
async function peerSpecs(options: Options, urls: string, supergraphFile: string): Promise<Spec[]> {
  const hivePort = await freePort();
  const hiveRustPort = await freePort();
  const hiveRustUnsharedPort = await freePort();
  return [
    {
      key: 'stock',
      label: 'stock @apollo/gateway',
      args: ['--import', 'tsx', 'bench/peers/apollo-stock.ts'],
      env: { SUPERGRAPH_FILE: supergraphFile },
      remoteSubgraphs: true,
      project: false,
    },
    {
      key: 'hive',
      label: 'Hive Gateway',
      args: hiveGatewayArgs(supergraphFile, hivePort),
      env: { PORT: String(hivePort), SUBGRAPH_URLS: urls },
      remoteSubgraphs: true,
      project: false,
    },
    {
      key: 'hive-rust',
      label: 'Hive Gateway, Rust planner',
      args: hiveGatewayArgs(supergraphFile, hiveRustPort, { rustPlanner: true }),
      env: { PORT: String(hiveRustPort), SUBGRAPH_URLS: urls },
      remoteSubgraphs: true,
      project: false,
    },
    ...(unsharedWanted(options)
      ? [
          {
            key: 'hive-rust-unshared',
            label: 'Hive Gateway, Rust planner, nothing shared',
            args: hiveGatewayArgs(supergraphFile, hiveRustUnsharedPort, { rustPlanner: true }),
            env: { PORT: String(hiveRustUnsharedPort), SUBGRAPH_URLS: urls, ...HIVE_UNSHARED_ENV },
            remoteSubgraphs: true,
            project: false,
            unshared: true,
          },
        ]
      : []),
  ];
}

/** The baseline checkout's distributed gateway and `npm start` on PGlite, with `--baseline-env`. */
function baselineSpecs(run: BenchRun, options: Options, dir: string, urls: string): Spec[] {
  return [
    projectServer('project-baseline', 'project gateway (distributed), baseline', { SUBGRAPH_URLS: urls, ...options.baselineEnv }, { cwd: dir }),
    projectServer(
      'one-process-pglite-baseline',
      'npm start (PGlite), baseline',
      { DATA_DIR: run.copyOfTemplate('one-process-baseline'), ...options.baselineEnv },
      { cwd: dir },
    ),
    ...(unsharedWanted(options)
      ? [
          projectServer(
            'project-baseline-unshared',
            'project gateway (distributed), baseline, nothing shared',
            { SUBGRAPH_URLS: urls, ...PROJECT_UNSHARED_ENV, ...options.baselineEnv },
            { unshared: true, cwd: dir },
          ),
        ]
      : []),
  ];
}

/** One of this project's servers (`gateway/main.ts`): distributed when it is given SUBGRAPH_URLS, else one process. */
function projectServer(key: string, label: string, env: Record<string, string>, extra: { unshared?: boolean; cwd?: string } = {}): Spec {
  return {
    key,
    label,
    args: ['--import', 'tsx', 'gateway/main.ts'],
    env,
    remoteSubgraphs: 'SUBGRAPH_URLS' in env,
    project: true,
    ...extra,
  };
}
