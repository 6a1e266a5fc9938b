import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { buildSubgraphSchema } from '@apollo/subgraph';
import { parse, type GraphQLSchema } from 'graphql';
import type { Clock } from './clock.js';
import type { ConfigSection, ConfigShape, ConfigValues } from './config.js';
import type { Database } from './db.js';
import type { EventHub } from './event-hub.js';
import type { MigrationSet } from './migrate.js';
import type { Peers } from './peers.js';
import type { TopicRetention } from './outbox-retention.js';
import type { Grain } from './ownership.js';
import type { Principal } from './principal.js';
import type { RestRoute } from './rest.js';
import { watchContext, type StateTables } from './state-trace.js';

/** What a subgraph learns about the request that reached the gateway (forwarded as headers). */
interface SubgraphRequest {
  headers: Readonly<Record<string, string | undefined>>;
  /**
   * Who the request acts for, as the gateway authenticated it (signed for subgraphs in other processes,
   * platform/principal.ts). Subgraphs check ownership against it.
   */
  principal: Principal;
}

interface SubgraphDeps<C = unknown> {
  db: Database;
  /** The subgraph's own slice of the configuration (its `config` section), nothing else. */
  config: C;
  /** No credential configured at all: every call acts for the demo principal (platform/config.ts). */
  demoMode: boolean;
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
  /**
   * Work that changes no answer (a cache its first request or tick would fill), run once after the server
   * listens (gateway/http/warm-up.ts). @default none
   */
  warmUp?(): void;
}

export interface SubgraphModule<S extends ConfigShape = ConfigShape> {
  name: string;
  /** The variables it reads, declared beside its code (subgraphs/<name>/config.ts). */
  config: ConfigSection<S>;
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
   * answers (gateway/sources/fetch-cache.ts). `query`: the root Query fields, or 'all'; `entities`: the entity types
   * whose fields this subgraph resolves from the representation alone; `except`: field names that make a
   * document impure wherever they are selected (a measured time). @default none
   */
  pure?: PureReads;
  /**
   * The entity types whose rows a principal creates and owns, with how one is made: the authorization
   * matrix (test/gateway/security/authorization-matrix.test.ts) proves, for each, that another tenant reaches none of them
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
  /**
   * Its state tables: the type each table's rows are and who may see them (platform/state-trace.ts). Reads
   * of them are cached by the gateways, and every write to one must append an event tagged with its type
   * (the database handle the subgraph is given refuses any other). @default none: no answer is cached
   */
  state?: StateTables;
  start(deps: SubgraphDeps<ConfigValues<S>>): Promise<SubgraphInstance>;
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
  make(run: (operation: string, variables?: Record<string, unknown>) => Promise<Record<string, unknown>>): Promise<string>;
}

/** The id of what a mutation made: `data[field].id` of its answer (for `OwnedType.make`). */
export function createdId(data: Record<string, unknown>, field: string): string {
  const made = data[field] as { id?: unknown } | null | undefined;
  if (typeof made?.id !== 'string') throw new Error(`${field} answered no id: ${JSON.stringify(data)}`);
  return made.id;
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

/** The resolvers `buildSubgraphSchema` accepts, named through its own signature. */
type ResolverMap = Extract<Parameters<typeof buildSubgraphSchema>[0], { typeDefs: unknown }>['resolvers'];

/** What a subgraph's start makes: the per-request context, and its own readiness and stop when it has them. */
interface SubgraphParts<Context> {
  /** The per-request context (fresh loaders, the request's "now", the caller). */
  context(request: SubgraphRequest): Context;
  /** @default the `readiness` table answers a read (or always ready without one) */
  ready?(): Promise<boolean>;
  /** Stops background work (sweepers, timers). @default nothing to stop */
  close?(): Promise<void>;
  /** Work that changes no answer, run after the server listens (`SubgraphInstance.warmUp`). @default none */
  warmUp?(): void;
}

export interface SubgraphDefinition<S extends ConfigShape, Context> extends Omit<SubgraphModule<S>, 'start'> {
  /** The resolvers, typed by the subgraph's generated schema-types.ts; the schema is its SDL (`schema/<name>.graphql`). */
  resolvers: object;
  /** A table whose read proves the subgraph's database answers (readiness). @default none */
  readiness?: string;
  start(deps: SubgraphDeps<ConfigValues<S>>): Promise<SubgraphParts<Context>>;
}

/**
 * A subgraph from its parts: the schema built from its SDL and resolvers, readiness from its table, and
 * the wiring every subgraph shares, so a subgraph's index.ts holds only what is its own. Each subgraph is
 * layered alike: resolvers (resolvers.ts) call a service holding the domain logic (service.ts), which
 * calls the store holding the SQL (store.ts). The service is `service` on every subgraph's context, its
 * loaders read through it, and resolvers.ts imports nothing from store.ts: what both layers name (rows,
 * event payloads, topics) is the subgraph's records.ts. Prediction keeps no state, so it has neither: its
 * context holds the loaded models.
 */
export function defineSubgraph<S extends ConfigShape, Context>(definition: SubgraphDefinition<S, Context>): SubgraphModule<S> {
  const { name, config, restPrefix, routes, migrations, peers, pure, owned, shared, retention, state, resolvers, readiness } = definition;
  return {
    ...{ name, config, restPrefix, routes, migrations },
    ...(peers ? { peers } : {}),
    ...(pure ? { pure } : {}),
    ...(owned ? { owned } : {}),
    ...(shared ? { shared } : {}),
    ...(retention ? { retention } : {}),
    ...(state ? { state } : {}),
    async start(deps) {
      const parts = await definition.start(deps);
      const schema = buildSubgraphSchema({ typeDefs: parse(readSubgraphSdl(definition.name)), resolvers: resolvers as ResolverMap });
      const tableAnswers = async () => {
        if (!readiness) return true;
        try {
          await deps.db.query(`SELECT 1 FROM ${readiness} LIMIT 1`);
          return true;
        } catch {
          return false;
        }
      };
      return {
        schema,
        // What an answer read beyond the tables (the clock, the caller) is noted as it is read.
        context: (request) => watchContext(parts.context(request)),
        ready: parts.ready ? () => parts.ready!() : tableAnswers,
        close: async () => {
          await parts.close?.();
        },
        ...(parts.warmUp ? { warmUp: () => parts.warmUp!() } : {}),
      };
    },
  };
}
