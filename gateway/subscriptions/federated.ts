import type { GraphQLDataSource } from '@apollo/gateway';
import type { FastifyBaseLogger } from 'fastify';
import type { PrincipalSigner } from '../../platform/principal.js';
import type { SubgraphInstance } from '../../platform/subgraph.js';
import type { SubgraphTrust } from '../../platform/subgraph-trust.js';
import type { GatewayMetrics } from '../observability/metrics.js';
import type { SubscriptionsConfig } from './config.js';
import { SubscriptionExecutor } from './executor.js';
import { inProcessUpstream } from './in-process-upstream.js';
import { remoteUpstream } from './remote-upstream.js';

export interface FederatedSubscriptionsOptions {
  config: Pick<SubscriptionsConfig, 'WS_KEEPALIVE_MS' | 'WS_MAX_QUEUED_EVENTS' | 'SUBSCRIPTION_RESUME_GRACE_MS'>;
  /** The supergraph as the planner reads it. */
  supergraphSdl: string;
  remoteUrls: ReadonlyMap<string, string>;
  local: ReadonlyMap<string, SubgraphInstance>;
  signer: PrincipalSigner | null;
  trust: SubgraphTrust;
  /** The federated gateway's data sources, by subgraph (entity fetches of subscription events reuse them). */
  dataSources: () => ReadonlyMap<string, GraphQLDataSource>;
  metrics: GatewayMetrics;
  log: FastifyBaseLogger;
}

/**
 * Federated subscriptions: one shared upstream stream per distinct subscription, opened in process or on a
 * subgraph server, with the closer of the upstream connections; their resumes counted as a gauge.
 */
export function federatedSubscriptions(options: FederatedSubscriptionsOptions): { subscriptions: SubscriptionExecutor; close: () => Promise<void> } {
  const { config, remoteUrls, signer, trust, log } = options;
  const remote = remoteUpstream(remoteUrls, { signer, trust, keepAliveMs: config.WS_KEEPALIVE_MS, maxQueued: config.WS_MAX_QUEUED_EVENTS });
  const inProcess = inProcessUpstream(options.local, (error) => log.error({ err: error }, 'subgraph fault'));
  const subscriptions = new SubscriptionExecutor({
    supergraphSdl: options.supergraphSdl,
    services: () => Object.fromEntries([...options.dataSources().entries()]),
    openUpstream: (service, request, context, streamOptions) =>
      remoteUrls.has(service) ? remote.open(service, request, context, streamOptions) : inProcess(service, request, context, streamOptions),
    maxQueuedPerSubscriber: config.WS_MAX_QUEUED_EVENTS,
    resumeGraceMs: config.SUBSCRIPTION_RESUME_GRACE_MS,
    logger: log,
  });
  options.metrics.gauge({
    name: 'subscription_upstream_resumes_total',
    help: 'Subscription streams reopened from their last event after their subgraph was lost, since start',
    collect: (gauge) => gauge.set(subscriptions.resumed),
  });
  return { subscriptions, close: () => remote.close() };
}
