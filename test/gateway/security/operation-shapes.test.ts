import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditEntry } from '../../../gateway/security/audit.js';
import { createAuthorizer } from '../../../gateway/security/authorization.js';
import { operationCost } from '../../../gateway/security/rate-limit.js';
import type { Principal } from '../../../platform/principal.js';
import { readCheckedInSupergraph } from '../../../schema/supergraph-file.js';
import { gql, hoursFromNow } from '../../support/http.js';
import { startTestServer } from '../../support/server.js';

/*
 * The fields an operation runs are collected one way (gateway/security/operation-fields.ts) for the audit line, the
 * rate-limit charge and authorization: a field selected directly, in an inline fragment, in a named
 * fragment, or under @skip/@include is counted by all three alike. And a refusal names the principal that
 * asked, never one that asked the same thing before.
 */

const authorizer = createAuthorizer(readCheckedInSupergraph());
const fleetOnly: Principal = { id: 'fleet-reader', tenant: 't', scopes: ['fleet:read'] };

/** One mutation in every shape a client can select it. */
const SHAPES: Record<string, string> = {
  direct: 'mutation M($i: StartQuantumRunInput!) { startQuantumRun(input: $i) { id } }',
  inline: 'mutation M($i: StartQuantumRunInput!) { ... on Mutation { startQuantumRun(input: $i) { id } } }',
  named: 'mutation M($i: StartQuantumRunInput!) { ...Run } fragment Run on Mutation { startQuantumRun(input: $i) { id } }',
  nested: 'mutation M($i: StartQuantumRunInput!) { ... { ...Run } } fragment Run on Mutation { ... on Mutation { startQuantumRun(input: $i) { id } } }',
  included: 'mutation M($i: StartQuantumRunInput!, $on: Boolean!) { startQuantumRun(input: $i) @include(if: $on) { id } }',
};

describe('one collection of the fields that run', () => {
  it.each(Object.entries(SHAPES))('the rate-limit charge counts a heavy field selected %s', (_shape, text) => {
    expect(operationCost(parse(text), 'M', { on: true })).toBe(21);
  });

  it('a field that does not run costs nothing: @skip(if: true), @include(if: false), by literal or variable', () => {
    expect(operationCost(parse('mutation { startQuantumRun(input: {}) @skip(if: true) { id } }'))).toBe(1);
    expect(operationCost(parse(SHAPES['included']!), 'M', { on: false })).toBe(1);
    expect(operationCost(parse('mutation M($s: Boolean!) { ... @skip(if: $s) { startQuantumRun(input: {}) { id } } }'), 'M', { s: true })).toBe(1);
    expect(operationCost(parse('mutation M($s: Boolean!) { ... @skip(if: $s) { startQuantumRun(input: {}) { id } } }'), 'M', { s: false })).toBe(21);
  });

  it.each(Object.entries(SHAPES))('authorization denies a field selected %s', (_shape, text) => {
    const denied = authorizer.denials(parse(text), fleetOnly, { on: true }, 'M');
    expect(denied.map((d) => [d.coordinate, d.path])).toEqual([['Mutation.startQuantumRun', ['startQuantumRun']]]);
  });

  it('authorization does not deny a field that does not run; an unknown condition counts as running', () => {
    const text = 'query Q($x: Boolean!) { fleetSummary { total } vesselFleet @include(if: $x) { vessels { mmsi } } }';
    expect(authorizer.denials(parse(text), fleetOnly, { x: false }, 'Q')).toEqual([]);
    expect(authorizer.denials(parse(text), fleetOnly, { x: true }, 'Q').map((d) => d.coordinate)).toEqual(['Query.vesselFleet']);
    expect(authorizer.denials(parse(text), fleetOnly, {}, 'Q').map((d) => d.coordinate)).toEqual(['Query.vesselFleet']);
  });

  it('the denied path is the response path through fragments, aliases included', () => {
    const text = '{ fleet: fleetSummary { total } ...F } fragment F on Query { ... on Query { runs: quantumRuns { totalCount } } }';
    expect(authorizer.denials(parse(text), fleetOnly).map((d) => d.path)).toEqual([['runs']]);
  });
});

describe('audit, charge and refusal at a running gateway', () => {
  const dir = mkdtempSync(join(tmpdir(), 'shapes-'));
  const audit: AuditEntry[] = [];
  let url: string;
  const A = 'shapes-key-app-a-000001';
  const B = 'shapes-key-app-b-000002';
  beforeAll(async () => {
    const file = join(dir, 'keys.json');
    const scopes = ['fleet:read', 'rental:read'];
    writeFileSync(
      file,
      JSON.stringify([
        { key: A, principal: 'app-a', tenant: 'tenant-a', scopes },
        { key: B, principal: 'app-b', tenant: 'tenant-b', scopes },
        { key: 'shapes-key-booker-000003', principal: 'booker', tenant: 'tenant-a', scopes: ['rental:book', 'rental:read'] },
      ]),
    );
    ({ url } = await startTestServer({ env: { API_KEYS_FILE: file }, audit: (e) => audit.push(e) }));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('a refusal names its own caller, even right after another principal was refused the same operation', async () => {
    const text = 'mutation($i: CreateQuoteInput!) { createQuote(input: $i) { id } }';
    const i = { machineIds: ['EQ-003'], locationId: 'LOC-001', startTime: hoursFromNow(30), durationHours: 2 };
    const first = await gql(url, text, { i }, { 'x-api-key': A });
    const second = await gql(url, text, { i }, { 'x-api-key': B });
    expect([first.status, second.status]).toEqual([403, 403]);
    expect(first.errors?.[0]?.message).toMatch(/^Principal app-a may not/);
    expect(second.errors?.[0]?.message).toMatch(/^Principal app-b may not/);
    expect(second.errors?.[0]?.message).not.toContain('app-a');
  });

  it.each([
    ['inline', 'mutation($i: ConfirmBookingInput!) { ... on Mutation { confirmBooking(input: $i) { id } } }'],
    ['named', 'mutation($i: ConfirmBookingInput!) { ...C } fragment C on Mutation { confirmBooking(input: $i) { id } }'],
  ])('a mutation selected in an %s fragment writes its audit line', async (_shape, text) => {
    const quoteId = 'QT-shapes-unknown';
    const before = audit.length;
    const res = await gql(url, text, { i: { quoteId, customerName: 'Fragment BV' } }, { 'x-api-key': 'shapes-key-booker-000003' });
    expect(res.errors?.[0]?.extensions?.['code']).toBeDefined();
    const lines = audit.slice(before);
    expect(lines).toEqual([
      expect.objectContaining({
        principal: 'booker',
        tenant: 'tenant-a',
        operation: 'confirmBooking',
        target: quoteId,
        outcome: res.errors?.[0]?.extensions?.['code'],
      }),
    ]);
  });
});
