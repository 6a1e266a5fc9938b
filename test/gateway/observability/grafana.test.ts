import { readFileSync } from 'node:fs';
import { parser } from '@prometheus-io/lezer-promql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OperationDefinitionNode } from 'graphql';
import { OperationMetrics } from '../../../gateway/governance/operation-metrics.js';
import { GatewayMetrics } from '../../../gateway/observability/metrics.js';
import type { GatewayContext } from '../../../gateway/pipeline/context.js';
import type { ResolvedOperation } from '../../../gateway/pipeline/operation-policy.js';
import { gql, rest } from '../../support/http.js';
import { startTestServer, type TestServer } from '../../support/server.js';

/*
 * The Grafana dashboard in the repository (gateway/observability/grafana-dashboard.json) against the metrics a
 * running gateway exports: every PromQL expression in it parses, and every metric it names is one the server
 * exports, so renaming a metric breaks this test rather than a team's dashboard.
 */

const DASHBOARD = new URL('../../../gateway/observability/grafana-dashboard.json', import.meta.url);

interface Panel {
  id?: number;
  type: string;
  title: string;
  datasource?: { type: string; uid: string };
  gridPos: { h: number; w: number; x: number; y: number };
  targets?: { expr: string; refId: string; datasource?: { uid: string } }[];
}
interface Dashboard {
  __inputs: { name: string; type: string; pluginId: string }[];
  uid: string;
  title: string;
  panels: Panel[];
  templating: { list: { name: string; query: { query: string } | string }[] };
}

const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as Dashboard;

/** Every PromQL expression of the dashboard: the panels' queries and the variables'. */
function expressions(): string[] {
  const panels = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr));
  const variables = dashboard.templating.list.map((v) => (typeof v.query === 'string' ? v.query : v.query.query));
  return [...panels, ...variables];
}

/** Grafana's variables replaced by values PromQL accepts, so the expression can be parsed as Prometheus would receive it. */
function asPrometheusReceivesIt(expr: string): string {
  return expr
    .replaceAll('$__rate_interval', '1m')
    .replaceAll('$instance', '.*')
    .replace(/^label_values\((\w+), \w+\)$/, '$1');
}

/** The metric names an expression selects, read from its syntax tree; a syntax error throws. */
function metricsOf(expr: string): string[] {
  const text = asPrometheusReceivesIt(expr);
  const names: string[] = [];
  const tree = parser.parse(text);
  tree.iterate({
    enter(node) {
      if (node.type.isError) throw new Error(`${expr}: a syntax error at ${node.from}`);
      if (node.name === 'VectorSelector') {
        const identifier = node.node.getChild('Identifier');
        if (identifier) names.push(text.slice(identifier.from, identifier.to));
      }
    },
  });
  return names;
}

/** The metric families in a Prometheus text exposition, with their types. */
function exported(text: string): Map<string, string> {
  return new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
}

/** The family a series name belongs to: a histogram's `_bucket`, `_count` and `_sum` are its own. */
function familyOf(name: string, families: Map<string, string>): string | undefined {
  if (families.has(name)) return name;
  const base = name.replace(/_(bucket|count|sum)$/, '');
  return families.get(base) === 'histogram' || families.get(base) === 'summary' ? base : undefined;
}

