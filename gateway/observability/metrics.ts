import type { RelayStatus } from '../../platform/event-relay.js';
import type { GraphQLDataSource, GraphQLDataSourceProcessOptions } from '@apollo/gateway';
import type { GatewayGraphQLResponse } from '@apollo/server-gateway-interface';
import type { FastifyInstance } from 'fastify';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/*
 * Prometheus metrics at /metrics (prom-client): what an operator watches. Request counts and latency by
 * route template (never the raw URL, so label values stay few), subgraph fetch times and failures, the
 * WebSocket connections and operations open, slow-consumer closes, the outbox lag, the database pool,
 * the embedded database's read cache, requests waiting for their turn, and the process's own CPU,
 * memory, GC and event-loop lag.
 */

const LATENCY_BUCKETS = [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** What the fetch cache's gauges read (gateway/execution/fetch-cache.ts's FetchCache has this shape). */
export interface FetchCacheReadings {
  readonly stats: { readonly hits: ReadonlyMap<string, number>; readonly misses: ReadonlyMap<string, number> };
  snapshot(): { bytes: number };
}

export interface MetricSources {
  ws: { connections(): number; operations(): number; slowConsumerCloses(): number };
  /** Subscriptions (and SSE operations) streamed over HTTP: open now, and cut as slow consumers since start. */
  httpStreams(): { open: number; slowConsumerCloses: number };
  /** Subscription streams reopened after their subgraph was lost, since start. */
  subscriptionResumes(): number;
  /** Outbox events not yet handed to this process's streams; null without an in-process hub. */
  outboxLag(): Promise<bigint | null>;
  /** The relay to the event bus in this process (EVENT_BUS_URL); null without one. */
  relay(): Promise<RelayStatus | null>;
  pool(): { total: number; idle: number; waiting: number } | null;
  /** The embedded database's read cache (platform/read-cache.ts); null on PostgreSQL or with it off. */
  readCache(): { hits: number; misses: number; entries: number } | null;
  /** Subgraph answers kept by the gateway (gateway/execution/fetch-cache.ts): per-subgraph reads by result, and bytes held. */
  fetchCache(): FetchCacheReadings;
  /** Requests waiting for their turn of the event loop (gateway/http/admission.ts). */
  queued(): number;
  /** Readiness of each subgraph running in this process (its database, online store and the like answer). */
  subgraphsReady(): Promise<Record<string, boolean>>;
}

export class GatewayMetrics {
  readonly registry = new Registry();
  private readonly requests: Counter<'method' | 'route' | 'status'>;
  private readonly latency: Histogram<'method' | 'route' | 'status'>;
  private readonly fetches: Histogram<'subgraph' | 'outcome'>;
  private readonly collapsed: Counter<'subgraph'>;

