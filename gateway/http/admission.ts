import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

/*
 * Operations start one per event-loop turn. Without this, every request whose body completed in the same
 * poll phase starts its operation in that phase: eight clients sending large batches at once hold the loop
 * for the sum of their first stretches of work, and timers, /health and WebSocket frames wait that long.
 * With it, the loop reaches its timers and sockets between any two operations' starts, so the longest
 * stretch is one operation's longest synchronous step, whatever the concurrency. Nothing is refused or
 * reordered: operations wait their turn in arrival order (a few microseconds each when the server is idle).
 */
export class TurnGate {
  private admittedThisTurn = false;
  private readonly waiting: (() => void)[] = [];
  private ticking = false;

  /** Resolves when the caller may start; at once when nothing else started in this turn. */
  enter(): Promise<void> {
    if (!this.admittedThisTurn && this.waiting.length === 0) {
      this.admittedThisTurn = true;
      this.tick();
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      this.waiting.push(resolve);
      this.tick();
    });
  }

  /** Operations waiting for their turn. */
  get queued(): number {
    return this.waiting.length;
  }

  private tick(): void {
    if (this.ticking) return;
    this.ticking = true;
    setImmediate(() => {
      this.ticking = false;
      this.admittedThisTurn = false;
      const next = this.waiting.shift();
      if (!next) return;
      this.admittedThisTurn = true;
      next();
      this.tick();
    });
  }
}

/**
 * The `admission` part: requests waiting for their turn, as a gauge (the gate itself belongs to the HTTP
 * app, which waits on it before parsing a body: gateway/http/app.ts).
 */
export const admissionPlugin = fp(
  async (app: FastifyInstance) => {
    const gate = app.admission;
    if (!gate) return;
    app.metrics.gauge({
      name: 'requests_waiting_for_turn',
      help: 'Body parses and operations waiting for their turn of the event loop',
      collect: (gauge) => gauge.set(gate.queued),
    });
  },
  { name: 'admission', fastify: '5.x', dependencies: ['metrics'] },
);
