import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { EventRelay } from '../../platform/event-relay.js';
import { withDeadline } from '../../platform/deadline.js';
import type { SubgraphInstance } from '../../platform/subgraph.js';
import type { SubgraphTrust } from '../../platform/subgraph-trust.js';

/*
 * Probe paths, open without a key (declared public on their routes): `/health` (the full report; 503 when
 * not ready), `/health/ready` (readiness: the same report, 200 or 503) and `/health/live` (liveness: 200
 * whenever the process serves).
 */

/** How long a readiness check may take before it counts as not ready (probes time out in seconds). */
const READY_CHECK_TIMEOUT_MS = 2000;

/** `check()`, false when it throws or takes longer than READY_CHECK_TIMEOUT_MS. */
function readyWithin(check: () => Promise<boolean>): Promise<boolean> {
  return withDeadline(check(), READY_CHECK_TIMEOUT_MS, () => new Error('late')).catch(() => false);
}

export interface GatewayHealthOptions {
  /** Every subgraph of the supergraph, by name. */
  names: readonly string[];
  /** Subgraphs served by servers of their own (SUBGRAPH_URLS), by name. */
  remoteUrls: ReadonlyMap<string, string>;
  /** Subgraphs running in this process, by name. */
  local: ReadonlyMap<string, SubgraphInstance>;
  /** Whether each subgraph server refuses unsigned calls (one that does not is not routed to, so not ready). */
  trust: SubgraphTrust;
  /** Whether the request presents an operator's credential (then subgraph server URLs are shown). */
  callerIsOperator(request: FastifyRequest): Promise<boolean>;
  database(): string | null;
  relay(): EventRelay | null;
  websocket(): { connections(): number; slowConsumerCloses(): number };
  /** The supergraph served: its hash, when it was loaded, how many reloads, the last failed one. */
  supergraph(): { hash: string; loadedAt: string; reloads: number; lastFailure: { at: string; error: string } | null };
  /** Whether the gateway runs in demo mode (no credential configured): the report says so. */
  demoMode: boolean;
  /** Whether a probe is answered; false when it was refused (answered already, 429). */
  admit(request: FastifyRequest, reply: FastifyReply): Promise<boolean>;
  /** Work after listening that changes no answer (gateway/http/warm-up.ts); absent: none. */
  warmUp?: () => { done: boolean; pending: string[]; ms: number | null };
}

/**
 * The gateway's probes. Readiness (`/health`, `/health/ready`): 503 whenever a subgraph cannot serve (its
 * database does not answer, its server is down). Public, so it names no address: a subgraph server's URL is
 * shown to an operator's credential only. Liveness (`/health/live`): the process serves requests (a
 * database outage is not a reason to restart it).
 */
export const gatewayHealthPlugin = fp(async (app: FastifyInstance, options: GatewayHealthOptions) => registerGatewayHealth(app, options), {
  name: 'health',
  fastify: '5.x',
});

function registerGatewayHealth(app: FastifyInstance, options: GatewayHealthOptions): void {
  const startedAt = Date.now();
  const uptime = () => Math.round((Date.now() - startedAt) / 1000);
  // The backends are checked at most once per HEALTH_CHECK_CACHE_MS, one round at a time, however many
  // probes arrive: every probe in that window shares the round (`checked_at` says when it started).
  let round: { at: number; checks: Promise<Backends> } | null = null;
  const backends = (): Promise<Backends> => {
    const now = Date.now();
    if (round && now - round.at < HEALTH_CHECK_CACHE_MS) return round.checks;
    round = { at: now, checks: probeBackends(options) };
    return round.checks;
  };
  const health = async (request: FastifyRequest, reply: FastifyReply) => {
    // Public, so limited per client address by the composition root: a flood of probes is answered 429.
    if (!(await options.admit(request, reply))) return reply;
    const operator = await options.callerIsOperator(request);
    const { checkedAt, subgraphs } = await backends();
    // The event bus's state is the relay's own, in this process: read for every probe.
    const relay = options.relay();
    const eventBus = relay ? await eventBusHealth(relay) : null;
    // An operator sees where each subgraph server is and whether it refuses unsigned calls.
    const checks = subgraphs.map(
      ([name, c]) => [name, c.url && operator ? { ready: c.ready, url: c.url, refuses_unsigned: c.refusesUnsigned } : { ready: c.ready }] as const,
    );
    const ready = checks.every(([, c]) => c.ready);
    const ws = options.websocket();
    // A foreign stream does not make the process unready (it serves, its events wait in the outbox), but
    // it is degraded: nothing reaches the bus until an operator acts.
    return reply.code(ready ? 200 : 503).send({
      status: ready && eventBus?.status !== 'degraded' ? 'ok' : 'degraded',
      ready,
      uptime_s: uptime(),
      // Demo mode: no credential configured, every caller is one principal holding every scope.
      demo_mode: options.demoMode,
      checked_at: checkedAt,
      database: options.database(),
      subgraphs: Object.fromEntries(checks),
      websocket: { connections: ws.connections(), slow_consumer_closes: ws.slowConsumerCloses() },
      supergraph: supergraphHealth(options.supergraph()),
      ...(options.warmUp ? { warm_up: options.warmUp() } : {}),
      ...(eventBus ? { event_bus: eventBus } : {}),
    });
  };
  app.get('/health', { config: { public: true }, exposeHeadRoute: true }, health);
  app.get('/health/ready', { config: { public: true }, exposeHeadRoute: true }, health);
  app.get('/health/live', { config: { public: true }, exposeHeadRoute: true }, async () => ({ status: 'ok', uptime_s: uptime() }));
}

