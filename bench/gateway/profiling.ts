import { cpSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { env } from 'node:process';
import { measureRound, type Cell, type Target } from './measure.js';
import { unsharedWanted, wanted } from './options.js';
import { summarizeProfile, type ProfileSummary } from './profile.js';
import { stopServer } from './processes.js';
import { serving, type Measuring } from './rounds.js';
import { log, ROOT, type BenchRun } from './run-context.js';
import type { SubgraphServers } from './subgraph-servers.js';
import { PROJECT_UNSHARED_ENV } from './targets.js';
import { FEDERATED_QUERY, graphql, type RequestSpec } from './workloads.js';

/** A gateway profiled: its target key and label, its script and its environment. */
type Profiled = readonly [key: string, label: string, args: readonly string[], env: Record<string, string>];

/**
 * Where the CPU goes: each gateway started again with `node --cpu-prof` after the measured rounds and sent
 * the federated query (or, with --profile-mix, the mix) in distributed mode on the same subgraph processes.
 * A baseline run compares two trees side by side; profiles are for a run of one.
 */
export async function profileGateways(
  run: BenchRun,
  measuring: Measuring,
  { urls, supergraphFile }: SubgraphServers,
  mix: RequestSpec[],
): Promise<{ target: string; summary: ProfileSummary }[]> {
  const { options } = measuring;
  const profiles: { target: string; summary: ProfileSummary }[] = [];
  if (options.profileSeconds <= 0 || options.baseline) return profiles;
  if (!(options.profileMix ? wanted(options, 'mix') : wanted(options, 'federated') || wanted(options, 'federated-unshared'))) return profiles;
  const gateways: Profiled[] = [
    ['project', 'project gateway (distributed)', ['gateway/main.ts'], { SUBGRAPH_URLS: urls }],
    ['project-unshared', 'project gateway (distributed), nothing shared', ['gateway/main.ts'], { SUBGRAPH_URLS: urls, ...PROJECT_UNSHARED_ENV }],
    ['stock', 'stock @apollo/gateway', ['bench/peers/apollo-stock.ts'], { SUPERGRAPH_FILE: supergraphFile }],
    ['one-process-pglite', 'npm start (PGlite)', ['gateway/main.ts'], { DATA_DIR: run.copyOfTemplate('one-process-profiled') }],
  ];
  for (const gateway of gateways) {
    const [key] = gateway;
    if (options.targets && !options.targets.has(key)) continue;
    if (key === 'project-unshared' && !unsharedWanted(options)) continue;
    const summary = await profileGateway(run, measuring, gateway, options.profileMix ? mix : [graphql(FEDERATED_QUERY)]);
    if (summary) profiles.push(summary);
  }
  return profiles;
}

/** Profiles one gateway: 2 s of warm-up, then --profile-seconds of which only the samples count. */
async function profileGateway(
  run: BenchRun,
  { options, load, subgraphs }: Measuring,
  [key, label, args, extra]: Profiled,
  requests: RequestSpec[],
): Promise<{ target: string; summary: ProfileSummary } | null> {
  log(`profiling the ${label} on the ${options.profileMix ? 'mix' : 'federated query'} for ${options.profileSeconds} s`);
  const dir = join(run.tmp, `profile-${key}`);
  const server = await run.start(`${key}-profiled`, ['--cpu-prof', `--cpu-prof-dir=${dir}`, '--import', 'tsx', ...args], extra);
  const target: Target = {
    key,
    label,
    server,
    remoteSubgraphs: key !== 'one-process-pglite',
    project: key !== 'stock',
    unshared: key === 'project-unshared',
  };
  const cell: Cell = { target, variant: 'graphql', plan: { kind: 'cycle', requests } };
  await measureRound(load, cell, { connections: options.connections, seconds: 2 }, {}, serving(target, subgraphs));
  // Only the samples of the measured stretch count: not the start, the warm-up or the shutdown.
  const fromUs = Number(process.hrtime.bigint() / 1000n);
  await measureRound(load, cell, { connections: options.connections, seconds: options.profileSeconds }, {}, serving(target, subgraphs));
  const toUs = Number(process.hrtime.bigint() / 1000n);
  await stopServer(server);
  const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
  if (!file) return null;
  const summary = summarizeProfile(join(dir, file), ROOT, { fromUs, toUs });
  // The whole profile, for a closer look (Chrome DevTools, speedscope), when asked for.
  if (env['BENCH_PROFILE_DIR']) cpSync(join(dir, file), join(env['BENCH_PROFILE_DIR'], `${key}.cpuprofile`));
  return { target: label, summary };
}
