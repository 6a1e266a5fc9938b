import type { FastifyInstance } from 'fastify';
import { systemClock, type Clock } from '../platform/clock.js';
import { isDemoMode } from '../platform/config.js';
import { closeOpening, type Database } from '../platform/db.js';
import type { EventHub } from '../platform/event-hub.js';
import type { EventRelay } from '../platform/event-relay.js';
import type { SubgraphInstance, SubgraphModule } from '../platform/subgraph.js';
import { subgraphs as allSubgraphs } from '../subgraphs/registry.js';
import { type Config } from './config.js';
import { boundedVariablesPolicy } from './pipeline/bounded-errors.js';
import { requestErrorPolicy } from './pipeline/graphql-errors.js';
import { graphqlValidation, pipelinePlugin, type Pipeline } from './pipeline/pipeline.js';
import { subgraphsPlugin } from './sources/subgraphs.js';
import { stateCachePlugin, statePositionPolicy } from './sources/state-route.js';
import { usagePlugin, usagePolicy } from './governance/usage-recording.js';
import { graphqlServerPlugin } from './graphql/apollo.js';
import { documentStep, documentsPlugin, type DocumentsReload } from './graphql/documents.js';
import { graphqlRoutePlugin } from './graphql/route.js';
import type { ReloadResult } from './graphql/served-supergraph.js';
import { supergraphPlugin } from './graphql/supergraph.js';
import { admissionPlugin } from './http/admission.js';
import { createHttpApp, readyAndListen } from './http/app.js';
import { dashboardPlugin } from './dashboard/plugin.js';
import { mcpPlugin } from './agents/mcp.js';
import { assertPortFree } from './http/port.js';
import { warmUpPlugin } from './http/warm-up.js';
import { gatewayHealthPlugin, type GatewayHealthOptions } from './observability/health.js';
import { metricsPlugin } from './observability/metrics.js';
import { restPlugin } from './rest/plugin.js';
import { auditPolicy, type AuditSink } from './security/audit.js';
import { authorizationPolicy } from './security/authorization.js';
import { callerIsOperator, edgeGuardPlugin } from './security/edge-guard.js';
import { operationMetricsPlugin } from './governance/operation-metrics.js';
import { explorerPlugin } from './dashboard/explorer.js';
import { probeAdmission, rateLimitPolicy } from './security/rate-limit.js';
import { credentialRecheckPlugin } from './subscriptions/credential-recheck.js';
import type { SubscriptionExecutor } from './subscriptions/executor.js';
import { httpStreamsPlugin } from './subscriptions/http-streams.js';
import { graphqlWsPlugin } from './subscriptions/ws-server.js';

export interface ServerOptions {
  config: Config;
  /** Source of "now" for every time rule. @default the system clock */
  clock?: Clock;
  /** The subgraphs to serve. @default every registered subgraph */
  subgraphs?: readonly SubgraphModule[];
  /**
   * The in-process subgraphs' database, when its opening was started earlier (`npm start` starts it before
   * the server's modules load). Closed here when every subgraph is remote. @default opened by the start
   */
  database?: Promise<Database>;
  /** Where the audit trail of state changes goes (gateway/security/audit.ts). @default the server log, as `audit` lines */
  audit?: AuditSink;
}

export interface RunningServer {
  app: FastifyInstance;
  /** The database of the in-process subgraphs; null when every subgraph runs on its own (distributed). */
  db: Database | null;
  events: EventHub | null;
  /** The relay of the in-process subgraphs' outbox to the event bus (EVENT_BUS_URL); null without one. */
  relay: EventRelay | null;
  /** Federated subscriptions (shared upstream streams). */
  subscriptions: SubscriptionExecutor;
  /** The subgraphs running in this process, by name (tests reach `_entities` through their schemas). */
  subgraphs: ReadonlyMap<string, SubgraphInstance>;
  /** Base URL, e.g. http://127.0.0.1:4000 */
  url: string;
  /** Every route the server registered, with its methods (the doors of HTTP requests). */
  routes(): Array<{ url: string; methods: string[]; public: boolean }>;
  /** The operation pipeline every door runs, with the steps it applies (gateway/pipeline/pipeline.ts). */
  pipeline: Pipeline;
  /**
   * Reads SUPERGRAPH_FILE (or the checked-in supergraph) again and serves it (`SIGHUP`, or the file changing):
   * built and checked whole first; on a failure the supergraph served before stays (gateway/graphql/served-supergraph.ts).
   */
  reloadSupergraph(): ReloadResult;
  /**
   * Reads TRUSTED_DOCUMENTS_DIR again (`SIGHUP`): every manifest checked before any is served; on a failure
   * the documents served before stay, and the error names the file and operation.
   */
  reloadDocuments(): DocumentsReload;
  /**
   * Reads API_KEYS_FILE again (`SIGHUP`), checked whole first (on a failure the keys before stay), then ends
   * every open WebSocket and HTTP stream whose key is gone: how many.
   */
  reloadKeys(): Promise<{ ok: true; keys: number; ended: number } | { ok: false; error: string }>;
  close(): Promise<void>;
}

/**
 * Starts the supergraph: the gateway with GraphQL over HTTP and WebSocket, REST and health, and every
 * subgraph not named in SUBGRAPH_URLS in the same process (all of them by default). The root is a list of
 * parts, each a fastify plugin of its room with its name and the parts it depends on (checked as it
 * registers), in the order they are made; each closes itself when the app closes (docs/architecture.md,
 * "Adding a part").
 */
