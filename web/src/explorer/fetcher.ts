import { createGraphiQLFetcher, type Fetcher, type FetcherOpts, type FetcherParams } from '@graphiql/toolkit';
import { getOperationAST, Kind, OperationTypeNode, parse } from 'graphql';
import { createClient as createSseClient } from 'graphql-sse';
import { createClient as createWsClient, type Client as WsClient } from 'graphql-ws/client';

/*
 * What the explorer sends its operations with. Queries and mutations go over HTTP (GraphiQL's own fetcher,
 * which reads `@defer`'s multipart answers part by part); subscriptions over graphql-ws, and over Server-Sent
 * Events when no WebSocket can be opened. The credential is whatever the headers editor holds at the time
 * of each operation: sent as a header over HTTP, in `connection_init` on a socket. It is kept in the page's
 * memory only (GraphiQL keeps headers out of its storage unless asked).
 */

/** Where the explorer reaches the gateway. */
export interface Endpoints {
  /** http(s)://host/graphql */
  http: string;
  /** ws(s)://host/graphql */
  ws: string;
}

/** The credential headers the gateway reads, from the headers editor (names in any case). */
export function credentialOf(headers: Record<string, unknown> | undefined): Record<string, string> {
  const credential: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers ?? {})) {
    const lower = name.toLowerCase();
    if ((lower === 'x-api-key' || lower === 'authorization') && typeof value === 'string' && value !== '') credential[lower] = value;
  }
  return credential;
}

/**
 * The request with the operation name the document holds: GraphiQL can hand over the name it had before the
 * text was replaced (a run right after an edit); a document with one operation then runs that one.
 */
function withCurrentOperation(params: FetcherParams): FetcherParams {
  if (!params.operationName) return params;
  try {
    const operations = parse(params.query).definitions.filter((d) => d.kind === Kind.OPERATION_DEFINITION);
    if (operations.length !== 1 || operations.some((o) => o.name?.value === params.operationName)) return params;
    return { ...params, operationName: operations[0]!.name?.value ?? null };
  } catch {
    return params;
  }
}

/** Whether the operation a request selects is a subscription (a document that does not parse is not). */
function isSubscription(params: FetcherParams): boolean {
  try {
    return getOperationAST(parse(params.query), params.operationName ?? undefined)?.operation === OperationTypeNode.SUBSCRIPTION;
  } catch {
    return false;
  }
}

/** The request as graphql-ws and graphql-sse send it. */
function payloadOf(params: FetcherParams): { query: string; variables: Record<string, unknown>; operationName?: string } {
  const variables = (params.variables ?? {}) as Record<string, unknown>;
  return { query: params.query, variables, ...(params.operationName ? { operationName: params.operationName } : {}) };
}

/** How the last subscription was carried, for the page to say. */
export type Transport = 'websocket' | 'sse';

/** What the page says about the answers: how subscriptions are carried, and why there is no schema. */
export interface FetcherEvents {
  onTransport: (transport: Transport) => void;
  /** The introspection answer: null when it gave the schema, else the gateway's reason (a missing scope). */
  onSchema: (refusal: string | null) => void;
}

/** The refusal in an introspection answer (the gateway's message), or null when it gave the schema. */
function schemaRefusal(result: unknown): string | null {
  const errors = (result as { errors?: { message?: unknown }[] } | null)?.errors;
  const first = errors?.[0]?.message;
  return typeof first === 'string' ? first : null;
}

export function explorerFetcher(endpoints: Endpoints, events: FetcherEvents): Fetcher {
  const { onTransport } = events;
  const http = createGraphiQLFetcher({ url: endpoints.http });
  let socket: { key: string; client: WsClient } | null = null;
  // Once a WebSocket could not be opened at all, subscriptions go over SSE for the rest of the page's life.
  let sseOnly = false;

  const socketFor = (credential: Record<string, string>): WsClient => {
    const key = JSON.stringify(credential);
    if (socket?.key === key) return socket.client;
    void socket?.client.dispose();
    const client = createWsClient({ url: endpoints.ws, connectionParams: credential, lazy: true, retryAttempts: 0 });
    socket = { key, client };
    return client;
  };

  const overSse = (params: FetcherParams, credential: Record<string, string>): AsyncIterable<unknown> => {
    onTransport('sse');
    const client = createSseClient({ url: endpoints.http, headers: credential, retryAttempts: 0 });
    return client.iterate(payloadOf(params));
  };

  const subscribe = async function* (params: FetcherParams, credential: Record<string, string>): AsyncGenerator<unknown> {
    if (sseOnly) {
      yield* overSse(params, credential);
      return;
    }
    const client = socketFor(credential);
    let opened = false;
    const off = client.on('connected', () => {
      opened = true;
    });
    try {
      onTransport('websocket');
      for await (const result of client.iterate(payloadOf(params))) {
        opened = true;
        yield result;
      }
    } catch (error) {
      // A socket that never opened (blocked on the way, not refused by the gateway): SSE instead.
      const closed = error as { code?: number } | null;
      if (opened || (typeof closed?.code === 'number' && closed.code >= 4000)) throw error;
      sseOnly = true;
      yield* overSse(params, credential);
    } finally {
      off();
    }
  };

  return (asked: FetcherParams, opts?: FetcherOpts) => {
    const params = withCurrentOperation(asked);
    const credential = credentialOf(opts?.headers);
    if (isSubscription(params)) return subscribe(params, credential) as ReturnType<Fetcher>;
    const answer = http(params, { ...opts, headers: { ...(opts?.headers ?? {}) } });
    // GraphiQL asks for the schema by this name: the page says why when the gateway refuses it.
    if (params.operationName === 'IntrospectionQuery' && answer instanceof Promise) {
      return answer.then((result: unknown) => {
        events.onSchema(schemaRefusal(result));
        return result;
      }) as ReturnType<Fetcher>;
    }
    return answer;
  };
}
