import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTracing, tracingConfigured } from '../../../gateway/observability/tracing.js';
import { hoursFromNow, rest } from '../../support/http.js';
import { modes, startTestServer } from '../../support/server.js';
import { until } from '../../support/wait.js';

interface ExportedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
}

/** An OTLP/HTTP receiver on loopback: what the standard exporter settings point the server at. */
async function otlpReceiver(): Promise<{ url: string; spans: ExportedSpan[]; server: Server }> {
  const spans: ExportedSpan[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.url === '/v1/traces') {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { resourceSpans: { scopeSpans: { spans: ExportedSpan[] }[] }[] };
        for (const r of body.resourceSpans) for (const s of r.scopeSpans) spans.push(...s.spans);
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, spans, server };
}

describe('OpenTelemetry tracing', () => {
  it('is off unless the OTLP exporter settings are given', () => {
    expect(tracingConfigured({})).toBe(false);
    expect(tracingConfigured({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' })).toBe(true);
    expect(tracingConfigured({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://127.0.0.1:4318/v1/traces' })).toBe(true);
    expect(tracingConfigured({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_SDK_DISABLED: 'true' })).toBe(false);
  });

  describe('when configured', () => {
    let receiver: Awaited<ReturnType<typeof otlpReceiver>>;
    let tracing: Awaited<ReturnType<typeof startTracing>>;
    beforeAll(async () => {
      receiver = await otlpReceiver();
      process.env['OTEL_EXPORTER_OTLP_ENDPOINT'] = receiver.url;
      tracing = await startTracing('ops-supergraph');
    });
    afterAll(async () => {
      await tracing?.shutdown();
      delete process.env['OTEL_EXPORTER_OTLP_ENDPOINT'];
      receiver?.server.close();
    });

    it.each(modes)(
      'exports one trace per request, from the caller’s traceparent through the gateway to each subgraph (%s)',
      async (mode) => {
        const server = await startTestServer({ mode });
        const quote = await rest(server.url, 'POST', '/rental/pricing/quote', {
          machine_ids: ['EQ-005'],
          location_id: 'LOC-001',
          start_time: hoursFromNow(40),
          duration_hours: 5,
        });
        expect(quote.status).toBe(200);
        expect((await rest(server.url, 'POST', '/rental/booking/confirm', { quote_id: quote.body['quote_id'], customer_name: 'Trace' })).status).toBe(200);

        const traceId = randomBytes(16).toString('hex');
        const res = await fetch(`${server.url}/graphql`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` },
          body: JSON.stringify({ query: '{ bookings(first: 3) { edges { node { id deliveryForecast { q50Minutes } } } } }' }),
        });
        expect(res.status).toBe(200);
        const body = (await res.json()) as { errors?: unknown };
        expect(body.errors).toBeUndefined();

        await tracing.flush();
        await until(async () => receiver.spans.some((s) => s.traceId === traceId && s.name === 'POST /graphql'), 'the request span at the receiver');
        await tracing.flush();
        const spans = receiver.spans.filter((s) => s.traceId === traceId);
        const names = spans.map((s) => s.name);
        expect(names).toContain('gateway.request');
        expect(names).toContain('gateway.plan');
        const fetches = spans.filter((s) => s.name === 'gateway.fetch');
        expect(fetches.length).toBeGreaterThanOrEqual(2);
        const fetchIds = new Set(fetches.map((s) => s.spanId));
        // Each subgraph's work is a child of a gateway fetch: an in-process execution span, or the subgraph
        // server's own request span across HTTP.
        const subgraphSpans = spans.filter((s) => s.parentSpanId !== undefined && fetchIds.has(s.parentSpanId));
        if (mode === 'one-process') {
          expect(subgraphSpans.map((s) => s.name).sort()).toEqual(expect.arrayContaining(['subgraph prediction', 'subgraph rental']));
        } else {
          expect(subgraphSpans.filter((s) => s.name === 'POST /graphql').length).toBeGreaterThanOrEqual(2);
        }
        // The gateway's own server span is the root under the caller's span.
        const root = spans.filter((s) => s.name === 'POST /graphql' && !spans.some((p) => p.spanId === s.parentSpanId));
        expect(root).toHaveLength(1);
        await server.close();
      },
      180_000,
    );
  });
});
