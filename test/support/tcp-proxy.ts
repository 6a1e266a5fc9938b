import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy on 127.0.0.1 in front of a real server (PostgreSQL), to stage an outage: `cut()` stops
 * accepting (new connections are refused) and drops every open connection; `restore()` listens on the
 * same port again. `stall()` stages a database that accepts but never answers: connections stay open and
 * new ones are accepted, but no byte is forwarded either way until `unstall()`. `refuse(error)` stages a
 * server that refuses connections as PostgreSQL does (too many clients, starting up, shutting down, a
 * database not accepting connections): open connections are reset and each new one is answered, after its
 * startup message, with a FATAL ErrorResponse carrying the given SQLSTATE, then closed; `restore()` ends it.
 */

/** The fields of a PostgreSQL ErrorResponse a refusing server sends. */
export interface RefusalFields {
  code: string;
  message: string;
  /** The server routine that raised it (PostgreSQL sends it; node-postgres exposes it as `routine`). */
  routine?: string;
}
export class TcpProxy {
  private server: Server | null = null;
  private readonly sockets = new Set<Socket>();
  /** Local ports of the proxy's connections to the target (the target sees them as client ports). */
  private readonly upstream = new Set<Socket>();
  /** Open connections as (client, target) pairs, for stalling and resuming the flow. */
  private readonly pairs = new Set<[Socket, Socket]>();
  private stalled = false;
  private refusal: RefusalFields | null = null;
  port = 0;

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  static async start(targetHost: string, targetPort: number): Promise<TcpProxy> {
    const proxy = new TcpProxy(targetHost, targetPort);
    await proxy.restore();
    return proxy;
  }

  /** Client ports the target sees for the connections open through this proxy. */
  upstreamPorts(): number[] {
    return [...this.upstream].map((s) => s.localPort).filter((p): p is number => p !== undefined);
  }

  /** Forwards again: listens when cut, and ends a refusal. */
  async restore(): Promise<void> {
    this.refusal = null;
    await this.listen();
  }

  private async listen(): Promise<void> {
    if (this.server) return;
    const server = createServer((client) => {
      if (this.refusal) {
        refuseConnection(client, this.refusal);
        this.sockets.add(client);
        client.on('close', () => this.sockets.delete(client)).on('error', () => client.destroy());
        return;
      }
      const target = connect(this.targetPort, this.targetHost);
      this.sockets.add(client);
      this.sockets.add(target);
      this.upstream.add(target);
      const pair: [Socket, Socket] = [client, target];
      this.pairs.add(pair);
      const drop = () => {
        client.destroy();
        target.destroy();
        this.sockets.delete(client);
        this.sockets.delete(target);
        this.upstream.delete(target);
        this.pairs.delete(pair);
      };
      client.on('error', drop).on('close', drop);
      target.on('error', drop).on('close', drop);
      if (!this.stalled) flow(pair);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: '127.0.0.1', port: this.port }, () => resolve());
    });
    this.port = (server.address() as { port: number }).port;
    this.server = server;
  }

  /** Stops forwarding on every connection, open or new, leaving them open. */
  stall(): void {
    this.stalled = true;
    for (const [client, target] of this.pairs) {
      client.unpipe(target);
      target.unpipe(client);
      client.pause();
      target.pause();
    }
  }

  /** Forwards again what was held and what follows. */
  unstall(): void {
    this.stalled = false;
    for (const pair of this.pairs) flow(pair);
  }

  /** Answers every new connection with a FATAL ErrorResponse (`error`) and resets every open one. */
  async refuse(error: RefusalFields): Promise<void> {
    await this.cut();
    this.refusal = error;
    await this.listen();
  }

  /** Refuses new connections and resets every open one. */
  async cut(): Promise<void> {
    const server = this.server;
    this.server = null;
    for (const socket of this.sockets) socket.resetAndDestroy();
    this.sockets.clear();
    this.upstream.clear();
    this.pairs.clear();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  close(): Promise<void> {
    return this.cut();
  }
}

function flow([client, target]: [Socket, Socket]): void {
  client.pipe(target);
  target.pipe(client);
}

/** SSLRequest and GSSENCRequest codes: answered 'N' (not supported), after which the startup message follows. */
const ENCRYPTION_REQUESTS = new Set([80877103, 80877104]);

/** Reads the client's startup message, answers a FATAL ErrorResponse and closes, as a refusing server does. */
function refuseConnection(client: Socket, error: RefusalFields): void {
  let buffered = Buffer.alloc(0);
  client.on('data', (chunk: Buffer) => {
    buffered = Buffer.concat([buffered, chunk]);
    while (buffered.length >= 8 && buffered.length >= buffered.readInt32BE(0)) {
      const length = buffered.readInt32BE(0);
      const code = buffered.readInt32BE(4);
      buffered = buffered.subarray(length);
      if (length === 8 && ENCRYPTION_REQUESTS.has(code)) {
        client.write('N');
        continue;
      }
      const field = (type: string, value: string) => Buffer.concat([Buffer.from(type), Buffer.from(value, 'utf8'), Buffer.from([0])]);
      const body = Buffer.concat([
        field('S', 'FATAL'),
        field('V', 'FATAL'),
        field('C', error.code),
        field('M', error.message),
        ...(error.routine ? [field('R', error.routine)] : []),
        Buffer.from([0]),
      ]);
      const header = Buffer.alloc(5);
      header.write('E', 0);
      header.writeInt32BE(body.length + 4, 1);
      client.end(Buffer.concat([header, body]));
      return;
    }
  });
}
