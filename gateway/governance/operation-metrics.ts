import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Counter, Histogram } from 'prom-client';
import { DEMO_PRINCIPAL } from '../../platform/principal.js';
import { principalKey, type GatewayContext } from '../pipeline/context.js';
import type { OperationPolicy } from '../pipeline/operation-policy.js';

/*
 * What an operator watches per operation, whichever door it came in by: each GraphQL operation's answers by
 * client, operation and outcome (`graphql_operations_total`), their time from the request taken in to the
 * answer leaving (`graphql_operation_duration_seconds`), every error by its catalogue code
 * (`graphql_errors_total`), and the rate limit's refusals (`rate_limit_refusals_total`). One operation
 * policy counts them, so a door that runs the pipeline is counted without being wired to it.
 *
 * Client and operation names are the caller's to choose, so the label sets are bounded: REST routes keep
 * their names (the route table is finite); of the GraphQL operations, the first `maxSeries` pairs of client
 * and operation keep theirs, at most `perPrincipal` of them named by any one principal (the demo principal
 * aside, which is everyone in demo mode), so no caller can take the names from the others; the rest count as
 * `(other)`. Types and codes come from fixed lists.
 */

const BUCKETS = [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Pairs of client and operation named in the labels; the rest count as `(other)`. */
const MAX_OPERATION_SERIES = 500;
/** Pairs one principal may name. */
const MAX_SERIES_PER_PRINCIPAL = 50;
const OTHER = '(other)';
const MAX_LABEL = 64;

type Labels = 'client' | 'operation' | 'type';

export class OperationMetrics {
  private readonly operations: Counter<Labels | 'outcome'>;
  private readonly durations: Histogram<Labels>;
  private readonly errors: Counter<'code'>;
  private readonly named = new Set<string>();
  /** Pairs each principal named first. */
  private readonly namedBy = new Map<string, number>();

  constructor(
    metrics: FastifyInstance['metrics'],
    private readonly maxSeries = MAX_OPERATION_SERIES,
    private readonly perPrincipal = MAX_SERIES_PER_PRINCIPAL,
  ) {
    const registers = [metrics.registry];
    this.operations = new Counter({
      name: 'graphql_operations_total',
      help: 'GraphQL operations answered (every door: HTTP, batches, REST routes, streams, sockets, MCP), by client, operation, type and outcome (ok, or the first error code)',
      labelNames: ['client', 'operation', 'type', 'outcome'],
      registers,
    });
    this.durations = new Histogram({
      name: 'graphql_operation_duration_seconds',
      help: 'Time from an operation taken in to its answer leaving, by client, operation and type',
      labelNames: ['client', 'operation', 'type'],
      buckets: BUCKETS,
      registers,
    });
    this.errors = new Counter({
      name: 'graphql_errors_total',
      help: 'Errors in GraphQL answers, by catalogue code (docs/architecture.md, "Error catalogue")',
      labelNames: ['code'],
      registers,
    });
  }

  /** An operation its door refused before it was read (a document not registered, a request limit): its error's code. */
  refused(code: string): void {
    this.errors.inc({ code });
  }

  /** The policy every execution runs: it counts each answer, and times it from the request taken in. */
  policy(): OperationPolicy {
    return {
      answered: (answer, operation) => {
        const context = operation?.context;
        const type = operation?.operation?.operation ?? 'unknown';
        const labels = this.labelsOf(context, operation?.operation?.name?.value ?? operation?.operationName ?? null, type);
        const codes = (answer.errors ?? []).map((error) => {
          const code = error.extensions?.['code'];
          return typeof code === 'string' ? code : 'INTERNAL_SERVER_ERROR';
        });
        for (const code of codes) this.errors.inc({ code });
        this.operations.inc({ ...labels, outcome: codes[0] ?? 'ok' });
        if (context?.receivedAt !== undefined) this.durations.observe(labels, (performance.now() - context.receivedAt) / 1000);
      },
    };
  }

  /** The labels of an operation, its names bounded (REST routes aside): past the caps, `(other)`. */
  private labelsOf(context: GatewayContext | undefined, operation: string | null, type: string): Record<Labels, string> {
    if (context?.route) return { client: 'rest', operation: context.route, type };
    const clientName = (context?.client.name ?? '(none)').slice(0, MAX_LABEL);
    const operationName = (operation ?? '(anonymous)').slice(0, MAX_LABEL);
    const key = `${clientName}\u0000${operationName}`;
    if (this.named.has(key)) return { client: clientName, operation: operationName, type };
    const principal = context && context.principal !== DEMO_PRINCIPAL ? principalKey(context.principal) : null;
    const byPrincipal = principal === null ? 0 : (this.namedBy.get(principal) ?? 0);
    if (this.named.size >= this.maxSeries || byPrincipal >= this.perPrincipal) return { client: OTHER, operation: OTHER, type };
    this.named.add(key);
    if (principal !== null) this.namedBy.set(principal, byPrincipal + 1);
    return { client: clientName, operation: operationName, type };
  }
}

/**
 * The `operation-metrics` part: the operation counts and times (`app.operationMetrics`, whose policy every
 * execution runs after the answer's errors are bounded) and the rate limit's refusals.
 */
export const operationMetricsPlugin = fp(
  async (app: FastifyInstance) => {
    app.decorate('operationMetrics', new OperationMetrics(app.metrics));
    const limiter = app.rateLimiter;
    app.metrics.gauge({
      name: 'rate_limit_refusals_total',
      help: 'Requests and operations refused by the rate limit (429 RATE_LIMITED), since start',
      collect: (gauge) => gauge.set(limiter.refused),
    });
  },
  { name: 'operation-metrics', fastify: '5.x', dependencies: ['metrics', 'edge-guard'] },
);

declare module 'fastify' {
  interface FastifyInstance {
    /** Operation counts and times by client and operation, errors by code. */
    operationMetrics: OperationMetrics;
  }
}
