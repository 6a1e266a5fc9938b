import type { GraphQLError, GraphQLFormattedError } from 'graphql';

/*
 * Incremental delivery (`@defer`) between the gateway's executor and its transports. The executor answers a
 * request with deferred fragments in two ways: whole, in one payload (the default, and always when the
 * caller does not take incremental payloads or authorization shaped the operation), or as an initial
 * payload returned as usual plus the payloads still to come, left in the request's slot for its transport:
 * multipart/mixed over HTTP (gateway/server.ts), several `next` messages over graphql-ws
 * (gateway/subscriptions/ws-server.ts). The payloads follow the format Apollo Client and graphql-http
 * speak (`deferSpec=20220824`): `hasNext`, `incremental` items with `data`, `path`, `label`, `errors`.
 */

/** One deferred fragment's answer at one place in the response. */
export interface IncrementalItem {
  data: Record<string, unknown> | null;
  path: (string | number)[];
  label?: string;
  errors?: GraphQLError[];
  extensions?: Record<string, unknown>;
}

/** A payload after the initial one. */
export interface SubsequentPayload {
  incremental?: IncrementalItem[];
  /** Errors of a deferred fragment that had no place left in the response to be delivered at. */
  errors?: GraphQLError[];
  hasNext: boolean;
}

/** A request's incremental delivery: set by its transport, filled by the executor. */
export interface IncrementalSlot {
  /** The caller takes incremental payloads. */
  accepted: boolean;
  /** Whole answers only, whatever the caller takes (set when authorization shaped the operation). */
  disabled?: boolean;
  /** Set by the executor when the answer it returned is an initial payload: the payloads still to come. */
  subsequent?: AsyncIterable<SubsequentPayload>;
}

/** The media type of incremental answers over HTTP, and whether an Accept header takes it. */
export const MULTIPART_DEFER = 'multipart/mixed; boundary="-"; deferSpec=20220824';

export function acceptsIncremental(accept: string | undefined): boolean {
  if (!accept) return false;
  return accept.split(',').some((part) => {
    const [type, ...params] = part.split(';').map((p) => p.trim().toLowerCase());
    if (type !== 'multipart/mixed') return false;
    const spec = params.find((p) => p.startsWith('deferspec='));
    const q = params.find((p) => p.startsWith('q='));
    if (q && Number(q.slice(2)) === 0) return false;
    return spec === undefined || spec === 'deferspec=20220824';
  });
}

/**
 * The multipart/mixed body of an answer with deferred parts: `initial` (the first payload as JSON text,
 * written by Apollo Server) with `hasNext: true`, then each payload as its part is ready, the last one
 * closing the body. Boundary and part headers as Apollo Server writes incremental answers.
 */
export async function* multipartBody(
  initial: string,
  subsequent: AsyncIterable<SubsequentPayload>,
  format: (errors: readonly GraphQLError[] | undefined) => GraphQLFormattedError[] | undefined,
): AsyncGenerator<string> {
  // Apollo wrote one JSON object: `hasNext` goes in before its closing brace, with no parse and rewrite.
  const text = initial.trimEnd();
  if (!text.endsWith('}')) throw new Error('the initial payload is not a JSON object');
  yield `\r\n---\r\ncontent-type: application/json; charset=utf-8\r\n\r\n${text.slice(0, -1)},"hasNext":true}\r\n---\r\n`;
  // The deferred parts start once the first payload has left: in one process a subgraph's work runs on
  // this event loop and would otherwise hold the first payload back.
  await new Promise<void>((resolve) => setImmediate(resolve));
  for await (const payload of subsequent) {
    yield `content-type: application/json; charset=utf-8\r\n\r\n${JSON.stringify(formatPayload(payload, format))}\r\n---${payload.hasNext ? '' : '--'}\r\n`;
  }
}

/** A subsequent payload as it is sent, its errors formatted by `format`. */
export function formatPayload(
  payload: SubsequentPayload,
  format: (errors: readonly GraphQLError[] | undefined) => GraphQLFormattedError[] | undefined,
): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  if (payload.incremental) body['incremental'] = payload.incremental.map((item) => ({ ...item, errors: format(item.errors) }));
  if (payload.errors) body['errors'] = format(payload.errors);
  body['hasNext'] = payload.hasNext;
  return body;
}
