import { createServer } from 'node:http';
import { env } from 'node:process';
import { WebSocketServer, type WebSocket } from 'ws';

/*
 * The floor the subscription benchmark is measured against: a bare `ws` server on the same loopback that
 * speaks just enough graphql-transport-ws for the benchmark's clients (ack, pong, one subscription per
 * socket) and, on `POST /emit?reserved=K`, sends one pre-serialized `next` message to every subscribed
 * socket. No GraphQL, no database, no per-subscriber work but the socket write: what one Node process
 * costs to fan one message out to N sockets on this machine.
 */

const subscribed = new Map<WebSocket, string>();
const server = createServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://x');
  if (url.pathname === '/health') {
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
    return;
  }
  if (req.method !== 'POST' || url.pathname !== '/emit') {
    res.writeHead(404).end();
    return;
  }
  const reserved = Number(url.searchParams.get('reserved'));
  res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  setImmediate(() => {
    const payload = JSON.stringify({ data: { fleetSummaryChanged: { cursor: String(reserved), reserved, utilization: reserved / 15, surgeMultiplier: 1 } } });
    for (const [socket, id] of subscribed) socket.send(`{"id":${JSON.stringify(id)},"type":"next","payload":${payload}}`);
  });
});
const wss = new WebSocketServer({ server, path: '/graphql' });
wss.on('connection', (socket) => {
  socket.on('message', (raw: Buffer) => {
    const message = JSON.parse(raw.toString()) as { type: string; id?: string };
    if (message.type === 'connection_init') socket.send('{"type":"connection_ack"}');
    else if (message.type === 'ping') socket.send('{"type":"pong"}');
    else if (message.type === 'subscribe' && message.id) subscribed.set(socket, message.id);
  });
  socket.on('close', () => subscribed.delete(socket));
});
server.listen(Number(env.PORT), '127.0.0.1');
