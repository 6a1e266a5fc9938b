import { randomBytes } from 'node:crypto';
import { cp, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { afterAll, inject } from 'vitest';
import { loadConfig } from '../../gateway/config.js';
import type { Clock } from '../../platform/clock.js';
import type { Database } from '../../platform/db.js';
import type { EventHub, StoredEvent, StreamOptions } from '../../platform/event-hub.js';
import { startServer, type RunningServer } from '../../gateway/server.js';
import type { SubscriptionExecutor } from '../../gateway/subscriptions/executor.js';
import { startSubgraphServer, type RunningSubgraphServer } from '../../gateway/subgraph-host/server.js';
import type { SubgraphInstance, SubgraphModule } from '../../platform/subgraph.js';
import { subgraphs as allSubgraphs } from '../../subgraphs/registry.js';
import { until } from './wait.js';
import type { AuditSink } from '../../gateway/security/audit.js';
import { DEMO_PRINCIPAL, PRINCIPAL_HEADER, PrincipalSigner, type Principal } from '../../platform/principal.js';

export type Backend = 'pglite' | 'postgres';

/** PGlite always; PostgreSQL too when TEST_DATABASE_URL is set (CI sets it when a server answers). */
export const TEST_DATABASE_URL = process.env['TEST_DATABASE_URL'] || undefined;
export const backends: Backend[] = TEST_DATABASE_URL ? ['pglite', 'postgres'] : ['pglite'];

/** One process (subgraphs inside the gateway), or distributed (each subgraph its own server, over HTTP/WS). */
export type Mode = 'one-process' | 'distributed';

/**
 * Every backend in one process, and PGlite distributed: the setups a cross-cutting rule, and each subgraph's
 * own API, is tested on (PostgreSQL behind subgraph servers of their own is the `targets` suites' and the
 * event-log suites').
 */
export const setups: readonly { name: string; backend: Backend; mode: Mode }[] = [
  ...backends.map((backend) => ({ name: `${backend}, one process`, backend, mode: 'one-process' as const })),
  { name: 'pglite, distributed', backend: 'pglite', mode: 'distributed' },
];
export const modes: Mode[] = ['one-process', 'distributed'];
/** Every backend in every mode: the end-to-end suites of the rental flow and of subscriptions run on each. */
export const targets = backends.flatMap((backend) => modes.map((mode) => ({ backend, mode, name: `${backend}, ${mode}` })));

const running = new Set<{ close(): Promise<void> }>();

let copies = 0;
/**
 * A fresh PGlite data directory for one database: a copy of the run's migrated template
 * (test/support/global-setup.ts), which opens in a fraction of the time a new database takes. Without
 * the template (a config without the global setup), an in-memory database as before.
 */
async function freshDataDir(): Promise<string | undefined> {
  const template = inject('pgliteTemplate');
  if (!template) return undefined;
  const dir = join(dirname(template), `${process.pid}-${++copies}`);
  await cp(template, dir, { recursive: true });
  return dir;
}
afterAll(async () => {
  await Promise.all([...running].map((s) => s.close()));
});

export interface TestServerOptions {
  backend?: Backend;
  env?: Record<string, string>;
  clock?: Clock;
  /** Reuse a PostgreSQL schema (restart tests; the caller drops it); a fresh one, dropped at close, otherwise. */
  schema?: string;
  /** @default 'one-process' */
  mode?: Mode;
  /** The subgraphs to run (a test swaps one for a failing stand-in). @default every registered subgraph */
  subgraphs?: readonly SubgraphModule[];
  /** Receives the gateway's audit trail. @default the server log */
  audit?: AuditSink;
}

export type TestServer = Omit<RunningServer, 'db' | 'events'> & {
  /** The database the subgraphs use (the gateway's, or in distributed mode the subgraph servers'). */
  db: Database;
  events: EventHub;
  schema?: string;
  /** Distributed mode: the subgraph servers, by name. */
  subgraphServers: ReadonlyMap<string, RunningSubgraphServer>;
  /** Distributed mode: each subgraph server's environment (its data and port), to restart it as it was. */
  subgraphEnvs: ReadonlyMap<string, Record<string, string | undefined>>;
  /** Waits until subscriptions are live (a live subscription only sees events committed after that). */
  live: LiveSubscriptions;
};

/**
 * Counts subscriptions as they become live, so that a test waits for that instead of sleeping: the
 * gateway's executor answering a subscribe (in one process its upstream stream is then open, or its
 * refusal known), and an event hub opening a stream (in distributed mode a subgraph's hub does so when
 * the gateway's upstream subscription reaches it). The counts wrap the public methods of the running
 * instances and pass everything through unchanged.
 */
class LiveSubscriptions {
  /** Subscribe calls the gateway's executor has answered. */
  subscribed = 0;
  /** Streams opened on the event hubs (one per upstream stream; identical live subscriptions share one). */
  streams = 0;
  private readonly watched = new WeakSet<object>();

  watchExecutor(executor: SubscriptionExecutor): void {
    if (this.watched.has(executor)) return;
    this.watched.add(executor);
    const subscribe = executor.subscribe.bind(executor);
    executor.subscribe = async (args) => {
      try {
        return await subscribe(args);
      } finally {
        this.subscribed++;
      }
    };
  }

  watchHub(hub: EventHub): void {
    if (this.watched.has(hub)) return;
    this.watched.add(hub);
    const stream = hub.stream.bind(hub);
    hub.stream = <P>(topic: string, options: StreamOptions): AsyncIterableIterator<StoredEvent<P>> => {
      this.streams++;
      return stream<P>(topic, options);
    };
  }

  /**
   * Runs `open` (which starts subscriptions) and resolves with its result once `subscriptions` more
   * subscribe calls have been answered by the gateway and `streams` more hub streams are open (default:
   * one each; identical live subscriptions share one stream).
   */
  async opened<T>(open: () => T, counts: { subscriptions?: number; streams?: number } = {}): Promise<T> {
    const subscriptions = counts.subscriptions ?? 1;
    const streams = counts.streams ?? subscriptions;
    const subscribed = this.subscribed + subscriptions;
    const opened = this.streams + streams;
    const result = open();
    await until(() => this.subscribed >= subscribed && this.streams >= opened, `${subscriptions} subscription(s) on ${streams} stream(s) to be live`, {
      detail: () => ({ subscribed: this.subscribed, wanted: subscribed, streams: this.streams, wantedStreams: opened }),
    });
    return result;
  }
}

/**
 * Starts the real server on 127.0.0.1:0 (in distributed mode, each subgraph's server too, and the gateway
 * pointed at them with SUBGRAPH_URLS); everything is closed after the file's tests.
 */
export async function startTestServer(options: TestServerOptions = {}): Promise<TestServer> {
  const backend = options.backend ?? 'pglite';
  if (backend === 'postgres' && !TEST_DATABASE_URL) throw new Error('TEST_DATABASE_URL is not set');
  const schema = backend === 'postgres' ? (options.schema ?? `t_${randomBytes(6).toString('hex')}`) : undefined;
  const env = {
    PORT: '0',
    HOST: '127.0.0.1',
    DATA_DIR: ':memory:',
    FEATURES_DATA_DIR: ':memory:',
    LOG_LEVEL: process.env['TEST_LOG_LEVEL'] ?? 'silent',
    ...(backend === 'postgres' ? { DATABASE_URL: TEST_DATABASE_URL, DATABASE_SCHEMA: schema } : {}),
    // Distributed: the gateway and its subgraph servers share a secret of their own (signed calls only).
    ...(options.mode === 'distributed' ? { PRINCIPAL_SECRET: randomBytes(24).toString('base64url') } : {}),
    ...options.env,
  };
  const clock = options.clock ? { clock: options.clock } : {};
  const modules = options.subgraphs ?? allSubgraphs;
  const dataDirs: string[] = [];
  /** The environment of one server: on PGlite, a database of its own unless the test names DATA_DIR. */
  const own = async (): Promise<Record<string, string | undefined>> => {
    if (backend !== 'pglite' || options.env?.['DATA_DIR']) return env;
    const dir = await freshDataDir();
    if (!dir) return env;
    dataDirs.push(dir);
    return { ...env, DATA_DIR: dir };
  };
  const subgraphServers = new Map<string, RunningSubgraphServer>();
  /** Each subgraph server's environment, its port included: a test restarts one on its own data. */
  const subgraphEnvs = new Map<string, Record<string, string | undefined>>();
  if (options.mode === 'distributed') {
    // Subgraphs share one database as they would in production (PGlite: each its own).
    // A subgraph's peers start first, and its process names them in SUBGRAPH_URLS (rental asks prediction).
    for (const module of peersFirst(modules)) {
      const peerUrls = (module.peers ?? []).flatMap((peer) => {
        const started = subgraphServers.get(peer);
        return started ? [`${peer}=${started.graphqlUrl}`] : [];
      });
      const subgraphEnv = { ...(await own()), ...(peerUrls.length > 0 ? { SUBGRAPH_URLS: peerUrls.join(',') } : {}) };
      const started = await startSubgraphServer({ config: loadConfig(subgraphEnv), module, ...clock });
      subgraphServers.set(module.name, started);
      subgraphEnvs.set(module.name, { ...subgraphEnv, PORT: new URL(started.graphqlUrl).port });
    }
  }
  const urls = [...subgraphServers].map(([name, s]) => `${name}=${s.graphqlUrl}`).join(',');
  // In distributed mode the gateway runs no subgraph and opens no database.
  const gatewayEnv = options.mode === 'distributed' ? env : await own();
  const server = await startServer({
    config: loadConfig({ ...gatewayEnv, ...(urls ? { SUBGRAPH_URLS: urls } : {}) }),
    subgraphs: modules,
    ...clock,
    ...(options.audit ? { audit: options.audit } : {}),
  });
  const instances = new Map<string, SubgraphInstance>(server.subgraphs);
  for (const [name, s] of subgraphServers) instances.set(name, s.runtime.instances.get(name)!);
  const close = async () => {
    running.delete(handle);
    await server.close();
    for (const s of subgraphServers.values()) await s.close();
    if (schema && !options.schema) await dropSchema(schema);
    await Promise.all(dataDirs.map((dir) => rm(dir, { recursive: true, force: true })));
  };
  const runtime = subgraphServers.values().next().value?.runtime;
  const db = server.db ?? runtime?.db;
  const events = server.events ?? runtime?.events;
  if (!db || !events) throw new Error('no subgraph runs with a database');
  const live = new LiveSubscriptions();
  live.watchExecutor(server.subscriptions);
  for (const hub of [server.events, ...[...subgraphServers.values()].map((s) => s.runtime.events)]) if (hub) live.watchHub(hub);
  const handle: TestServer = { ...server, db, events, subgraphs: instances, subgraphServers, subgraphEnvs, close, live, ...(schema ? { schema } : {}) };
  running.add(handle);
  return handle;
}

/** The modules in an order where every subgraph comes after the peers it asks. */
function peersFirst<M extends { name: string; peers?: readonly string[] }>(modules: readonly M[]): M[] {
  const ordered: M[] = [];
  const visit = (m: M) => {
    if (ordered.includes(m)) return;
    for (const peer of m.peers ?? []) {
      const found = modules.find((x) => x.name === peer);
      if (found && found !== m) visit(found);
    }
    ordered.push(m);
  };
  modules.forEach(visit);
  return ordered;
}

export async function dropSchema(schema: string): Promise<void> {
  const pg = await import('pg');
  const client = new pg.default.Client({ connectionString: TEST_DATABASE_URL });
  await client.connect();
  await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await client.end();
}

/**
 * POSTs a GraphQL body to one of a distributed test server's subgraph servers, signed as its gateway signs
 * (a subgraph server serves nothing else), acting for `principal` (demo mode's by default).
 */
export function signedSubgraphCall(server: TestServer, subgraph: string, body: string, principal: Principal = DEMO_PRINCIPAL): Promise<Response> {
  const url = server.subgraphServers.get(subgraph)?.graphqlUrl;
  const signer = PrincipalSigner.from(server.subgraphEnvs.get(subgraph)?.['PRINCIPAL_SECRET']);
  if (!url || !signer) throw new Error(`no subgraph server ${subgraph} with a PRINCIPAL_SECRET`);
  const header = signer.sign(principal, { subgraph, method: 'POST', path: new URL(url).pathname, body });
  return fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', [PRINCIPAL_HEADER]: header }, body });
}
