import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy on 127.0.0.1 in front of a real server (PostgreSQL), to stage an outage: `cut()` stops
 * accepting (new connections are refused) and drops every open connection; `restore()` listens on the
 * same port again. `stall()` stages a database that accepts but never answers: connections stay open and
 * new ones are accepted, but no byte is forwarded either way until `unstall()`.
 */
export class TcpProxy {
  private server: Server | null = null;
  private readonly sockets = new Set<Socket>();
  /** Local ports of the proxy's connections to the target (the target sees them as client ports). */
  private readonly upstream = new Set<Socket>();
  /** Open connections as (client, target) pairs, for stalling and resuming the flow. */
  private readonly pairs = new Set<[Socket, Socket]>();
  private stalled = false;
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

  async restore(): Promise<void> {
    if (this.server) return;
    const server = createServer((client) => {
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
