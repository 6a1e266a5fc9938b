import type { Server, IncomingMessage } from 'node:http';
import { GraphQLError, parse, type DocumentNode, type FormattedExecutionResult } from 'graphql';
import type { SubscribePayload } from 'graphql-ws';
import { useServer } from 'graphql-ws/use/ws';
import { WebSocketServer, type WebSocket } from 'ws';
import type { HttpConfig } from '../http/config.js';
import type { SubscriptionsConfig } from '../subscriptions/config.js';
import { DEMO_PRINCIPAL, PRINCIPAL_HEADER, subscriptionBody, type Principal, type PrincipalSigner } from '../../platform/principal.js';
import type { SubgraphInstance } from '../../platform/subgraph.js';
import { gatewayContextFrom } from '../execution/context.js';
import { serializeSubgraphError } from '../execution/subgraph-errors.js';
import type { Authenticator } from '../security/auth.js';
import type { Authorizer } from '../security/authorization.js';
import { CloseCode } from '../subscriptions/close-codes.js';
import { credentialHeadersOf } from '../subscriptions/ws-server.js';

export interface SubgraphSocketOptions {
  config: Pick<HttpConfig & SubscriptionsConfig, 'BODY_LIMIT_BYTES' | 'WS_CONNECTION_INIT_TIMEOUT_MS' | 'WS_KEEPALIVE_MS'>;
  subgraph: string;
  instance: SubgraphInstance;
  auth: Authenticator;
  signer: PrincipalSigner | null;
  authorizer: Authorizer;
  onInternalError: (error: unknown) => void;
}

/**
 * graphql-transport-ws at a subgraph server's /graphql, for its gateway's subscriptions. An operation acts
 * for the principal the gateway signed into it (with a secret), else for the connection's credential; it is
 * judged by this subgraph's own SDL before it runs.
 */
export function attachSubgraphSocket(server: Server, options: SubgraphSocketOptions): { close(): Promise<void> } {
  const { config, instance, auth, signer, authorizer, onInternalError } = options;
  const module = { name: options.subgraph };
  const connections = new WeakMap<object, Principal>();
  /** Whom an operation on a socket acts for: what the gateway signed into it, or (no secret) the connection's credential. */
  const operationPrincipal = (ctx: object, payload: SubscribePayload): Principal | null => {
    if (!signer) return connections.get(ctx) ?? null;
    const header = payload.extensions?.[PRINCIPAL_HEADER];
    const call = { subgraph: module.name, method: 'SUBSCRIBE', path: '/graphql', body: subscriptionBody(payload) };
    return signer.verify(typeof header === 'string' ? header : undefined, call);
  };
  const operations = new WeakMap<SubscribePayload, Principal>();
  const wss = new WebSocketServer({ server, path: '/graphql', maxPayload: config.BODY_LIMIT_BYTES });
  const disposer = useServer<Record<string, unknown> | undefined, { socket: WebSocket; request: IncomingMessage }>(
    {
      schema: instance.schema,
      connectionInitWaitTimeout: config.WS_CONNECTION_INIT_TIMEOUT_MS,
      onConnect: async (ctx) => {
        // With a secret every operation carries its own signed principal: the connection needs none.
        if (signer) return true;
        const result = await auth.authenticate(credentialHeadersOf(ctx.connectionParams));
        if ('principal' in result) {
          connections.set(ctx, result.principal);
          return true;
        }
        ctx.extra.socket.close(CloseCode.Unauthorized, 'Unauthorized');
        return false;
      },
      // An operation acts for the principal the gateway signed into it (with a secret), else for the
      // connection's; it is judged by this subgraph's own SDL before it runs.
      onSubscribe: (ctx, _id, payload) => {
        const principal = operationPrincipal(ctx, payload);
        if (!principal) {
          return [
            new GraphQLError(`Missing or invalid ${PRINCIPAL_HEADER}: this subgraph serves only operations its gateway signed for it`, {
              extensions: { code: 'UNAUTHENTICATED' },
            }),
          ];
        }
        operations.set(payload, principal);
        let document: DocumentNode;
        try {
          document = parse(payload.query);
        } catch (error) {
          return [error instanceof GraphQLError ? error : new GraphQLError(String(error))];
        }
        const refused = authorizer.refusal(document, payload.operationName, principal, payload.variables);
        if (refused) return [refused];
        return;
      },
      // One context per operation: subscription resolvers renew its time and loaders per event.
      context: (ctx, _id, payload) => {
        const principal = operations.get(payload) ?? operationPrincipal(ctx, payload) ?? DEMO_PRINCIPAL;
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
