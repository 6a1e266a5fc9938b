import type { GraphQLDataSource, GraphQLDataSourceProcessOptions } from '@apollo/gateway';
import type { GatewayGraphQLResponse } from '@apollo/server-gateway-interface';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/*
 * Prometheus metrics at /metrics (prom-client): what an operator watches. Request counts and latency by
 * route template (never the raw URL, so label values stay few), subgraph fetch times and failures, and
 * the process's own CPU, memory, GC and event-loop lag, here; each part's gauges (the WebSocket
 * connections, slow-consumer closes, the outbox lag, the database pool, the read and fetch caches,
 * requests waiting for their turn) registered by the part that owns what they read (`gauge`).
 */

const LATENCY_BUCKETS = [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** A gauge read at scrape time, registered by the part that owns what it reads. */
export interface GaugeSpec<L extends string = string> {
  name: string;
  help: string;
  labelNames?: readonly L[];
  /** Sets the gauge's values (`set`), or leaves it unchanged (a source unavailable this scrape). */
  collect(gauge: Gauge<L>): void | Promise<void>;
}

/**
 * The registry and the counters every gateway has: requests by route template, subgraph fetches by
 * outcome, collapsed reads, and the process's own CPU, memory, GC and event-loop lag. The gauges of each
 * part (WebSocket connections, the outbox lag, the fetch cache...) are registered by that part (`gauge`).
 */
export class GatewayMetrics {
  readonly registry = new Registry();
  private readonly requests: Counter<'method' | 'route' | 'status'>;
  private readonly latency: Histogram<'method' | 'route' | 'status'>;
  private readonly fetches: Histogram<'subgraph' | 'outcome'>;
  private readonly collapsed: Counter<'subgraph'>;

  constructor() {
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
  }

  /** A gauge of this registry, read at scrape time. */
  gauge<L extends string>(spec: GaugeSpec<L>): void {
    new Gauge<L>({
      name: spec.name,
      help: spec.help,
      labelNames: spec.labelNames ?? [],
      registers: [this.registry],
      collect() {
        return spec.collect(this);
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

/** The `metrics` part: the gateway's registry (`app.metrics`), /metrics, and every answer counted. */
export const metricsPlugin = fp(
  async (app: FastifyInstance) => {
    const metrics = new GatewayMetrics();
    metrics.instrument(app);
    app.decorate('metrics', metrics);
  },
  { name: 'metrics', fastify: '5.x' },
);

declare module 'fastify' {
  interface FastifyInstance {
    /** The gateway's Prometheus registry: a part registers its gauges here (`metrics.gauge`). */
    metrics: GatewayMetrics;
  }
}
