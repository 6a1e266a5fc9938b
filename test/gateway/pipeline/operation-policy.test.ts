import { ApolloServer } from '@apollo/server';
import { buildSchema, execute, GraphQLError } from 'graphql';
import { describe, expect, it } from 'vitest';
import { DEMO_PRINCIPAL } from '../../../platform/principal.js';
import { gatewayContextFrom, type GatewayContext } from '../../../gateway/pipeline/context.js';
import { createDirectExecution } from '../../../gateway/pipeline/direct-execution.js';
import { formatGraphQLError } from '../../../gateway/pipeline/graphql-errors.js';
import { policyPlugin, type OperationPolicy } from '../../../gateway/pipeline/operation-policy.js';

/*
 * The two executions of an operation (Apollo Server's pipeline, through `policyPlugin`, for GraphQL clients;
 * the direct execution, for REST routes) run one list of policies: each hook in the same order, with the same
 * operation, and a refusal or a replaced answer comes out the same. The REST = GraphQL suites compare whole
 * answers route by route (test/gateway/rest/rest-equivalence.test.ts); this holds the policies' sequence.
 */

const schema = buildSchema(`
  type Query { hello(name: String!): String! }
  type Mutation { rename(id: ID!, name: String!): String! }
`);
const rootValue = {
  hello: ({ name }: { name: string }) => `hello ${name}`,
  rename: ({ id, name }: { id: string; name: string }) => `${id}=${name}`,
};
const silent = { error: () => undefined };
const formatError = (formatted: Parameters<typeof formatGraphQLError>[0], error: unknown) => formatGraphQLError(formatted, error, silent);

/** A policy that writes down every hook it is asked, and refuses or answers instead when told to. */
function recorder(behaviour: { refuse?: string; answerInstead?: boolean } = {}) {
  const seen: string[] = [];
  const policy: OperationPolicy = {
    started: () => {
      seen.push('started');
      return undefined;
    },
    resolved: (operation) => {
      seen.push(`resolved ${operation.operation?.operation} ${JSON.stringify(operation.variables)} ${operation.context.principal.id}`);
      if (behaviour.refuse) throw new GraphQLError(behaviour.refuse, { extensions: { code: 'FORBIDDEN' } });
    },
    answerInstead: () => {
      seen.push('answerInstead');
      return behaviour.answerInstead ? { status: 400, errors: [{ message: 'replaced', extensions: { code: 'BAD_USER_INPUT' } }] } : null;
    },
    answered: (answer, operation) => {
      seen.push(
        `answered ${JSON.stringify({ data: answer.data, errors: answer.errors?.map((e) => [e.message, e.extensions?.['code']]) })} ${operation ? 'resolved' : 'unresolved'}`,
      );
    },
  };
  return { seen, policy };
}

async function bothDoors(query: string, variables: Record<string, unknown>, behaviour: Parameters<typeof recorder>[0] = {}) {
  const context = (): GatewayContext => gatewayContextFrom({}, DEMO_PRINCIPAL);
  const viaApollo = recorder(behaviour);
  const apollo = new ApolloServer<GatewayContext>({ schema, rootValue, plugins: [policyPlugin([viaApollo.policy])], formatError });
  await apollo.start();
  const response = await apollo.executeOperation({ query, variables }, { contextValue: context() });
  await apollo.stop();
  if (response.body.kind !== 'single') throw new Error('a single answer was expected');
  const { data, errors } = response.body.singleResult;

  const viaDirect = recorder(behaviour);
  const direct = createDirectExecution({
    policies: [viaDirect.policy],
    served: () => ({
      schema,
      executor: async (request) =>
        execute({ schema, document: request.document, rootValue, variableValues: request.request.variables ?? {}, contextValue: request.context }),
    }),
    formatError,
    maxTokens: 1000,
    logger: { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined },
  });
  const answer = await direct.operation(query, variables, context());
  return {
    apollo: { seen: viaApollo.seen, data: data ?? null, errors: errors ?? [] },
    direct: { seen: viaDirect.seen, data: answer.data ?? null, errors: answer.errors ?? [] },
  };
}

describe('one list of operation policies, run alike by both executions', () => {
  it('asks each hook in the same order with the same operation, and answers the same (a query and a mutation)', async () => {
    for (const [query, variables] of [
      ['query Hello($name: String!) { hello(name: $name) }', { name: 'ops' }],
      ['mutation Rename($id: ID!, $name: String!) { rename(id: $id, name: $name) }', { id: 'm-1', name: 'crane' }],
    ] as const) {
      const { apollo, direct } = await bothDoors(query, variables);
      expect(direct).toEqual(apollo);
      expect(apollo.seen).toEqual([
        'started',
        expect.stringMatching(/^resolved (query|mutation) /),
        'answerInstead',
        expect.stringMatching(/^answered .* resolved$/),
      ]);
      expect(apollo.errors).toEqual([]);
    }
  });

  it('a refusal stops the operation on both doors, with the same formatted error, and the answer is still seen', async () => {
    const { apollo, direct } = await bothDoors('query Hello($name: String!) { hello(name: $name) }', { name: 'ops' }, { refuse: 'not you' });
    expect(direct).toEqual(apollo);
    expect(apollo.data).toBeNull();
    expect(apollo.errors).toEqual([{ message: 'not you', extensions: { code: 'FORBIDDEN' } }]);
    expect(apollo.seen).toEqual(['started', expect.stringMatching(/^resolved query /), expect.stringMatching(/^answered .*FORBIDDEN.* resolved$/)]);
  });

  it('an answer given instead of executing is the answer on both doors', async () => {
    const { apollo, direct } = await bothDoors('query Hello($name: String!) { hello(name: $name) }', { name: 'ops' }, { answerInstead: true });
    expect(direct).toEqual(apollo);
    expect(apollo.errors).toEqual([{ message: 'replaced', extensions: { code: 'BAD_USER_INPUT' } }]);
  });
});