  constructor(sources: MetricSources) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    this.requests = new Counter({
      name: 'http_requests_total',
      help: 'HTTP requests answered, by route template and status',
      labelNames: ['method', 'route', 'status'],
      registers,
    });
    this.latency = new Histogram({
      name: 'http_request_duration_seconds',
      help: 'Time from a request received to its answer sent, by route template and status',
      labelNames: ['method', 'route', 'status'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.fetches = new Histogram({
      name: 'subgraph_fetch_duration_seconds',
      help: 'Gateway fetches to a subgraph (query plan steps), by outcome: ok, errors (answered with GraphQL errors) or failed (no answer)',
      labelNames: ['subgraph', 'outcome'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.collapsed = new Counter({
      name: 'subgraph_fetches_collapsed_total',
      help: 'Subgraph reads answered by an identical one already in flight instead of being made again',
      labelNames: ['subgraph'],
      registers,
    });
    new Gauge({
      name: 'websocket_connections',
      help: 'Open graphql-ws connections',
      registers,
      collect() {
        this.set(sources.ws.connections());
      },
    });
    new Gauge({
      name: 'websocket_operations',
      help: 'Operations open on graphql-ws connections (subscriptions and operations in flight)',
      registers,
      collect() {
        this.set(sources.ws.operations());
      },
    });
    new Gauge({
      name: 'websocket_slow_consumer_closes_total',
      help: 'Connections closed because events overflowed their buffer (4413), since start',
      registers,
      collect() {
        this.set(sources.ws.slowConsumerCloses());
      },
    });
    new Gauge({
      name: 'http_streams_open',
      help: 'Operations streamed over HTTP now (Server-Sent Events and multipart subscriptions)',
      registers,
      collect() {
        this.set(sources.httpStreams().open);
      },
    });
    new Gauge({
      name: 'http_stream_slow_consumer_cuts_total',
      help: 'HTTP streams cut because their client stopped reading (its buffer or event queue overflowed), since start',
      registers,
      collect() {
        this.set(sources.httpStreams().slowConsumerCloses);
      },
    });
    new Gauge({
      name: 'subscription_upstream_resumes_total',
      help: 'Subscription streams reopened from their last event after their subgraph was lost, since start',
      registers,
      collect() {
        this.set(sources.subscriptionResumes());
      },
    });
    new Gauge({
      name: 'outbox_lag_events',
      help: 'Newest outbox event id minus the last one this process handed to its streams',
      registers,
      async collect() {
        const lag = await sources.outboxLag().catch(() => null);
        if (lag !== null) this.set(Number(lag));
      },
    });
    new Gauge({
      name: 'event_relay_lag_events',
      help: 'Outbox events not yet relayed to the event bus stream',
      registers,
      async collect() {
        const status = await sources.relay().catch(() => null);
        if (status) this.set(status.lagEvents);
      },
    });
    new Gauge({
      name: 'event_relay_lag_seconds',
      help: 'Age of the oldest outbox event not yet relayed to the event bus stream',
      registers,
      async collect() {
        const status = await sources.relay().catch(() => null);
        if (status) this.set(status.lagSeconds);
      },
    });
    new Gauge({
      name: 'event_relay_lineage_mismatch',
      help: "1 while the event bus stream holds another database's events (nothing is relayed; see /health)",
      registers,
      async collect() {
        const status = await sources.relay().catch(() => null);
        if (status) this.set(status.lineage === 'foreign' ? 1 : 0);
      },
    });
    new Gauge({
      name: 'event_stream_bytes',
      help: 'Size of the event bus stream as JetStream last reported it',
      registers,
      async collect() {
        const status = await sources.relay().catch(() => null);
        if (status?.streamBytes != null) this.set(status.streamBytes);
      },
    });
    new Gauge({
      name: 'db_pool_connections',
      help: 'PostgreSQL pool connections by state (open, idle) and queries waiting for one',
      labelNames: ['state'],
      registers,
      collect() {
        const stats = sources.pool();
        if (!stats) return;
        this.set({ state: 'open' }, stats.total);
        this.set({ state: 'idle' }, stats.idle);
        this.set({ state: 'waiting' }, stats.waiting);
      },
    });
    new Gauge({
      name: 'db_read_cache_reads_total',
      help: 'Cacheable PGlite reads answered from the read cache (hit) or run (miss), since start',
      labelNames: ['result'],
      registers,
      collect() {
        const stats = sources.readCache();
        if (!stats) return;
        this.set({ result: 'hit' }, stats.hits);
        this.set({ result: 'miss' }, stats.misses);
      },
    });
    new Gauge({
      name: 'db_read_cache_entries',
      help: 'Answers kept by the PGlite read cache (all dropped at every write)',
      registers,
      collect() {
        const stats = sources.readCache();
        if (stats) this.set(stats.entries);
      },
    });
    new Gauge({
      name: 'subgraph_fetch_cache_reads_total',
      help: 'Pure subgraph reads answered from the gateway fetch cache (hit) or fetched (miss), since start',
      labelNames: ['subgraph', 'result'],
      registers,
      collect() {
        const { stats } = sources.fetchCache();
        for (const [subgraph, n] of stats.hits) this.set({ subgraph, result: 'hit' }, n);
        for (const [subgraph, n] of stats.misses) this.set({ subgraph, result: 'miss' }, n);
      },
    });
    new Gauge({
      name: 'subgraph_fetch_cache_bytes',
      help: 'Memory held by the gateway fetch cache (keys and answers as text)',
      registers,
      collect() {
        this.set(sources.fetchCache().snapshot().bytes);
      },
    });
    new Gauge({
      name: 'subgraph_ready',
      help: 'Subgraphs in this process ready to serve (1) or degraded (0): a database down, an online store lost or unreachable',
      labelNames: ['subgraph'],
      registers,
      async collect() {
        for (const [subgraph, ready] of Object.entries(await sources.subgraphsReady())) this.set({ subgraph }, ready ? 1 : 0);
      },
    });
    new Gauge({
      name: 'requests_waiting_for_turn',
      help: 'Body parses and operations waiting for their turn of the event loop',
      registers,
      collect() {
        this.set(sources.queued());
      },
    });
  }

  /**
   * Counts and times every answer, labelled by the matched route's template, and serves the metrics at
   * /metrics: for operators and monitoring credentials (`metrics:read`), not for partners.
   */
  instrument(app: FastifyInstance): void {
    app.get('/metrics', { config: { requires: 'metrics:read' } }, async (_request, reply) =>
      reply.type(this.registry.contentType).send(await this.registry.metrics()),
    );
    app.addHook('onResponse', async (request, reply) => {
      const labels = { method: request.method, route: request.routeOptions.url ?? 'unmatched', status: String(reply.statusCode) };
      this.requests.inc(labels);
      this.latency.observe(labels, reply.elapsedTime / 1000);
    });
  }

  /** Counts a read of `subgraph` that joined an identical one in flight. */
  collapsedFetch(subgraph: string): () => void {
    const child = this.collapsed.labels({ subgraph });
    return () => child.inc();
  }

  /** A data source whose fetches are timed and counted by outcome. */
  measured<Context extends object>(name: string, source: GraphQLDataSource<Context>): GraphQLDataSource<Context> {
    const fetches = this.fetches;
    // One label set per outcome, made once (prom-client copies and merges label objects for a timer).
    const ok = { subgraph: name, outcome: 'ok' };
    const errors = { subgraph: name, outcome: 'errors' };
    const failed = { subgraph: name, outcome: 'failed' };
    return {
      async process(options: GraphQLDataSourceProcessOptions<Context>): Promise<GatewayGraphQLResponse> {
        const start = performance.now();
        try {
          const response = await source.process(options);
          fetches.observe(response.errors && response.errors.length > 0 ? errors : ok, (performance.now() - start) / 1000);
          return response;
        } catch (error) {
          fetches.observe(failed, (performance.now() - start) / 1000);
          throw error;
        }
      },
    };
  }
}
