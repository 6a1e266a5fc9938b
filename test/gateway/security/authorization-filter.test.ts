import { buildSchema, execute, getOperationAST, parse, print, type GraphQLError } from 'graphql';
import { describe, expect, it } from 'vitest';
import { filterOperation, shapeAnswer, type FilteredOperation } from '../../../gateway/security/authorization-filter.js';

/*
 * A query with denied fields runs without them and its answer is shaped back to the query as sent: each
 * denied field null with an error at its path, keys in the client's order, nulls propagated as the GraphQL
 * specification says. Checked against graphql-js executing the same schema (the filtered query for what
 * runs, the original for where the keys are).
 */

const schema = buildSchema(`
  type Query { shop: Shop orders: [Order!]! order(id: ID!): Order secret: String! note: String }
  type Shop { name: String owner: String! }
  type Order { id: ID! total: Float secret: String tags: [Tag!] }
  type Tag { label: String! hidden: String! }
`);
const DENIED = new Set(['Query.secret', 'Order.secret', 'Shop.owner', 'Tag.hidden', 'Query.note']);
const deny = (parent: { name: string }, field: { name: { value: string } }) => {
  const coordinate = `${parent.name}.${field.name.value}`;
  return DENIED.has(coordinate) ? { coordinate, needs: 'secret:read' } : null;
};
const rootValue = {
  shop: { name: 'Depot', owner: 'Ada' },
  orders: [
    { id: 'o1', total: 10, secret: 's1', tags: [{ label: 'a', hidden: 'h' }] },
    { id: 'o2', total: 20, secret: 's2', tags: null },
  ],
  order: ({ id }: { id: string }) => ({ id, total: 5, secret: 's', tags: [] }),
  secret: 'top',
  note: 'n',
};

function run(query: string, variables: Record<string, unknown> = {}) {
  const document = parse(query);
  const operation = getOperationAST(document);
  if (!operation) throw new Error('no operation');
  const filtered = filterOperation(schema, document, operation, deny);
  if (!filtered) return { filtered: null, data: undefined, errors: [] as GraphQLError[] };
  const executed = execute({ schema, document: filtered.document, rootValue, variableValues: variables }) as { data: Record<string, unknown> };
  const shaped = shapeAnswer(filtered.shape, executed.data, variables, (path, removal) => ({ path, removal }) as unknown as GraphQLError);
  return { filtered, ...shaped };
}
const paths = (errors: GraphQLError[]) => errors.map((e) => (e as unknown as { path: (string | number)[] }).path);

describe('running a query without its denied fields', () => {
  it('answers each denied field null at its path, in the order selected, list items each', () => {
    const { filtered, data, errors } = run(`{ orders { secret id total } shop { name } note }`);
    expect(print((filtered as FilteredOperation).document)).not.toMatch(/secret|note/);
    expect(data).toEqual({
      orders: [
        { secret: null, id: 'o1', total: 10 },
        { secret: null, id: 'o2', total: 20 },
      ],
      shop: { name: 'Depot' },
      note: null,
    });
    expect(Object.keys((data!['orders'] as object[])[0]!)).toEqual(['secret', 'id', 'total']);
    expect(paths(errors)).toEqual([['orders', 0, 'secret'], ['orders', 1, 'secret'], ['note']]);
  });

  it('a selection left empty takes its field with it, answered null with one error naming what is below', () => {
    const { data, errors } = run(`{ note order(id: "x") { secret } shop { name } }`);
    expect(data).toEqual({ note: null, order: null, shop: { name: 'Depot' } });
    expect(paths(errors)).toEqual([['note'], ['order']]);
    const removal = (errors[1] as unknown as { removal: { emptied: boolean; denials: { coordinate: string }[] } }).removal;
    expect(removal.emptied).toBe(true);
    expect(removal.denials.map((d) => d.coordinate)).toEqual(['Order.secret']);
  });

  it('a null in a non-null position propagates to the nearest nullable field', () => {
    // Shop.owner is String!: the shop becomes null. Tag.hidden is String! in [Tag!]: the whole list null.
    const { data, errors } = run(`{ shop { name owner } orders { id tags { label hidden } } }`);
    expect(data).toEqual({
      shop: null,
      orders: [
        { id: 'o1', tags: null },
        { id: 'o2', tags: null },
      ],
    });
    expect(paths(errors)).toEqual([
      ['shop', 'owner'],
      ['orders', 0, 'tags', 0, 'hidden'],
    ]);
  });

  it('a removed non-null root field asked for unconditionally nulls everything: the operation is marked for refusal', () => {
    expect(run(`{ secret shop { name } }`).filtered?.certainlyNull).toBe(true);
    expect(run(`query($s: Boolean!) { secret @include(if: $s) shop { name } }`).filtered?.certainlyNull).toBe(false);
    expect(run(`{ note shop { name } }`).filtered?.certainlyNull).toBe(false);
  });

  it('nothing left to run: no operation at all', () => {
    expect(run(`{ note secret }`).filtered).toBeNull();
    expect(run(`{ shop { owner } }`).filtered).toBeNull();
  });

  it('fragments, aliases, repeated keys and @skip/@include are answered as the client selected them', () => {
    const query = `query($hide: Boolean!) {
      first: order(id: "1") { ...O }
      second: order(id: "2") { id }
      second: order(id: "2") { secret }
      third: order(id: "3") { id secret @skip(if: $hide) }
      shop { ... on Shop { owner @include(if: $hide) name } }
    }
    fragment O on Order { id s: secret }`;
    const hidden = run(query, { hide: true });
    expect(hidden.data).toEqual({ first: { id: '1', s: null }, second: { id: '2', secret: null }, third: { id: '3' }, shop: null });
    expect(paths(hidden.errors)).toEqual([
      ['first', 's'],
      ['second', 'secret'],
      ['shop', 'owner'],
    ]);
    const shown = run(query, { hide: false });
    expect(shown.data).toEqual({ first: { id: '1', s: null }, second: { id: '2', secret: null }, third: { id: '3', secret: null }, shop: { name: 'Depot' } });
    expect(paths(shown.errors)).toEqual([
      ['first', 's'],
      ['second', 'secret'],
      ['third', 'secret'],
    ]);
  });

  it('a query with nothing denied is left exactly as it was, its answer untouched', () => {
    const document = parse(`{ shop { name } orders { id } }`);
    const filtered = filterOperation(schema, document, getOperationAST(document)!, deny);
    expect(filtered?.operation.selectionSet).toBe(getOperationAST(document)?.selectionSet);
    const data = { shop: { name: 'Depot' }, orders: [{ id: 'o1' }] };
    const shaped = shapeAnswer(filtered!.shape, data, {}, () => expect.unreachable());
    expect(shaped.data).toBe(data);
    expect(shaped.errors).toEqual([]);
  });
});
