import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { z } from 'zod';
import type { Database } from '../../platform/db.js';
import { isEventCursor, type EventHub } from '../../platform/event-hub.js';
import { appendEvents } from '../../platform/outbox.js';
import { ownerOf } from '../../platform/ownership.js';
import { periodic } from '../../platform/periodic.js';
import { SYSTEM_PRINCIPAL } from '../../platform/principal.js';
import { STATE_TAG, stateTag, typeOfTag } from '../../platform/state-trace.js';
import type { SubgraphModule } from '../../platform/subgraph.js';
import { refuse } from '../http/problem.js';
import type { GatewayMetrics } from '../observability/metrics.js';
import type { OperationPolicy } from '../pipeline/operation-policy.js';
import type { StateCache } from './state-cache.js';

/*
 * The state cache's doors and steering (gateway/sources/state-cache.ts): the `state-position` a request
 * carries (read-your-writes: checked at the edge, a malformed or future one refused), the position a write
 * answers with (the header, and `extensions.statePosition` in GraphQL answers), the consumer's probe of
 * the log, the metrics, and `POST /admin/state-cache/invalidate` for operators.
 */

/** The header a write's log position is answered in, and a later request sends back. */
export const STATE_POSITION_HEADER = 'state-position';

/** Topic of an operator's invalidation: every gateway reading the log evicts its tags. */
const INVALIDATED_TOPIC = 'gateway.state_invalidated';

export interface StateCacheRouteOptions {
  modules: readonly SubgraphModule[];
}

/** The `state-cache` part: the header's check, the probe, the metrics and the operators' route. */
export const stateCachePlugin = fp(
  async (app: FastifyInstance, options: StateCacheRouteOptions) => {
    const cache = app.federation.stateCache;
    const log = app.subgraphs.log;
    app.decorateRequest('statePosition', null);
    app.addHook('preHandler', async (request, reply) => positionOf(request, reply, log?.events ?? null));
    registerInvalidationRoute(app, cache, log, options.modules);
    registerGauges(app.metrics, cache);
    if (!cache || !log) return;
    const stopTap = log.events.tap((event) => cache.onEvent(event));
    app.addHook('onClose', async () => stopTap());
    let probes: { stop(): Promise<void> } | null = null;
    // A quarter of the bound between probes: a consumer caught up is seen as such well within it.
    const probe = () =>
      cache
        .probe()
        .catch((error: unknown) =>
          app.log.warn({ err: error }, 'state cache: the event log probe failed; nothing is served from the cache until one succeeds'),
        );
    app.addHook('onReady', async () => {
      await probe();
      probes = periodic(probe, Math.max(25, Math.floor(cache.options.maxLagMs / 4)));
    });
    app.addHook('onClose', async () => probes?.stop());
  },
  { name: 'state-cache', fastify: '5.x', dependencies: ['metrics', 'subgraphs', 'supergraph', 'edge-guard'] },
);

/**
 * The answer policy of read-your-writes: a GraphQL answer whose operation wrote carries the newest log
 * position of its writes, as the `state-position` header and `extensions.statePosition`.
 */
export function statePositionPolicy(): OperationPolicy {
  return {
    answered(answer, operation) {
      const written = operation?.context.statePositions?.written;
      if (written === null || written === undefined) return;
      answer.headers.set(STATE_POSITION_HEADER, written.toString());
      answer.extensions = { ...answer.extensions, statePosition: written.toString() };
    },
  };
}

/** The request's `state-position`, checked: a log position no later than the newest write. */
async function positionOf(request: FastifyRequest, reply: FastifyReply, events: EventHub | null): Promise<FastifyReply | undefined> {
  const header = request.headers[STATE_POSITION_HEADER];
  if (header === undefined) return undefined;
  const text = Array.isArray(header) ? header.join(',') : header.trim();
  if (!isEventCursor(text)) {
    return refuse(
      reply,
      request,
      'BAD_USER_INPUT',
      `${STATE_POSITION_HEADER}: must be a log position an answer of this API carried (one whole number up to 9223372036854775807), not "${String(text).slice(0, 40)}"`,
    );
  }
  const position = BigInt(text);
  if (events && position > events.delivered) {
    const newest = await events.newestWritten();
    if (position > newest) {
      return refuse(reply, request, 'BAD_USER_INPUT', `${STATE_POSITION_HEADER}: ${text} is beyond the newest write: send back a position an answer carried`);
    }
  }
  request.statePosition = position;
  return undefined;
}

const invalidation = z
  .object({
    type: z.string().min(1).max(64).optional(),
    key: z.string().min(1).max(200).optional(),
    tag: z.string().min(1).max(270).optional(),
    all: z.literal(true).optional(),
  })
  .strict()
  .refine((b) => [b.type !== undefined && b.key === undefined, b.key !== undefined, b.tag !== undefined, b.all === true].filter(Boolean).length === 1, {
    message: 'send exactly one of: {"type"}, {"type","key"}, {"tag"}, {"all": true}',
  })
  .refine((b) => b.key === undefined || b.type !== undefined, { message: '"key" needs its "type"' });

/**
 * `POST /admin/state-cache/invalidate` (`ops:admin`): evicts by type (`{"type":"Machine"}`), one row
 * (`{"type":"Machine","key":"M-1"}`), a tag (`{"tag":"Booking@tenant-a"}`) or everything (`{"all":true}`),
 * here at once and on every gateway reading the same log (an event carries the tags).
 */
