import type { FastifyReply, FastifyRequest } from 'fastify';
import { GraphQLError, type DocumentNode } from 'graphql';
import { DEMO_PRINCIPAL, type Principal } from '../../platform/principal.js';
import type { OperationPolicy } from '../pipeline/operation-policy.js';
import { conditionKey, operationOf, rootFields } from './operation-fields.js';
import { refuse } from '../http/problem.js';

/*
 * A token bucket per identity (tenant and principal id, per gateway process): RATE_LIMIT_BURST tokens,
 * refilled at RATE_LIMIT_PER_S. Every operation, on every door, costs one token, a heavy one (a quantum run,
 * a materialization, a training frame, an audit, a key) more. An operation the bucket cannot pay for runs
 * nothing: 429 `RATE_LIMITED` with `Retry-After` and the `RateLimit-*` headers; one that costs more than
 * the whole bucket can never be paid for and is refused at once (400 `COST_LIMIT_EXCEEDED`). One
 * principal's flood never drains another's bucket, and one identity holding differently scoped
 * credentials (JWTs) has one bucket. The demo principal (demo mode) is not limited: it stands for every
 * caller of a demo deployment.
 */

/** Extra cost of heavy root fields, in tokens (every other operation costs 1). */
const HEAVY_FIELDS: Readonly<Record<string, number>> = {
  startQuantumRun: 20,
  materialize: 20,
  pitTraining: 10,
  leakageAudit: 10,
  featureImportance: 10,
  generateQuantumKey: 5,
};

export interface RateLimitOptions {
  perSecond: number;
  burst: number;
  now?: () => number;
}

interface Bucket {
  tokens: number;
  at: number;
}

export interface RateDecision {
  allowed: boolean;
  /** Not limited at all (the demo principal, or RATE_LIMIT_PER_S 0): no RateLimit headers. */
  unlimited: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the bucket holds enough for this cost (0 when allowed). */
  retryAfter: number;
  /** Seconds until the bucket is full again. */
  reset: number;
}

/** Buckets kept before the least recently used are dropped (a dropped bucket is a full one). */
const MAX_BUCKETS = 100_000;

export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();
  private readonly now: () => number;
  /** Takes refused since start (`rate_limit_refusals_total`). */
  refused = 0;

  constructor(private readonly options: RateLimitOptions) {
    this.now = options.now ?? Date.now;
  }

  /** The bucket's size (RATE_LIMIT_BURST): no operation may cost more. */
  get burst(): number {
    return this.options.burst;
  }

  /** Takes `cost` tokens from the principal's bucket, if it holds them; `cost` is at most `burst`. */
  take(principal: Principal, cost: number): RateDecision {
    const { perSecond, burst } = this.options;
    if (principal === DEMO_PRINCIPAL || perSecond <= 0) return { allowed: true, unlimited: true, limit: burst, remaining: burst, retryAfter: 0, reset: 0 };
    if (cost > burst) throw new Error(`a cost of ${cost} tokens is more than the bucket holds (${burst}): refuse it before taking (costOverBucketError)`);
    const key = bucketKey(principal);
    const now = this.now();
    const kept = this.buckets.get(key);
    const tokens = kept ? Math.min(burst, kept.tokens + ((now - kept.at) / 1000) * perSecond) : burst;
    this.buckets.delete(key);
    const allowed = tokens >= cost;
    if (!allowed) this.refused++;
    const left = allowed ? tokens - cost : tokens;
    this.buckets.set(key, { tokens: left, at: now });
    if (this.buckets.size > MAX_BUCKETS) this.buckets.delete(this.buckets.keys().next().value!);
    return {
      allowed,
      unlimited: false,
      limit: burst,
      remaining: Math.floor(left),
      retryAfter: allowed ? 0 : Math.ceil((cost - left) / perSecond),
      reset: Math.ceil((burst - left) / perSecond),
    };
  }

  /** Whether the principal is limited at all (not the demo principal, and RATE_LIMIT_PER_S above 0). */
  limits(principal: Principal): boolean {
    return principal !== DEMO_PRINCIPAL && this.options.perSecond > 0;
  }
}

/** The bucket of a principal: its tenant and id, whatever scopes the credential that named it carries. */
function bucketKey(principal: Principal): string {
  return `${principal.tenant}\u0000${principal.id}`;
}

/**
 * The cost of an operation: one token, plus the extra cost of each heavy root field it runs, however it is
 * selected (directly, in an inline fragment or a named one; `@skip`/`@include` resolved).
 */
