import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { hiveGatewayArgs } from '../peers/hive.js';
import { freePort, type ServerProcess } from '../gateway/processes.js';
import { log, type BenchRun } from '../gateway/run-context.js';
import type { SubgraphServers } from '../gateway/subgraph-servers.js';

/** A target: two gateway processes of one kind in front of the shared subgraph servers. */
export interface CacheTarget {
  key: string;
  label: string;
  servers: ServerProcess[];
  /** It serves the REST paths: half of the writes go there. */
  rest: boolean;
  /** What its processes are given beyond what every server gets. */
  settings: Record<string, string>;
}

/** A tenant's API key, as API_KEYS_FILE lists it. */
export interface TenantKey {
  key: string;
  principal: string;
  tenant: string;
  scopes: string[];
}

/** What a dashboard's user holds: reading the fleet and the tenant's bookings, and booking. */
const SCOPES = ['fleet:read', 'rental:read', 'rental:book'];

/** One key per tenant (`tenant-1` ...), new to this run, written to the run's API_KEYS_FILE. */
export function writeKeys(run: BenchRun, tenants: number): { file: string; keys: TenantKey[]; metricsKey: string } {
  const keys = Array.from({ length: tenants }, (_, i) => ({
    key: randomBytes(24).toString('base64url'),
    principal: 'dashboard',
    tenant: `tenant-${i + 1}`,
    scopes: SCOPES,
  }));
  // The run's own reader of /metrics (the state cache's counters, read after the rounds).
  const metricsKey = randomBytes(24).toString('base64url');
  const file = join(run.tmp, 'api-keys.json');
  writeFileSync(file, JSON.stringify([...keys, { key: metricsKey, principal: 'bench-metrics', tenant: 'bench', scopes: ['metrics:read'] }]));
  return { file, keys, metricsKey };
}

/** The state cache's counters of a target's processes, summed (from /metrics); null for a target without them. */
export async function stateCacheCounters(target: CacheTarget, metricsKey: string): Promise<Record<string, number> | null> {
  const sums: Record<string, number> = {};
  for (const server of target.servers) {
    const res = await fetch(`${server.url}/metrics`, { headers: { 'x-api-key': metricsKey } }).catch(() => null);
    if (!res?.ok) return null;
    for (const line of (await res.text()).split('\n')) {
      const m = /^state_cache_(reads_total|evictions_total|fills_fenced_total)(?:\{[^}]*(?:result|cause)="(\w+)"[^}]*\})? (\d+(?:\.\d+)?)$/.exec(line);
      if (!m) continue;
      const name = m[2] ? `${m[1] === 'reads_total' ? 'read' : 'evicted'} ${m[2]}` : 'fenced';
      sums[name] = (sums[name] ?? 0) + Number(m[3]);
    }
  }
  return Object.keys(sums).length > 0 ? sums : null;
}

interface Spec {
  key: string;
  label: string;
  rest: boolean;
  settings: Record<string, string>;
  /** Its n-th process's arguments and environment. */
  process: (n: number) => Promise<{ args: string[]; env: Record<string, string> }>;
}

/**
 * Starts each target's two processes: the project's gateway with the state cache on (STATE_CACHE_MB=64) and
 * off (0), distributed over the subgraph servers, given the shared database (DATABASE_URL, where the state
 * cache reads the event log) and the tenants' keys, rate limits off; and Hive Gateway with its response cache
 * (bench/peers/hive-cache.config.ts). Only those of `only` when given.
 */
export async function startCacheTargets(run: BenchRun, subgraphs: SubgraphServers, keys: { file: string; keys: TenantKey[] }, only: Set<string> | null) {
  const project = (key: string, label: string, stateCacheMb: string): Spec => {
    const settings = { STATE_CACHE_MB: stateCacheMb, RATE_LIMIT_PER_S: '0' };
    const env = { SUBGRAPH_URLS: subgraphs.urls, API_KEYS_FILE: keys.file, ...run.database(key), ...settings };
    return { key, label, rest: true, settings, process: async () => ({ args: ['--import', 'tsx', 'gateway/main.ts'], env }) };
  };
  const hive: Spec = {
    key: 'hive-cached',
    label: 'Hive Gateway, response cache 1 s',
    rest: false,
    settings: { responseCaching: 'ttl 1000 ms, invalidateViaMutation, session: the API key principal' },
    process: async () => {
      const port = await freePort();
      return {
        args: hiveGatewayArgs(subgraphs.supergraphFile, port, { config: 'cache' }),
        env: { PORT: String(port), SUBGRAPH_URLS: subgraphs.urls, API_KEYS_FILE: keys.file },
      };
    },
  };
  const specs = [
    project('project-cached', 'project gateway, state cache 64 MB', '64'),
    project('project-uncached', 'project gateway, state cache off', '0'),
    hive,
  ];
  const unknown = [...(only ?? [])].filter((key) => !specs.some((s) => s.key === key));
  if (unknown.length > 0) throw new Error(`--targets: no target ${unknown.join(', ')} (${specs.map((s) => s.key).join(', ')})`);
  const wanted = specs.filter((s) => !only || only.has(s.key));
  log(`starting the gateways: ${wanted.map((s) => `${s.key} x2`).join(', ')}`);
  // The readiness probe sends a key: with keys configured, the project's gateways answer nothing without one.
  const probe = () => ({ 'x-api-key': keys.keys[0]!.key });
  return Promise.all(
    wanted.map(async ({ process, ...spec }): Promise<CacheTarget> => {
      const servers = await Promise.all(
        [1, 2].map(async (n) => {
          const { args, env } = await process(n);
          return run.start(`${spec.key}-${n}`, args, env, undefined, probe);
        }),
      );
      return { ...spec, servers };
    }),
  );
}
