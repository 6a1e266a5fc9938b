import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { env } from 'node:process';
import { withoutSecurityDirectives } from '../../gateway/security/authorization.js';
import { PRINCIPAL_HEADER, SYSTEM_PRINCIPAL } from '../../platform/principal.js';
import { subgraphNames } from '../../schema/subgraphs.js';
import type { ServerProcess } from './processes.js';
import { log, ROOT, type BenchRun } from './run-context.js';

/** The five subgraph servers every gateway of the run calls, and the supergraph pointed at them. */
export interface SubgraphServers {
  /** In the order of `subgraphNames`. */
  servers: ServerProcess[];
  /** Each subgraph's GraphQL URL, as SUBGRAPH_URLS takes them: `name=url,...`. */
  urls: string;
  /** The checked-in supergraph with this run's subgraph URLs and without the security directives. */
  supergraphFile: string;
}

/**
 * Starts each subgraph as a process of its own on the run's database. Rental asks prediction for its trucks'
 * travel forecasts: prediction starts first, and rental's process names it in SUBGRAPH_URLS.
 */
export async function startSubgraphs(run: BenchRun): Promise<SubgraphServers> {
  log(`starting the subgraphs (${subgraphNames.join(', ')}) on ${run.postgres ? 'PostgreSQL' : 'PGlite'}`);
  // BENCH_SUBGRAPH_PROFILE_DIR=dir: each subgraph process writes a CPU profile of its whole run there when it stops.
  const subgraphProfile = env['BENCH_SUBGRAPH_PROFILE_DIR'];
  const startSubgraph = (name: string, extra: Record<string, string> = {}) =>
    run.start(
      `subgraph-${name}`,
      [...(subgraphProfile ? ['--cpu-prof', `--cpu-prof-dir=${join(subgraphProfile, name)}`] : []), '--import', 'tsx', 'gateway/subgraph-main.ts', name],
      { ...run.database(`subgraph-${name}`), ...extra },
      ROOT,
      // Its readiness request is signed too, as the system's (a probe).
      (body) => ({ [PRINCIPAL_HEADER]: run.signer.sign(SYSTEM_PRINCIPAL, { subgraph: name, method: 'POST', path: '/graphql', body }) }),
    );
  const first = subgraphNames.filter((name) => name !== 'rental');
  const firstServers = await Promise.all(first.map((name) => startSubgraph(name)));
  const subgraphUrls: Record<string, string> = Object.fromEntries(first.map((name, i) => [name, `${firstServers[i]!.url}/graphql`]));
  const rentalServer = await startSubgraph('rental', { SUBGRAPH_URLS: `prediction=${subgraphUrls['prediction']}` });
  subgraphUrls['rental'] = `${rentalServer.url}/graphql`;
  const supergraphFile = join(run.tmp, 'supergraph.graphql');
  writeFileSync(
    supergraphFile,
    // The peers get the supergraph without the SECURITY features (@requiresScopes, @authenticated), which
    // stock @apollo/gateway refuses to load; the project gateway runs in demo mode, whose principal
    // holds every scope, so every gateway gives the same answers.
    withoutSecurityDirectives(readFileSync(join(ROOT, 'schema', 'supergraph.graphql'), 'utf8')).replace(
      /@join__graph\(name: "(\w+)", url: "[^"]*"\)/g,
      (m, name: string) => (subgraphUrls[name] ? `@join__graph(name: "${name}", url: "${subgraphUrls[name]}")` : m),
    ),
  );
  return {
    servers: subgraphNames.map((name) => (name === 'rental' ? rentalServer : firstServers[first.indexOf(name)]!)),
    urls: subgraphNames.map((name) => `${name}=${subgraphUrls[name]}`).join(','),
    supergraphFile,
  };
}
