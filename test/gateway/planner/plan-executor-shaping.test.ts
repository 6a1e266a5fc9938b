import {
  isCompositeType,
  isEnumType,
  isListType,
  isNonNullType,
  operationFromDocument,
  Supergraph,
  type NamedType,
  type Schema,
  type SelectionSet,
  type Type,
} from '@apollo/federation-internals';
import { GraphQLError, parse } from 'graphql';
import { describe, expect, it } from 'vitest';
import { FEDERATED_QUERY, PAGING_QUERY, SHALLOW_QUERY } from '../../../bench/gateway/workloads.js';
import { stockComputeResponse as computeResponse } from '../../../gateway/planner/apollo-seam.js';
import { compileOperation } from '../../../gateway/planner/result-shaping.js';
import { createAuthorizer } from '../../../gateway/security/authorization.js';
import { readCheckedInSupergraph } from '../../../schema/supergraph-file.js';

/*
 * The compiled shaping (gateway/planner/result-shaping.ts) against @apollo/gateway's own `computeResponse`, on the
 * same merged subgraph answers: valid ones and every kind of broken one a subgraph can send (nulls where
 * the schema owes a value, unknown or wrong __typenames, values of the wrong kind, missing keys, lists
 * where objects belong). Data, error messages, paths and codes, and thrown assertions must be the same.
 */

// The supergraph the gateway plans on (its SECURITY features are the gateway's own, not the planner's).
const apiSchema: Schema = Supergraph.build(createAuthorizer(readCheckedInSupergraph()).plannerSdl).apiSchema();

const OPERATIONS: { name: string; query: string; variables: Record<string, unknown>[] }[] = [
  { name: 'federated ledger', query: FEDERATED_QUERY, variables: [{}] },
  { name: 'fleet summary', query: SHALLOW_QUERY, variables: [{}] },
  { name: 'ledger page', query: PAGING_QUERY, variables: [{ after: null }] },
  {
    name: '@skip / @include, literal and variables with defaults',
    query: `query Q($s: Boolean = true, $i: Boolean!) { fleetSummary { total @skip(if: $s) available @include(if: $i)
      reserved @skip(if: false) inUse @include(if: false) } bookings(first: 2) @include(if: $i) { totalCount } }`,
    variables: [{ i: true }, { s: false, i: false }, { s: true, i: true }, { i: 'yes' }, {}],
  },
  {
    name: 'aliases, __typename and fragments merging into one object',
    query: `query { a: fleetSummary { t: __typename __typename total } fleetSummary { ...F ... on FleetSummary { available } }
      bookings(first: 3) { edges { node { id ...N machines { id } } node { machines { name } bill { currency } } } } }
      fragment F on FleetSummary { total utilization }
      fragment N on Booking { status machines { category } }`,
    variables: [{}],
  },
  {
    name: 'response names that Object.prototype has (__proto__, constructor, toString)',
    query: `query { __proto__: fleetSummary { total constructor: available } b: fleetSummary { __proto__: total toString: reserved } c: fleetSummary { total } }`,
    variables: [{}],
  },
];

/** A deterministic generator (mulberry32). */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A merged answer for `selectionSet`: mostly valid, broken at `brokenRate` of the places. */
function answer(selectionSet: SelectionSet, rnd: () => number, brokenRate: number, depth = 0): Record<string, unknown> {
  const out: Record<string, unknown> = Object.create(null);
  const typename = selectionSet.parentType.name;
  const broken = () => rnd() < brokenRate;
  if (broken()) {
    const choices = [undefined, 'NoSuchType', 'String', 'Query', typename, 42];
    const t = choices[Math.floor(rnd() * choices.length)];
    if (t !== undefined) out['__typename'] = t;
  } else if (rnd() < 0.5) {
    out['__typename'] = typename;
  }
  for (const selection of selectionSet.selections()) {
    if (selection.kind === 'FragmentSelection') {
      Object.assign(out, answer(selection.selectionSet, rnd, brokenRate, depth));
      continue;
    }
    const field = selection.element;
    if (field.name === '__typename') {
      if (broken()) out[field.responseName()] = rnd() < 0.5 ? 'NoSuchType' : null;
      continue;
    }
    if (broken() && rnd() < 0.3) continue; // the key missing
    out[field.responseName()] = value(field.definition.type!, selection.selectionSet, rnd, brokenRate, depth + 1);
  }
  return out;
}

