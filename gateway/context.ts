import type { IncomingHttpHeaders } from 'node:http';

/** Request headers the gateway passes on to subgraphs (in process and over HTTP alike). */
export const FORWARDED_HEADERS = ['idempotency-key', 'x-request-id'] as const;

export interface GatewayContext {
  /** Only the forwarded headers; credentials stop at the gateway. */
  headers: Record<string, string | undefined>;
}

export function gatewayContextFrom(headers: IncomingHttpHeaders | Record<string, string | undefined>): GatewayContext {
  const picked: Record<string, string | undefined> = {};
  for (const name of FORWARDED_HEADERS) {
    const value = headers[name];
    picked[name] = Array.isArray(value) ? value[0] : value;
  }
  return { headers: picked };
}
