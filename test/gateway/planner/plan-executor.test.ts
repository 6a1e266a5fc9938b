import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FEDERATED_QUERY, mixRequests, PAGING_QUERY, SHALLOW_QUERY } from '../../../bench/gateway/workloads.js';
import { setCompiledSubgraphExecution, subgraphExecutionCounts } from '../../../gateway/sources/in-process-data-source.js';
import { executionCounts, installCompiledExecution } from '../../../gateway/planner/plan-executor.js';
import type { SubgraphModule } from '../../../platform/subgraph.js';
import { gql, hoursFromNow } from '../../support/http.js';
import { withPredictionUnreachable } from '../../support/prediction.js';
import { startTestServer, type Mode } from '../../support/server.js';

/*
 * The compiled plan execution (gateway/planner/plan-executor.ts) answers every request as @apollo/gateway's own
 * execution does, and subgraphs called in process answer compiled (graphql-jit) as with graphql-js's
 * `execute`: the same bodies, byte for byte, for the bench's operations, skip/include, introspection
 * inside a query, subgraph validation errors, a subgraph that cannot be reached (UPSTREAM_UNAVAILABLE) and
 * a query shaped by authorization. Each request is sent once per combination, against the same server.
 */

const OPERATOR = 'plan-operator-key-0000001';
const PARTNER = 'plan-partner-key-00000001';

interface Case {
  name: string;
  query: string;
  variables?: Record<string, unknown>;
  key?: string;
}

function cases(bookingId: string): Case[] {
  const mix = mixRequests(1).filter((_, i) => i % 9 === 0);
  return [
    { name: 'federated ledger', query: FEDERATED_QUERY },
    { name: 'fleet summary', query: SHALLOW_QUERY },
    { name: 'ledger page', query: PAGING_QUERY, variables: { after: null } },
    ...mix.map((r, i) => {
      const body = JSON.parse(r.body!) as { query: string; variables?: Record<string, unknown> };
      const variables = body.variables?.['id'] === 'BK-000001' ? { ...body.variables, id: bookingId } : body.variables;
      return { name: `mix ${i}`, query: body.query, ...(variables ? { variables } : {}) };
    }),
    {
      name: 'skip and include, with a default',
      query: `query($s: Boolean = true, $i: Boolean!) { fleetSummary { total @skip(if: $s) available @include(if: $i) }
        booking(id: "${bookingId}") @include(if: $i) { id machines { id } } }`,
      variables: { i: true },
    },
    { name: 'introspection inside a query', query: `{ __typename t: __type(name: "Booking") { name fields { name } } fleetSummary { __typename total } }` },
    { name: 'a booking that does not exist', query: `{ booking(id: "BK-NONE") { id deliveryForecast { q50Minutes } } }` },
    {
      name: 'a subgraph validation error',
      query: `query($input: TravelInput!) { predictTravelTime(input: $input) { q50Minutes } fleetSummary { total } }`,
      variables: {
        input: {
          distanceKm: -4,
          originDensity: 2,
          destinationDensity: 0.5,
          roadType: 'URBAN',
          weather: 'CLEAR',
          traffic: 'FREE_FLOW',
          publicHoliday: false,
          peakHour: false,
          hourSin: 0,
          hourCos: 1,
          daySin: 0,
          dayCos: 1,
        },
      },
    },
    {
      name: 'fields the principal may not use',
      query: `query($id: ID!) { booking(id: $id) { id deliveryForecast { q50Minutes } status } machine(id: "EQ-005") { id } }`,
      variables: { id: bookingId },
      key: PARTNER,
    },
  ];
}

/**
 * The case's body with the gateway's stock execution and graphql-js in the subgraphs, then with each
 * compiled execution on its own and both (subgraphs called in process only; a distributed gateway calls
 * subgraph servers).
 */
