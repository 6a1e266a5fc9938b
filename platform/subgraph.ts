import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { GraphQLSchema } from 'graphql';
import type { Clock } from './clock.js';
import type { Config } from './config.js';
import type { Database } from './db.js';
import type { EventHub } from './event-hub.js';
import type { MigrationSet } from './migrate.js';
import type { Peers } from './peers.js';
import type { TopicRetention } from './outbox-retention.js';
import type { Grain } from './ownership.js';
import type { Principal } from './principal.js';
import type { RestRoute } from './rest.js';

/** What a subgraph learns about the request that reached the gateway (forwarded as headers). */
export interface SubgraphRequest {
  headers: Readonly<Record<string, string | undefined>>;
  /**
   * Who the request acts for, as the gateway authenticated it (signed for subgraphs in other processes,
   * platform/principal.ts). Subgraphs check ownership against it.
   */
  principal: Principal;
}

export interface SubgraphDeps {
  db: Database;
  config: Config;
  clock: Clock;
  /** The outbox reader: subscription resolvers stream from it. */
  events: EventHub;
  /** Other subgraphs, asked through their public schemas (platform/peers.ts). */
  peers: Peers;
}

/** A running subgraph: transport-free; the gateway or a stand-alone server connects it to sockets. */
export interface SubgraphInstance {
  schema: GraphQLSchema;
  /** Builds the per-request context (fresh loaders, the request's "now", forwarded headers). */
  context(request: SubgraphRequest): unknown;
  /** Readiness: true when the subgraph can serve (its database answers, its models are loaded). */
  ready(): Promise<boolean>;
  /** Stops background work (sweepers, timers). */
  close(): Promise<void>;
}

export interface SubgraphModule {
  name: string;
  /** URL prefix of the REST compatibility paths. */
  restPrefix: string;
  /**
   * REST compatibility routes, relative to the prefix. Each runs a GraphQL operation through the gateway,
   * so the gateway serves them whether the subgraph runs in its process or on its own.
   */
  routes: readonly RestRoute[];
  migrations: MigrationSet[];
  /**
   * The subgraphs this one asks for answers (platform/peers.ts): in distributed mode they start first and
   * its process names them in SUBGRAPH_URLS. @default none
   */
  peers?: readonly string[];
  /**
   * Reads whose answers are functions of the request's document and variables alone, and of what the
   * subgraph loaded at its start (trained models): no state, no clock, no caller. The gateway keeps such
   * answers (gateway/execution/fetch-cache.ts). `query`: the root Query fields, or 'all'; `entities`: the entity types
   * whose fields this subgraph resolves from the representation alone; `except`: field names that make a
   * document impure wherever they are selected (a measured time). @default none
   */
  pure?: PureReads;
  /**
   * The entity types whose rows a principal creates and owns, with how one is made: the authorization
   * matrix (test/authorization-matrix.test.ts) proves, for each, that another tenant reaches none of them
   * through any root field, REST route, subscription, replay or `_entities`, without a test of its own.
   * Every entity type of the supergraph is either owned here or listed in `shared`. @default none
   */
  owned?: readonly OwnedType[];
  /** Entity types that are the same for every caller (the fleet, the insurance world). @default none */
  shared?: readonly string[];
  /**
   * What the outbox keeps of this subgraph's high-rate topics beyond the shared OUTBOX_RETENTION_S
   * (platform/outbox-retention.ts). @default every topic kept for OUTBOX_RETENTION_S
   */
  retention?: readonly TopicRetention[];
  start(deps: SubgraphDeps): Promise<SubgraphInstance>;
}

/** An entity type whose rows carry their owner (platform/ownership.ts). */
export interface OwnedType {
  /** The GraphQL type, an entity keyed by `id`. */
  type: string;
  /** The table of its rows and their owner columns. */
  table: string;
  owner: { tenant: string; principal: string };
  grain: Grain;
  /** The names an argument carrying its id has (besides `id` on a field that returns it): `bookingId`. */
  idArguments: readonly string[];
  /** A well-formed id that no row has: what another tenant's id must answer exactly like. */
  unknownId: string;
  /** Values for other required arguments or body fields of operations that take its id, by name. */
  inputs?: Readonly<Record<string, unknown>>;
  /** Makes one as a caller, through the public API (`run` executes GraphQL as that caller); resolves to its id. */
  make(run: (operation: string, variables?: Record<string, unknown>) => Promise<Record<string, any>>): Promise<string>;
}

export interface PureReads {
  query: readonly string[] | 'all';
  entities: readonly string[];
  except?: readonly string[];
}

const schemaDir = fileURLToPath(new URL('../schema/', import.meta.url));

/** A subgraph's SDL, `schema/<name>.graphql`: the single source of its schema and of composition. */
export function readSubgraphSdl(name: string): string {
  return readFileSync(`${schemaDir}${name}.graphql`, 'utf8');
}