export async function startServer(options: ServerOptions): Promise<RunningServer> {
  const { config } = options;
  const modules = options.subgraphs ?? allSubgraphs;
  const app = createHttpApp(config, { admission: true });
  // A busy port is reported before the slow part of the start (database, migrations, gateway).
  await assertPortFree(config.HOST, config.PORT).catch(async (error: unknown) => {
    await closeOpening(options.database);
    throw error;
  });
  void app
    .register(metricsPlugin)
    .register(admissionPlugin)
    .register(warmUpPlugin)
    .register(subgraphsPlugin, (parent) => ({
      config,
      modules,
      remote: 'SUBGRAPH_URLS' as const,
      clock: options.clock ?? systemClock,
      ...database(options),
      warmUp: parent.warmUp,
      metrics: parent.metrics,
    }))
    .register(explorerPlugin, { config })
    .register(edgeGuardPlugin, { config })
    .register(supergraphPlugin, { config, clock: options.clock ?? systemClock })
    .register(stateCachePlugin, { modules })
    .register(operationMetricsPlugin)
    .register(usagePlugin, (parent) => ({ config, schema: parent.supergraph.schema, supergraphSdl: () => parent.supergraph.sdl }))
    .register(documentsPlugin, (parent) => ({ config, modules, schema: parent.supergraph.schema }))
    .register(pipelinePlugin, (parent) => ({
      steps: {
        documents: documentStep(parent.documents),
        limits: parent.supergraph.limiter,
        validation: graphqlValidation(),
        authorization: authorizationPolicy(parent.supergraph.authorizer),
        rate: rateLimitPolicy(parent.rateLimiter),
        audit: auditPolicy(options.audit ?? ((entry) => parent.log.info({ audit: entry }, 'audit'))),
        usage: parent.usage ? usagePolicy(parent.usage) : { notApplied: 'USAGE_RECORDING=false' },
      },
      // What every execution does first: the request's refusals, bounded variable errors, a turn of the
      // event loop before the operation is read, the log position of its writes on its answer, and the
      // operation's count and time (of the answer as it leaves, its errors bounded).
      before: [
        requestErrorPolicy(),
        boundedVariablesPolicy(),
        { started: () => parent.admission!.enter() },
        statePositionPolicy(),
        parent.operationMetrics.policy(),
      ],
      // Refusals at the intake (every door's) are counted by their code as the answered ones are.
      onRefusal: (refusal) => parent.operationMetrics.refused(refusal.code),
    }))
    .register(graphqlServerPlugin, { config })
    .register(httpStreamsPlugin, (parent) => ({
      config,
      schema: parent.supergraph.schema,
      subscriptions: parent.subscriptions,
      execute: parent.graphql.executeOnSocket,
    }))
    .register(graphqlRoutePlugin, { config })
    .register(graphqlWsPlugin, (parent) => ({
      config,
      schema: parent.supergraph.schema,
      subscriptions: parent.subscriptions,
      execute: parent.graphql.executeOnSocket,
    }))
    .register(credentialRecheckPlugin, { config })
    .register(restPlugin, (parent) => ({ modules, execute: parent.graphql.execute, authorizer: parent.supergraph.authorizer }))
    .register(mcpPlugin, { config })
    .register(gatewayHealthPlugin, (parent) => gatewayHealth(parent, isDemoMode(config)))
    .register(dashboardPlugin, {});
  return runningServer(app, await readyAndListen(app, config));
}

/** The in-process subgraphs' database, when its opening was started before the server's modules loaded. */
function database(options: ServerOptions): { database?: Promise<Database> } {
  return options.database ? { database: options.database } : {};
}

/** What the probes read: the subgraphs, the supergraph served, the sockets and the warm-up. */
function gatewayHealth(app: FastifyInstance, demoMode: boolean): GatewayHealthOptions {
  const { modules, remoteUrls, local, trust, runtime } = app.subgraphs;
  return {
    names: modules.map((m) => m.name),
    remoteUrls,
    local,
    trust,
    callerIsOperator: (request) => callerIsOperator(app.auth, request),
    demoMode,
    admit: probeAdmission(),
    database: () => runtime?.db.kind ?? null,
    relay: () => runtime?.relay ?? null,
    websocket: () => app.graphqlWs,
    supergraph: () => app.supergraph.status(),
    warmUp: () => app.warmUp.report(),
  };
}

/** The running server's handle, read off the parts' decorations. */
function runningServer(app: FastifyInstance, url: string): RunningServer {
  const { runtime, local } = app.subgraphs;
  return {
    app,
    db: runtime?.db ?? null,
    events: runtime?.events ?? null,
    relay: runtime?.relay ?? null,
    subscriptions: app.subscriptions,
    subgraphs: local,
    url,
    routes: () => app.routeTable.list(),
    pipeline: app.pipeline,
    reloadSupergraph: () => app.reloadSupergraph(),
    reloadDocuments: () => app.reloadDocuments(),
    reloadKeys: async () => {
      const result = app.auth.reloadKeys();
      if (!result.ok) return result;
      return { ...result, ended: await app.recheckCredentials() };
    },
    close: () => app.close(),
  };
}