async function everyWay(url: string, c: Case): Promise<{ stock: string; others: string[] }> {
  const send = async (plans: boolean, subgraphs: boolean) => {
    installCompiledExecution(plans);
    setCompiledSubgraphExecution(subgraphs);
    const res = await gql(url, c.query, c.variables ?? {}, { 'x-api-key': c.key ?? OPERATOR });
    return JSON.stringify({ status: res.status, data: res.data, errors: res.errors });
  };
  const stock = await send(false, false);
  const others = [await send(true, false), await send(false, true), await send(true, true)];
  return { stock, others };
}

describe('compiled plan execution answers as @apollo/gateway does', () => {
  const dir = mkdtempSync(join(tmpdir(), 'plan-executor-'));
  const keys = join(dir, 'keys.json');
  writeFileSync(keys, JSON.stringify([{ key: PARTNER, principal: 'plan-partner', tenant: 'partner', scopes: ['rental:read', 'rental:book'] }]));
  // No fetch cache: every way of a case must reach the subgraphs, not an answer kept from the way before.
  // Nothing kept between requests (pure answers, state reads): both executions fetch every answer themselves.
  const env = {
    API_KEYS_FILE: keys,
    API_KEYS: OPERATOR,
    PRINCIPAL_SECRET: 'plan-principal-secret-0123456789abcdef',
    GATEWAY_FETCH_CACHE_MB: '0',
    STATE_CACHE_MB: '0',
  };
  afterAll(() => {
    installCompiledExecution(true);
    setCompiledSubgraphExecution(true);
    rmSync(dir, { recursive: true, force: true });
  });

  const setups: { name: string; mode: Mode; modules?: readonly SubgraphModule[] }[] = [
    { name: 'one process', mode: 'one-process' },
    { name: 'distributed', mode: 'distributed' },
    { name: 'prediction unreachable', mode: 'one-process', modules: withPredictionUnreachable() },
  ];
  for (const setup of setups) {
    describe(setup.name, () => {
      let url: string;
      let bookingId: string;
      beforeAll(async () => {
        const server = await startTestServer({ mode: setup.mode, env, ...(setup.modules ? { subgraphs: setup.modules } : {}) });
        url = server.url;
        const q = await gql(
          url,
          `mutation($input: CreateQuoteInput!) { createQuote(input: $input) { id } }`,
          {
            input: { machineIds: ['EQ-004'], locationId: 'LOC-002', startTime: hoursFromNow(30), durationHours: 8 },
          },
          { 'x-api-key': OPERATOR },
        );
        expect(q.errors).toBeUndefined();
        const b = await gql(
          url,
          `mutation($q: ID!) { confirmBooking(input: { quoteId: $q, customerName: "Plan BV" }) { id } }`,
          {
            q: q.data!['createQuote'].id,
          },
          { 'x-api-key': OPERATOR },
        );
        expect(b.errors).toBeUndefined();
        bookingId = b.data!['confirmBooking'].id;
      });

      it('the same bodies, request by request', async () => {
        const before = { ...executionCounts };
        const subgraphsBefore = { ...subgraphExecutionCounts };
        const all = cases(bookingId);
        let withErrors = 0;
        for (const c of all) {
          const { stock, others } = await everyWay(url, c);
          for (const [i, other] of others.entries()) expect(other, `${c.name}, way ${i + 1}`).toBe(stock);
          if (stock.includes('"errors":[')) withErrors += 1;
        }
        // Both plan executions ran, twice per case each (the query plans run through the patched seam).
        expect(executionCounts.compiled - before.compiled).toBe(2 * all.length);
        expect(executionCounts.stock - before.stock).toBe(2 * all.length);
        // In one process, subgraph documents ran both ways, as many compiled as by graphql-js.
        const compiled = subgraphExecutionCounts.compiled - subgraphsBefore.compiled;
        const interpreted = subgraphExecutionCounts.interpreted - subgraphsBefore.interpreted;
        if (setup.mode === 'one-process') {
          expect(compiled).toBeGreaterThan(all.length);
          expect(compiled).toBe(interpreted);
        }
        expect(withErrors).toBeGreaterThanOrEqual(setup.name === 'prediction unreachable' ? 4 : 2);
      });
    });
  }
});