function registerInvalidationRoute(app: FastifyInstance, cache: StateCache | null, log: { db: Database } | null, modules: readonly SubgraphModule[]): void {
  const types = new Set(modules.flatMap((m) => Object.values(m.state ?? {}).map((t) => t.type)));
  app.post('/admin/state-cache/invalidate', { config: { requires: 'ops:admin' } }, async (request, reply) => {
    const parsed = invalidation.safeParse(request.body ?? {});
    if (!parsed.success) {
      const detail = parsed.error.issues.map((i) => `${i.path.join('.') || 'body'}: ${i.message}`).join('; ');
      return refuse(reply, request, 'BAD_USER_INPUT', detail);
    }
    const { type, key, tag, all } = parsed.data;
    if (type !== undefined && !types.has(type)) {
      return refuse(reply, request, 'BAD_USER_INPUT', `type: no state type "${type}" (known: ${[...types].sort().join(', ')})`);
    }
    if (tag !== undefined && !STATE_TAG.test(tag)) {
      return refuse(reply, request, 'BAD_USER_INPUT', `tag: "${tag.slice(0, 60)}" is not a tag (Type, Type:key or Type@tenant, no spaces)`);
    }
    const named = tag === undefined ? type : typeOfTag(tag);
    if (!all && !types.has(named!)) {
      return refuse(reply, request, 'BAD_USER_INPUT', `tag: "${String(tag).slice(0, 60)}" names no state type (known: ${[...types].sort().join(', ')})`);
    }
    // As a write names what it changed: a row or an owner's rows with their collection (the lists that hold
    // them), a type with every tag of it (`Type:*`), everything with `*`.
    const tags = all ? ['*'] : key !== undefined ? [named!, stateTag.key(named!, key)] : tag !== undefined && tag !== named ? [named!, tag] : [`${named!}:*`];
    const evicted = cache ? (all ? cache.evictAll('admin') : cache.evictTags(tags, 'admin')) : 0;
    // Every gateway reading the same log hears of it, as of a write (this one's cache on or not).
    const ids = log
      ? await log.db.transaction((tx) =>
          appendEvents(tx, [
            {
              topic: INVALIDATED_TOPIC,
              payload: { by: request.principal?.id ?? null, tags },
              audience: { owner: ownerOf(SYSTEM_PRINCIPAL), grain: 'principal' },
              tags,
            },
          ]),
        )
      : [];
    return reply.code(200).send({ evicted, position: ids.at(-1) ?? null, ...(cache ? {} : { cache: 'off' }) });
  });
}

function registerGauges(metrics: GatewayMetrics, cache: StateCache | null): void {
  if (!cache) return;
  const perSubgraph = (m: Map<string, number>, result: string, gauge: { set(labels: Record<string, string>, value: number): void }) => {
    for (const [subgraph, n] of m) gauge.set({ subgraph, result }, n);
  };
  metrics.gauge({
    name: 'state_cache_reads_total',
    help: 'Subgraph state reads answered from the state cache (hit), fetched (miss), or fetched because the cache could not serve (bypass: the event log not caught up, a state-position not reached), since start',
    labelNames: ['subgraph', 'result'],
    collect: (gauge) => {
      perSubgraph(cache.stats.hits, 'hit', gauge);
      perSubgraph(cache.stats.misses, 'miss', gauge);
      perSubgraph(cache.stats.bypassed, 'bypass', gauge);
    },
  });
  metrics.gauge({
    name: 'state_cache_evictions_total',
    help: 'State cache entries dropped, by cause: event (a write read from the log), write (a write answered here), admin, memory, tenant (its share), expired',
    labelNames: ['cause'],
    collect: (gauge) => {
      for (const [cause, n] of cache.stats.evictions) gauge.set({ cause }, n);
    },
  });
  metrics.gauge({
    name: 'state_cache_fills_fenced_total',
    help: 'State reads not kept because a write named what they read while they were fetched',
    collect: (gauge) => gauge.set(cache.stats.fenced),
  });
  metrics.gauge({
    name: 'state_cache_bytes',
    help: 'Memory held by the state cache (keys and answers as text)',
    collect: (gauge) => gauge.set(cache.snapshot().bytes),
  });
  metrics.gauge({ name: 'state_cache_entries', help: 'Answers held by the state cache', collect: (gauge) => gauge.set(cache.snapshot().entries) });
  metrics.gauge({
    name: 'state_cache_serving',
    help: '1 while the state cache serves (the event log caught up within STATE_CACHE_MAX_LAG_MS, its lineage intact), 0 otherwise',
    collect: (gauge) => gauge.set(cache.serving() ? 1 : 0),
  });
  metrics.gauge({
    name: 'state_cache_consumer_lag_seconds',
    help: "Time since this gateway last caught up with the event log (the state cache's staleness bound while it serves)",
    collect: (gauge) => {
      const lag = cache.snapshot().lagMs;
      if (lag !== null) gauge.set(lag / 1000);
    },
  });
  metrics.gauge({
    name: 'state_cache_consumer_lag_events',
    help: 'Outbox events not yet read by this gateway at its last probe of the log',
    collect: (gauge) => {
      const lag = cache.snapshot().lagEvents;
      if (lag !== null) gauge.set(lag);
    },
  });
}
