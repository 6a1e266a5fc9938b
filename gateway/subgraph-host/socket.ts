import { closeBeforeDrain } from '../http/app.js';
import type { Server, IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { GraphQLError, type ExecutionArgs, type FormattedExecutionResult } from 'graphql';
import type { SubscribePayload } from 'graphql-ws';
import { useServer } from 'graphql-ws/use/ws';
import { WebSocketServer, type WebSocket } from 'ws';
import type { HttpConfig } from '../http/config.js';
import type { SubscriptionsConfig } from '../subscriptions/config.js';
import { PRINCIPAL_HEADER, subscriptionBody, type Principal, type PrincipalSigner } from '../../platform/principal.js';
import type { SubgraphInstance } from '../../platform/subgraph.js';
import { gatewayContextFrom, type GatewayContext } from '../pipeline/context.js';
import { resolvePolicies } from '../pipeline/operation-policy.js';
import type { Pipeline } from '../pipeline/pipeline.js';
import { serializeSubgraphError } from '../sources/subgraph-errors.js';
import { CloseCode } from '../subscriptions/close-codes.js';

/** The `subgraph-socket` part: the subgraph's graphql-transport-ws, closed before the server closes. */
export const subgraphSocketPlugin = fp(
  async (app: FastifyInstance, options: SubgraphSocketOptions) => {
    const socket = attachSubgraphSocket(app.server, options);
    closeBeforeDrain(app, 'subgraph socket', () => socket.close());
  },
  { name: 'subgraph-socket', fastify: '5.x', dependencies: ['signed-caller'] },
);

export interface SubgraphSocketOptions {
  config: Pick<HttpConfig & SubscriptionsConfig, 'BODY_LIMIT_BYTES' | 'WS_CONNECTION_INIT_TIMEOUT_MS' | 'WS_KEEPALIVE_MS'>;
  subgraph: string;
  instance: SubgraphInstance;
  signer: PrincipalSigner;
  /** The subgraph's operation pipeline (gateway/pipeline/pipeline.ts): its intake and checks run on every operation. */
  pipeline: Pipeline;
  onInternalError: (error: unknown) => void;
}

/**
 * graphql-transport-ws at a subgraph server's /graphql, for its gateway's subscriptions. An operation acts
 * for the principal the gateway signed into it, and for nothing else (a connection's own credential is not
 * read); it passes the subgraph's operation pipeline (the limits, validation, authorization by its own SDL)
 * before it runs.
 */
function attachSubgraphSocket(server: Server, options: SubgraphSocketOptions): { close(): Promise<void> } {
  const { config, instance, signer, onInternalError } = options;
  const module = { name: options.subgraph };
  /** Whom an operation on a socket acts for: what the gateway signed into it. */
  const operationPrincipal = (payload: SubscribePayload): Principal | null => {
    const header = payload.extensions?.[PRINCIPAL_HEADER];
    const call = { subgraph: module.name, method: 'SUBSCRIBE', path: '/graphql', body: subscriptionBody(payload) };
    return signer.verify(typeof header === 'string' ? header : undefined, call);
  };
  const operations = new WeakMap<SubscribePayload, Principal>();
  /** Sockets that carried an operation their gateway signed. */
  const signedSockets = new WeakSet<WebSocket>();
  const wss = new WebSocketServer({ server, path: '/graphql', maxPayload: config.BODY_LIMIT_BYTES });
  const disposer = useServer<Record<string, unknown> | undefined, { socket: WebSocket; request: IncomingMessage }>(
    {
      schema: instance.schema,
      connectionInitWaitTimeout: config.WS_CONNECTION_INIT_TIMEOUT_MS,
      // Every operation carries its own signed principal: the connection needs none. A socket that has
      // carried no signed operation within the connection-init timeout is its gateway's no more than an
      // idle stranger's: it is closed.
      onConnect: (ctx) => {
        const socket = ctx.extra.socket;
        const timer = setTimeout(() => {
          if (!signedSockets.has(socket)) socket.close(CloseCode.Unauthorized, 'Unauthorized: no signed operation');
        }, config.WS_CONNECTION_INIT_TIMEOUT_MS);
        timer.unref();
        socket.once('close', () => clearTimeout(timer));
        return true;
      },
      // An operation acts for the principal the gateway signed into it; it is judged by this subgraph's own
      // SDL before it runs.
      onSubscribe: (ctx, _id, payload) => {
        const principal = operationPrincipal(payload);
        if (!principal) {
          return [
            new GraphQLError(`Missing or invalid ${PRINCIPAL_HEADER}: this subgraph serves only operations its gateway signed for it`, {
              extensions: { code: 'UNAUTHENTICATED' },
            }),
          ];
        }
        operations.set(payload, principal);
        signedSockets.add(ctx.extra.socket);
        return admitSigned(options, ctx.extra.request.headers, payload, principal);
      },
      // One context per operation: subscription resolvers renew its time and loaders per event.
      context: (ctx, _id, payload) => {
        // onSubscribe took every operation in, with its principal, before graphql-ws asks for its context.
        const principal = operations.get(payload);
        if (!principal) throw new Error('an operation on a subgraph socket that its onSubscribe did not take in');
        return instance.context({ headers: gatewayContextFrom(ctx.extra.request.headers, principal).headers, principal }) as Record<string, unknown>;
      },
      onNext: (_ctx, _id, _payload, _args, result): FormattedExecutionResult | void => {
        if (!result.errors) return;
        return { ...result, errors: result.errors.map((e) => serializeSubgraphError(e, onInternalError)) };
      },
    },
    wss,
    config.WS_KEEPALIVE_MS,
  );

  return {
    async close() {
      await disposer.dispose();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
}

/**
 * The subgraph's pipeline on a signed operation, as on its HTTP door: the limits, validation, then its
 * checks (the intake guard, authorization by this subgraph's own SDL) before anything runs.
 */
function admitSigned(
  { instance, pipeline }: SubgraphSocketOptions,
  headers: IncomingMessage['headers'],
  payload: SubscribePayload,
  principal: Principal,
): readonly GraphQLError[] | ExecutionArgs {
  const taken = pipeline.intake({
    params: { query: payload.query },
    variables: payload.variables,
    operationName: payload.operationName,
    principal,
    clientName: undefined,
  });
  if (!taken.ok) return [taken.error];
  const { document, source } = taken.intake;
  const validated = pipeline.validate(instance.schema, document, payload.operationName);
  if ('errors' in validated) return validated.errors;
  const context: GatewayContext = { ...gatewayContextFrom(headers, principal), intake: taken.intake };
  const resolved = {
    schema: instance.schema,
    document,
    operation: validated.operation,
    operationName: payload.operationName,
    source,
    variables: payload.variables ?? undefined,
    context,
  };
  try {
    resolvePolicies(pipeline.checks, resolved, { set: () => undefined });
  } catch (error) {
    return [error instanceof GraphQLError ? error : new GraphQLError(String(error), { extensions: { code: 'INTERNAL_SERVER_ERROR' } })];
  }
  return { schema: instance.schema, document, operationName: payload.operationName, variableValues: payload.variables ?? {} };
}
