import type { GraphQLDataSource, GraphQLDataSourceProcessOptions } from '@apollo/gateway';
import type { GatewayGraphQLResponse } from '@apollo/server-gateway-interface';
import { FORWARDED_HEADERS, principalKey, type GatewayContext } from '../pipeline/context.js';
import { copyJson } from './json-copy.js';

/*
 * Identical subgraph reads in flight at the same moment are made once. A fetch is identical when it goes
 * to the same subgraph with the same document, variables and forwarded headers that can change an answer
 * (the request id only labels logs, so it is left out of the key). Only queries collapse: a mutation runs
 * as often as it is asked for. Each caller after the first gets its own deep copy of the answer, because
 * the gateway merges fetched entities into its result tree in place, and two operations must never share
 * objects. Concurrent reads may be served by one read: either order was possible, so the answer is one a
 * caller could have had on its own.
 */

/**
 * Texts kept numbered before the list starts over. Numbers are never reused, so a text numbered again only
 * misses joining a fetch of it already in flight.
 */
const MAX_TEXT_IDS = 10_000;
let nextTextId = 0;

/** Forwarded headers that do not change what a subgraph answers. */
const NOT_IN_KEY = new Set(['x-request-id']);

/** Whether a subgraph document reads (a query: no mutation, no subscription). */
export const isRead = (query: string) => !/^\s*(mutation|subscription)\b/.test(query);

interface Flight {
  response: Promise<GatewayGraphQLResponse>;
  joiners: number;
  /**
   * A copy of the answer made as it arrives (before any caller can touch it) when others joined; each of
   * them gets its own copy of it. A subgraph answer is JSON (it travels as JSON in distributed mode, and an
   * in-process one is what would), so a JSON copy is a whole one (`copyJson`, four times as fast as
   * parsing the text again).
   */
  pristine?: Pick<GatewayGraphQLResponse, 'data' | 'errors' | 'extensions'>;
}

/**
 * What besides the text makes two fetches the same: operation name, variables, the forwarded headers that
 * can change an answer (in FORWARDED_HEADERS' order) and the principal.
 */
function restKey(request: GraphQLDataSourceProcessOptions['request'], context: GatewayContext): string {
  let headers = '';
  for (const name of FORWARDED_HEADERS) {
    const value = context.headers[name];
    if (value !== undefined && !NOT_IN_KEY.has(name)) headers += `${name}:${JSON.stringify(value)},`;
  }
  return `${request.operationName ?? ''}\n${JSON.stringify(request.variables ?? {})}\n${headers}\n${principalKey(context.principal)}`;
}

/**
 * `source` with identical reads in flight made once; `onCollapsed` is called for each fetch that joined one.
 * `epoch` (the state cache's eviction count) is part of the key: a read that comes after an eviction (a
 * write answered, an event read from the log) never joins a fetch that started before it, so it is never
 * answered with what was read before the write it may already have seen.
 */
export function collapsing(
  source: GraphQLDataSource<GatewayContext>,
  onCollapsed: () => void = () => undefined,
  epoch: () => number = () => 0,
): GraphQLDataSource<GatewayContext> {
  const inFlight = new Map<string, Flight>();
  // Each text a number: a key holds a few digits instead of a copy of the text.
  const textIds = new Map<string, number>();
  const textId = (query: string) => {
    let id = textIds.get(query);
    if (id === undefined) {
      if (textIds.size >= MAX_TEXT_IDS) textIds.clear();
      textIds.set(query, (id = nextTextId++));
    }
    return id;
  };
  return {
    async process(options: GraphQLDataSourceProcessOptions<GatewayContext>): Promise<GatewayGraphQLResponse> {
      const query = options.request.query ?? '';
      // Health checks and mutations pass straight through.
      if (!('incomingRequestContext' in options) || !isRead(query)) {
        return source.process(options);
      }
      const key = `${epoch()}\n${textId(query)}\n${restKey(options.request, options.context)}`;
      const joined = inFlight.get(key);
      if (joined) {
        onCollapsed();
        joined.joiners++;
        await joined.response;
        return copyJson(joined.pristine!);
      }
      const flight: Flight = { joiners: 0, response: Promise.resolve({}) };
      // This handler is the first one on the promise, so the copy is made before the first caller (or
      // anyone) continues with the answer.
      flight.response = source.process(options).then(
        (response) => {
          inFlight.delete(key);
          // The answer's HTTP envelope (already read by the data source) is not copied, only what it said.
          if (flight.joiners > 0) flight.pristine = copyJson({ data: response.data, errors: response.errors, extensions: response.extensions });
          return response;
        },
        (error: unknown) => {
          inFlight.delete(key);
          throw error;
        },
      );
      inFlight.set(key, flight);
      return flight.response;
    },
  };
}