function value(type: Type, selectionSet: SelectionSet | undefined, rnd: () => number, brokenRate: number, depth: number): unknown {
  const broken = () => rnd() < brokenRate;
  if (isNonNullType(type)) return broken() ? null : value(type.ofType, selectionSet, rnd, brokenRate, depth);
  if (broken() && rnd() < 0.3) return null;
  if (isListType(type)) {
    if (broken() && rnd() < 0.2) return { not: 'a list' };
    const n = depth > 4 ? 0 : Math.floor(rnd() * 3);
    return Array.from({ length: n }, () => value(type.ofType, selectionSet, rnd, brokenRate, depth + 1));
  }
  if (isCompositeType(type)) {
    if (broken() && rnd() < 0.1) return rnd() < 0.5 ? 'not an object' : [];
    return answer(selectionSet!, rnd, brokenRate, depth);
  }
  const named = type as NamedType;
  if (broken()) {
    const wrong = [true, 1.5, 7, 'text', 'ACTIVE', Number.NaN, { o: 1 }, -0, 2 ** 53];
    return wrong[Math.floor(rnd() * wrong.length)];
  }
  if (isEnumType(named)) return named.values[Math.floor(rnd() * named.values.length)]!.name;
  switch (named.name) {
    case 'Int':
      return Math.floor(rnd() * 100);
    case 'Float':
      return rnd() * 100;
    case 'Boolean':
      return rnd() < 0.5;
    case 'ID':
      return rnd() < 0.5 ? 'BK-1' : 7;
    default:
      return 'x';
  }
}

type Outcome = { data: unknown; text: string; errors: { message: string; path: unknown; code: unknown }[] } | { threw: string };

function outcome(run: () => { data: unknown; errors: GraphQLError[] }): Outcome {
  try {
    const { data, errors } = run();
    return {
      data: JSON.parse(JSON.stringify(data)) as unknown,
      text: JSON.stringify(data),
      errors: errors.map((e) => ({ message: e.message, path: e.path, code: e.extensions['code'] })),
    };
  } catch (error) {
    return { threw: (error as Error).message };
  }
}

describe('compiled result shaping answers as @apollo/gateway computeResponse does', () => {
  for (const op of OPERATIONS) {
    it(`${op.name}: valid answers and 400 broken ones`, () => {
      const operation = operationFromDocument(apiSchema, parse(op.query), { validate: false });
      const compiled = compileOperation(operation);
      const introspect = () => ({ introspected: true });
      let differentErrors = 0;
      let threw = 0;
      for (let k = 0; k < 401; k++) {
        const rnd = random(1000 + k);
        const input = answer(operation.selectionSet, rnd, k === 0 ? 0 : 0.02 + (k % 10) * 0.03);
        for (const variables of op.variables) {
          const stock = outcome(() => computeResponse({ operation, variables, input, introspectionHandling: introspect }));
          const ours = outcome(() => compiled.shape(input, variables, introspect));
          expect(ours, `input ${k} ${JSON.stringify(variables)}`).toEqual(stock);
          if ('threw' in stock) threw += 1;
          else if (stock.errors.length > 0) differentErrors += 1;
        }
      }
      // The broken answers reached the error paths, not only the happy one.
      expect(differentErrors).toBeGreaterThan(50);
      if (op.name.startsWith('@skip')) expect(threw).toBeGreaterThan(0);
    });
  }
});

describe('the seam to @apollo/gateway', () => {
  it('is written against the version package.json pins, and a start with another one fails naming what to revisit', async () => {
    const { PINNED_APOLLO_GATEWAY, checkApolloGatewayVersion } = await import('../../../gateway/planner/apollo-seam.js');
    const { readFileSync } = await import('node:fs');
    const pinned = (JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { dependencies: Record<string, string> })
      .dependencies['@apollo/gateway'];
    expect(pinned).toBe(PINNED_APOLLO_GATEWAY);
    expect(() => checkApolloGatewayVersion()).not.toThrow();
    expect(() => checkApolloGatewayVersion('2.15.0')).toThrow(/@apollo\/gateway 2\.15\.0 is installed.*apollo-seam\.ts\) follow 2\.14\.4/);
  });
});
