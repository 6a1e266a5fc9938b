import type { Socket } from 'node:net';
import type { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';

/**
 * Lingering close, as nginx does it (`lingering_close`): a request refused before its body was read
 * (413, or any error answered while the client is still sending) is answered with `Connection: close`,
 * and then the connection is not destroyed at once. Destroying a socket with unread input makes the
 * kernel send a reset, and a reset discards what the client has not yet read, the 413 included: the
 * client sees ECONNRESET instead of the answer. Instead the server half-closes (FIN after the answer),
 * keeps reading and discarding what the client still sends, and destroys the socket when the client
 * closes its side, after LINGER_IDLE_MS without input, or after LINGER_MAX_MS in all (nginx: 5 s and
 * 30 s; shorter here, since a body over the limit on a healthy link arrives in milliseconds).
 */
const LINGER_IDLE_MS = 2_000;
const LINGER_MAX_MS = 10_000;

const lingering = new WeakSet<Socket>();

function lingerOn(socket: Socket, body: Readable): void {
  if (lingering.has(socket)) return;
  lingering.add(socket);
  // Node's server ends a `Connection: close` answer with socket.destroySoon(): FIN, then destroy once
  // the answer is flushed. Here the destroy waits for the client instead.
  socket.destroySoon = function lingeringClose(this: Socket) {
    if (this.writable) this.end();
    const done = () => {
      clearTimeout(idle);
      clearTimeout(cap);
      this.destroy();
    };
    let idle = setTimeout(done, LINGER_IDLE_MS);
    const cap = setTimeout(done, LINGER_MAX_MS);
    idle.unref();
    cap.unref();
    this.on('data', () => {
      clearTimeout(idle);
      idle = setTimeout(done, LINGER_IDLE_MS);
      idle.unref();
    });
    this.once('end', done);
    this.once('close', done);
    this.once('error', done);
    // The HTTP parser may have stopped reading once the request was answered: discard the rest, from the
    // body stream (the parser pauses the socket while the body is not read) and from the socket itself.
    body.resume();
    this.resume();
  };
}

/** Installs the lingering close for every answer sent while its request body is still unread. */
export function lingerOnRefusedBodies(app: FastifyInstance): void {
  // A declared length over the limit is refused before the body is read; the body is discarded from
  // the start, before the HTTP parser stops reading for want of a reader (it would not start again).
  app.addHook('onRequest', async (request) => {
    if (Number(request.headers['content-length']) > (app.initialConfig.bodyLimit ?? Infinity)) request.raw.resume();
  });
  app.addHook('onSend', async (request, reply, payload) => {
    if (!request.raw.complete && reply.statusCode >= 400 && !request.raw.socket.destroyed) {
      reply.header('connection', 'close');
      lingerOn(request.raw.socket, request.raw);
    }
    return payload;
  });
}
