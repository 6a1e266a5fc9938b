import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy on 127.0.0.1 in front of a real server (PostgreSQL), to stage an outage: `cut()` stops
 * accepting (new connections are refused) and drops every open connection; `restore()` listens on the
 * same port again.
 */
export class TcpProxy {
  private server: Server | null = null;
  private readonly sockets = new Set<Socket>();
  /** Local ports of the proxy's connections to the target (the target sees them as client ports). */
  private readonly upstream = new Set<Socket>();
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
      const drop = () => {
        client.destroy();
        target.destroy();
        this.sockets.delete(client);
        this.sockets.delete(target);
        this.upstream.delete(target);
      };
      client.on('error', drop).on('close', drop);
      target.on('error', drop).on('close', drop);
      client.pipe(target);
      target.pipe(client);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: '127.0.0.1', port: this.port }, () => resolve());
    });
    this.port = (server.address() as { port: number }).port;
    this.server = server;
  }

  /** Refuses new connections and resets every open one. */
  async cut(): Promise<void> {
    const server = this.server;
    this.server = null;
    for (const socket of this.sockets) socket.resetAndDestroy();
    this.sockets.clear();
    this.upstream.clear();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  close(): Promise<void> {
    return this.cut();
  }
}
