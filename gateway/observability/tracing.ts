import { createServer, type IncomingMessage, type Server, type ServerOptions, type ServerResponse } from 'node:http';
import { context, propagation, SpanKind, SpanStatusCode, trace, type Span } from '@opentelemetry/api';
import type { SpanExporter } from '@opentelemetry/sdk-trace-base';
import type { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import type { FastifyInstance } from 'fastify';

/*
 * OpenTelemetry tracing, off unless configured with the standard OTLP exporter settings
 * (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, with OTEL_EXPORTER_OTLP_HEADERS,
 * OTEL_SERVICE_NAME and the rest read by the exporter itself; OTEL_SDK_DISABLED=true turns it off).
 * When on, every HTTP request is a server span (W3C traceparent honoured), @apollo/gateway's own spans
 * (request, validate, plan, execute, fetch) sit under it, a remote subgraph call carries the trace on,
 * and each subgraph execution is a span of its own, in one process and in distributed mode alike.
 */

const TRACER = 'ops-supergraph';
let provider: NodeTracerProvider | null = null;

/** Whether a tracer provider is installed (then servers are built with traced request handlers). */
export const tracingEnabled = () => provider !== null;

/** Whether the environment asks for tracing. */
export function tracingConfigured(env: Record<string, string | undefined> = process.env): boolean {
  if (env['OTEL_SDK_DISABLED']?.toLowerCase() === 'true') return false;
  return Boolean(env['OTEL_EXPORTER_OTLP_ENDPOINT'] || env['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT']);
}

/**
 * Installs the process's tracer provider: OTLP over HTTP from the environment, or `exporter` (tests).
 * Call before the servers are built. Resolves spans still buffered on `shutdown`. The SDK and the exporter
 * load here, only when tracing is on (a tenth of a second of every start otherwise, docs/performance.md).
 */
export async function startTracing(serviceName: string, given?: SpanExporter): Promise<{ flush(): Promise<void>; shutdown(): Promise<void> }> {
  const [{ OTLPTraceExporter }, { resourceFromAttributes }, { BatchSpanProcessor }, { NodeTracerProvider }] = await Promise.all([
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/sdk-trace-base'),
    import('@opentelemetry/sdk-trace-node'),
  ]);
  const exporter = given ?? new OTLPTraceExporter();
  const name = process.env['OTEL_SERVICE_NAME'] || serviceName;
  const installed = new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': name }),
    spanProcessors: [new BatchSpanProcessor(exporter, { scheduledDelayMillis: 500 })],
  });
  installed.register();
  provider = installed;
  return {
    flush: () => installed.forceFlush(),
    async shutdown() {
      await installed.shutdown();
      if (provider === installed) provider = null;
    },
  };
}

/** Spans of this project (subgraph executions), beside Apollo's. */
export const tracer = () => trace.getTracer(TRACER);

/**
 * fastify's `serverFactory` when tracing is on: each request runs inside a server span whose parent is the
 * caller's traceparent, so everything the request starts (Apollo's spans, subgraph calls) joins its trace.
 */
export function tracedServerFactory(options: ServerOptions): (handler: (req: IncomingMessage, res: ServerResponse) => void) => Server {
  return (handler) =>
    createServer(options, (req, res) => {
      const parent = propagation.extract(context.active(), req.headers);
      const span = tracer().startSpan(
        `${req.method ?? 'HTTP'}`,
        { kind: SpanKind.SERVER, attributes: { 'http.request.method': req.method ?? '', 'url.path': (req.url ?? '').split('?')[0] ?? '' } },
        parent,
      );
      res.once('close', () => {
        span.setAttribute('http.response.status_code', res.statusCode);
        if (res.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
        span.end();
      });
      context.with(trace.setSpan(parent, span), () => handler(req, res));
    });
}

/** Names each server span after the route that answered it (`POST /graphql`, `GET /rental/bookings`). */
export function nameSpansByRoute(app: FastifyInstance): void {
  app.addHook('onResponse', async (request) => {
    const span: Span | undefined = trace.getSpan(context.active());
    if (span) {
      const route = request.routeOptions.url ?? 'unmatched';
      span.updateName(`${request.method} ${route}`);
      span.setAttribute('http.route', route);
    }
  });
}

/** Adds the active trace to an outgoing request's headers (a remote subgraph call). */
export function injectTrace(headers: { set(name: string, value: string): void }): void {
  propagation.inject(context.active(), headers, { set: (carrier, key, value) => carrier.set(key, value) });
}