/** How long one round of backend checks answers every probe (ms): a probe sees a state at most this old. */
const HEALTH_CHECK_CACHE_MS = 250;

interface Backends {
  checkedAt: string;
  subgraphs: ReadonlyArray<readonly [string, { ready: boolean; url?: string; refusesUnsigned?: boolean | null }]>;
}

/**
 * One round of backend checks: each subgraph's readiness (its database, or its server: ready, and refusing
 * a call nobody signed, since the gateway routes to no other).
 */
async function probeBackends(options: GatewayHealthOptions): Promise<Backends> {
  const checkedAt = new Date().toISOString();
  const subgraphs = await Promise.all(
    options.names.map(async (name) => {
      const url = options.remoteUrls.get(name);
      if (url) {
        const verdict = withDeadline(options.trust.current(name), READY_CHECK_TIMEOUT_MS, () => new Error('late')).catch(() => 'unreachable' as const);
        const [serves, trusted] = await Promise.all([remoteReady(url), verdict]);
        const refusesUnsigned = trusted === 'unreachable' ? null : trusted === 'refuses-unsigned';
        return [name, { ready: serves && refusesUnsigned === true, url, refusesUnsigned }] as const;
      }
      const instance = options.local.get(name);
      return [name, { ready: instance ? await readyWithin(() => instance.ready()) : false }] as const;
    }),
  );
  return { checkedAt, subgraphs };
}

/** The `health` part of a subgraph server: its probes, ready when its own subgraph is. */
export const subgraphHealthPlugin = fp(
  async (app: FastifyInstance, options: { name: string; instance: SubgraphInstance; database: string }) =>
    registerSubgraphHealth(app, options.name, options.instance, options.database),
  { name: 'health', fastify: '5.x' },
);

function registerSubgraphHealth(app: FastifyInstance, name: string, instance: SubgraphInstance, database: string): void {
  const health = async (_request: unknown, reply: FastifyReply) => {
    const ready = await readyWithin(() => instance.ready());
    return reply.status(ready ? 200 : 503).send({ subgraph: name, ready, database });
  };
  app.get('/health', { config: { public: true }, exposeHeadRoute: true }, health);
  app.get('/health/ready', { config: { public: true }, exposeHeadRoute: true }, health);
  app.get('/health/live', { config: { public: true }, exposeHeadRoute: true }, async () => ({ subgraph: name, status: 'ok' }));
}

/** The event bus as /health reports it: the relay's connection and how far behind the outbox it is. */
async function eventBusHealth(relay: EventRelay) {
  const status = await relay.status().catch(() => null);
  if (!status) return { status: 'degraded', connected: false };
  return {
    status: status.lineage === 'foreign' ? 'degraded' : 'ok',
    connected: status.connected,
    leading: status.leading,
    relay_lag_events: status.lagEvents,
    relay_lag_seconds: Math.round(status.lagSeconds * 10) / 10,
    ...(status.lineageReason ? { reason: status.lineageReason } : {}),
  };
}

/** A subgraph server's readiness, from its /health (unreachable or slow: not ready). */
async function remoteReady(graphqlUrl: string): Promise<boolean> {
  try {
    const res = await fetch(new URL('/health', graphqlUrl), { signal: AbortSignal.timeout(READY_CHECK_TIMEOUT_MS) });
    const body = (await res.json()) as { ready?: unknown };
    return res.ok && body.ready === true;
  } catch {
    return false;
  }
}

/** A failed reload leaves the supergraph served before: /health says which one and why the new one was refused. */
function supergraphHealth(s: ReturnType<GatewayHealthOptions['supergraph']>) {
  return {
    hash: s.hash,
    loaded_at: s.loadedAt,
    reloads: s.reloads,
    ...(s.lastFailure ? { last_reload_failed: { at: s.lastFailure.at, error: s.lastFailure.error } } : {}),
  };
}
