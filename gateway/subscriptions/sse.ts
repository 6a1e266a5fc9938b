import { jsonOf, type StreamTransport } from './stream-transport.js';

/**
 * Server-Sent Events, the `graphql-sse` protocol's distinct-connections mode (`Accept: text/event-stream`,
 * GET or POST, any operation): each result is an `event: next` whose `id` is the event's cursor, then
 * `event: complete`. A browser's EventSource (or any client) reconnecting with `Last-Event-ID` resumes
 * after that cursor.
 */
export const sseTransport: StreamTransport = {
  accepts: (types) => types.some(([type, ...params]) => type === 'text/event-stream' && !params.some((p) => p === 'q=0')),
  resumeFrom: (headers) => headers['last-event-id'],
  open(response, headers) {
    response.writeHead(200, { ...headers, 'content-type': 'text/event-stream; charset=utf-8' });
    // A comment at once: some browsers wait for the first bytes before they report the stream open.
    response.write(':\n\n');
    return {
      next: (result, cursor) => response.write(`${cursor !== null ? `id: ${cursor}\n` : ''}event: next\ndata: ${jsonOf(result)}\n\n`),
      failed: (errors) => response.write(`event: next\ndata: ${JSON.stringify({ errors })}\n\n`),
      heartbeat: () => response.write(':\n\n'),
      end: () => response.end('event: complete\ndata:\n\n'),
    };
  },
};
