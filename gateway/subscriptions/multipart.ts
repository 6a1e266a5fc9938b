import { jsonOf, type StreamTransport } from './stream-transport.js';

const BOUNDARY = 'graphql';
const MULTIPART_SUBSCRIPTION = `multipart/mixed;boundary="${BOUNDARY}";subscriptionSpec="1.0"`;

/**
 * Apollo's multipart subscriptions (`Accept: multipart/mixed;subscriptionSpec="1.0"`, subscriptions only:
 * other operations with that Accept are ordinary requests), as Apollo Router serves them to Apollo Client's
 * HttpLink: each event a part `{"payload": result}`, a `{}` part as heartbeat, the body closed with the
 * final boundary when the subscription ends.
 */
export const multipartTransport: StreamTransport = {
  accepts: (types, subscription) =>
    subscription && types.some(([type, ...params]) => type === 'multipart/mixed' && params.some((p) => p.replace(/"/g, '') === 'subscriptionspec=1.0')),
  // A multipart subscription starts at the live edge: Apollo's protocol has no resume header.
  resumeFrom: () => undefined,
  open(response, headers) {
    response.writeHead(200, { ...headers, 'content-type': MULTIPART_SUBSCRIPTION });
    // Every part is followed by the boundary at once, so a client parses a part as soon as it arrives.
    response.write(`\r\n--${BOUNDARY}`);
    const part = (json: string) => response.write(`\r\ncontent-type: application/json; charset=utf-8\r\n\r\n${json}\r\n--${BOUNDARY}`);
    return {
      next: (result) => part(`{"payload":${jsonOf(result)}}`),
      // A transport-level error, as Apollo Router sends one: no payload, the errors beside it.
      failed: (errors) => part(JSON.stringify({ payload: null, errors })),
      heartbeat: () => part('{}'),
      end: () => response.end('--\r\n'),
    };
  },
};
