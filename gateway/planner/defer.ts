import type { ApolloGateway } from '@apollo/gateway';
import { DirectiveLocation, GraphQLBoolean, GraphQLDirective, GraphQLNonNull, GraphQLSchema, GraphQLString } from 'graphql';

/*
 * `@defer` as the incremental-delivery specification declares it. graphql-js 16 does not define it and
 * `@apollo/gateway` does not put it in the schema it validates against, so a client that marks slow
 * fragments with it (Apollo Client, Relay, urql do) would be refused with "Unknown directive". The served
 * schema declares it; the planner plans deferred fragments and the executor delivers them
 * (gateway/planner/plan-executor.ts, gateway/planner/incremental.ts).
 */

const GraphQLDeferDirective = new GraphQLDirective({
  name: 'defer',
  description: 'Marks a fragment as lower priority: the server may deliver it after the rest of the answer, or with it.',
  locations: [DirectiveLocation.FRAGMENT_SPREAD, DirectiveLocation.INLINE_FRAGMENT],
  args: {
    if: { type: new GraphQLNonNull(GraphQLBoolean), defaultValue: true, description: 'Deferred when true (the default).' },
    label: { type: GraphQLString, description: 'Names the deferred payload.' },
  },
});

const withDefer = new WeakMap<GraphQLSchema, GraphQLSchema>();

/** `schema` with `@defer` declared (the same object for the same schema). */
export function schemaWithDefer(schema: GraphQLSchema): GraphQLSchema {
  if (schema.getDirective('defer')) return schema;
  let extended = withDefer.get(schema);
  if (!extended) {
    const config = schema.toConfig();
    extended = new GraphQLSchema({ ...config, directives: [...config.directives, GraphQLDeferDirective] });
    withDefer.set(schema, extended);
  }
  return extended;
}

type ServedGateway = Pick<ApolloGateway, 'load' | 'onSchemaLoadOrUpdate' | 'stop'>;

/** `gateway` serving a schema that declares `@defer` (see above). */
export function deferAccepting(gateway: ServedGateway): ServedGateway {
  return {
    load: (options) => gateway.load(options),
    onSchemaLoadOrUpdate: (callback) => gateway.onSchemaLoadOrUpdate((context) => callback({ ...context, apiSchema: schemaWithDefer(context.apiSchema) })),
    stop: () => gateway.stop(),
  };
}