describe('the Grafana dashboard', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ env: { STATE_CACHE_MB: '16' } });
  });
  afterAll(async () => server?.close());

  it('is importable as is: one Prometheus data source input, every panel on it, ids unique, on the 24-column grid', () => {
    expect(dashboard.__inputs).toEqual([expect.objectContaining({ name: 'DS_PROMETHEUS', type: 'datasource', pluginId: 'prometheus' })]);
    expect(dashboard.uid).toMatch(/^[a-z0-9-]{1,40}$/);
    const ids = dashboard.panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const panel of dashboard.panels) {
      expect(panel.gridPos.x + panel.gridPos.w, panel.title).toBeLessThanOrEqual(24);
      if (panel.type === 'row') continue;
      expect(panel.datasource, panel.title).toEqual({ type: 'prometheus', uid: '${DS_PROMETHEUS}' });
      expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
      for (const target of panel.targets ?? []) expect(target.datasource?.uid, panel.title).toBe('${DS_PROMETHEUS}');
    }
  });

  it('every PromQL expression parses, and every metric it names is exported by a running gateway', async () => {
    // Operations of each kind first, so the families with labels have series too.
    expect((await gql(server.url, 'query Fleet { fleetSummary { total } }', {}, { 'apollographql-client-name': 'grafana-test' })).errors).toBeUndefined();
    expect((await gql(server.url, '{ fleetSummary { nothingHere } }')).errors?.[0]?.extensions?.['code']).toBe('GRAPHQL_VALIDATION_FAILED');
    expect((await rest(server.url, 'GET', '/rental/fleet/summary')).status).toBe(200);
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    const families = exported(metrics);
    const named = new Set(expressions().flatMap(metricsOf));
    const missing = [...named].filter((name) => familyOf(name, families) === undefined);
    expect(missing).toEqual([]);
    // What the dashboard is for: each of these is drawn.
    for (const name of [
      'graphql_operations_total',
      'graphql_operation_duration_seconds_bucket',
      'graphql_errors_total',
      'rate_limit_refusals_total',
      'subgraph_fetch_duration_seconds_bucket',
      'websocket_connections',
      'websocket_results_delivered_total',
      'http_stream_results_delivered_total',
      'event_relay_lag_seconds',
      'state_cache_reads_total',
      'db_pool_connections',
    ]) {
      expect(named, name).toContain(name);
    }
    // The check finds what it is for: a name the server does not export, and a broken expression.
    expect(familyOf('graphql_operations_totals', families)).toBeUndefined();
    expect(() => metricsOf('sum(rate(http_requests_total[1m])')).toThrow(/syntax error/);
  });

  it('counts operations by client and operation, every door alike, and errors by code, refusals at the intake included', async () => {
    await gql(server.url, 'query Fleet { fleetSummary { total } }', {}, { 'apollographql-client-name': 'grafana-test' });
    await gql(server.url, '{ fleetSummary { nothingHere } }');
    await rest(server.url, 'GET', '/rental/fleet/summary');
    // Refused at the intake, before the operation is read: counted by its code too.
    const aliases = Array.from({ length: 20 }, (_, i) => `a${i}: fleetSummary { total }`).join(' ');
    expect((await gql(server.url, `{ ${aliases} }`)).errors?.[0]?.extensions?.['code']).toBe('ALIAS_LIMIT_EXCEEDED');
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    const series = (name: string) => metrics.split('\n').filter((line) => line.startsWith(`${name}{`));
    expect(series('graphql_operations_total')).toContainEqual(
      expect.stringMatching(/client="grafana-test",operation="Fleet",type="query",outcome="ok"\} [2-9]/),
    );
    expect(series('graphql_operations_total')).toContainEqual(
      expect.stringMatching(/client="rest",operation="GET \/rental\/fleet\/summary",type="query",outcome="ok"\} [1-9]/),
    );
    expect(series('graphql_errors_total')).toContainEqual(expect.stringMatching(/code="GRAPHQL_VALIDATION_FAILED"\} [1-9]/));
    expect(series('graphql_errors_total')).toContainEqual(expect.stringMatching(/code="ALIAS_LIMIT_EXCEEDED"\} 1$/));
    expect(series('graphql_operation_duration_seconds_count')).toContainEqual(
      expect.stringMatching(/client="grafana-test",operation="Fleet",type="query"\} [2-9]/),
    );
  });
});

describe('operation metrics', () => {
  it('keep their label sets bounded: REST routes named, 500 pairs of client and operation, 50 named by any one principal', async () => {
    const metrics = new GatewayMetrics();
    const policy = new OperationMetrics(metrics).policy();
    const answer = (tenant: string, client: string, name: string, route?: string) => {
      const context = {
        headers: {},
        principal: { id: 'p', tenant, scopes: [] },
        client: { name: client, version: null },
        receivedAt: performance.now(),
        ...(route ? { route } : {}),
      } as GatewayContext;
      const operation = {
        operation: { operation: 'query', name: { value: name } } as unknown as OperationDefinitionNode,
        operationName: name,
        context,
      } as unknown as ResolvedOperation;
      policy.answered!({ headers: { set: () => undefined } }, operation);
    };
    for (let i = 0; i < 60; i++) answer('tenant-a', 'app-a', `Op${i}`);
    for (let i = 0; i < 3; i++) answer('tenant-b', 'app-b', `Op${i}`);
    for (let i = 0; i < 60; i++) answer('tenant-a', 'app-a', 'ignored', `GET /route/${i}`);
    const text = await metrics.registry.metrics();
    const series = text.split('\n').filter((line) => line.startsWith('graphql_operations_total{'));
    expect(series.filter((line) => line.includes('client="app-a"'))).toHaveLength(50);
    expect(series.find((line) => line.includes('client="(other)"'))).toMatch(/ 10$/);
    expect(series.filter((line) => line.includes('client="app-b"'))).toHaveLength(3);
    expect(series.filter((line) => line.includes('client="rest"'))).toHaveLength(60);
  });
});