export function operationCost(document: DocumentNode, operationName?: string | null, variables?: Readonly<Record<string, unknown>> | null): number {
  // The cost depends on the document, the operation and what its conditions resolve to: kept per document.
  const key = `${operationName ?? ''}\n${conditionKey(document, variables)}`;
  let byKey = costs.get(document);
  if (!byKey) costs.set(document, (byKey = new Map<string, number>()));
  const known = byKey.get(key);
  if (known !== undefined) return known;
  const operation = operationOf(document, operationName);
  let cost = 1;
  for (const field of operation ? rootFields(document, operation, variables) : []) cost += HEAVY_FIELDS[field.name.value] ?? 0;
  if (byKey.size >= MAX_COSTS_PER_DOCUMENT) byKey.clear();
  byKey.set(key, cost);
  return cost;
}

/** Costs kept per document (one per operation and resolution of its conditions). */
const MAX_COSTS_PER_DOCUMENT = 64;
const costs = new WeakMap<DocumentNode, Map<string, number>>();

/** The RateLimit headers of a decision (IETF draft "RateLimit header fields for HTTP"). */
export function rateHeaders(decision: RateDecision): [string, string][] {
  if (decision.unlimited) return [];
  const headers: [string, string][] = [
    ['ratelimit-limit', String(decision.limit)],
    ['ratelimit-remaining', String(decision.remaining)],
    ['ratelimit-reset', String(decision.reset)],
  ];
  if (!decision.allowed) headers.push(['retry-after', String(decision.retryAfter)]);
  return headers;
}

export function rateLimitedError(principal: Principal, decision: RateDecision): GraphQLError {
  return new GraphQLError(
    `Principal ${principal.id} is over its rate limit (${decision.limit} tokens, refilled per second): retry in ${decision.retryAfter} s`,
    { extensions: { code: 'RATE_LIMITED', retryAfter: decision.retryAfter, http: { status: 429, headers: new Map(rateHeaders(decision)) } } },
  );
}

/** An operation that costs more than the whole bucket: no wait would let it run. */
function costOverBucketError(principal: Principal, cost: number, burst: number): GraphQLError {
  return new GraphQLError(
    `The operation costs ${cost} tokens; principal ${principal.id}'s bucket holds ${burst} (RATE_LIMIT_BURST), so it can never run under this limit`,
    { extensions: { code: 'COST_LIMIT_EXCEEDED', limit: { name: 'rate_limit_burst', max: burst }, http: { status: 400 } } },
  );
}

/**
 * The rate charge of the operation pipeline (gateway/pipeline/pipeline.ts): every operation pays its full
 * cost (`operationCost`), whichever door it came in by. An HTTP request pays one token as it arrives, right
 * after authentication and before its body is read (gateway/security/edge-guard.ts), so a refused flood
 * costs the server little; that token is the first operation's, taken off what it owes here
 * (`GatewayContext.prepaid`). A WebSocket operation pays all of it here.
 */
export function rateLimitPolicy(limiter: RateLimiter): OperationPolicy {
  return {
    resolved({ document, operationName, variables, context }, headers) {
      const { principal } = context;
      if (!limiter.limits(principal)) return;
      const cost = operationCost(document, operationName, variables);
      if (cost > limiter.burst) throw costOverBucketError(principal, cost, limiter.burst);
      const prepaid = Math.min(cost, context.prepaid ?? 0);
      context.prepaid = 0;
      if (cost - prepaid <= 0) return;
      const decision = limiter.take(principal, cost - prepaid);
      if (!decision.allowed) throw rateLimitedError(principal, decision);
      for (const [name, value] of rateHeaders(decision)) headers.set(name, value);
    },
  };
}

/** Health probes one client address may send a second, and at once: a flood of them is answered 429. */
const PROBES_PER_S = 20;
const PROBES_BURST = 40;

/** The admission of public probes: a token bucket per client address; a refused probe is answered 429 here. */
export function probeAdmission(): (request: FastifyRequest, reply: FastifyReply) => Promise<boolean> {
  const probes = new RateLimiter({ perSecond: PROBES_PER_S, burst: PROBES_BURST });
  return async (request, reply) => {
    const decision = probes.take({ id: request.ip, tenant: 'health-probes', scopes: [] }, 1);
    if (decision.allowed) return true;
    for (const [name, value] of rateHeaders(decision)) void reply.header(name, value);
    await refuse(reply, request, 'RATE_LIMITED', `Too many health probes from ${request.ip}: at most ${PROBES_PER_S} a second`);
    return false;
  };
}
