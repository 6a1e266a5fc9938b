import { GraphQLError, type DocumentNode } from 'graphql';
import { DEMO_PRINCIPAL, type Principal } from '../../platform/principal.js';
import { principalKey } from '../execution/context.js';
import type { OperationPolicy } from '../execution/operation-policy.js';
import { conditionKey, operationOf, rootFields } from './operation-fields.js';

/*
 * A token bucket per principal (per gateway process): RATE_LIMIT_BURST tokens, refilled at
 * RATE_LIMIT_PER_S. An operation costs one token, a heavy one (a quantum run, a materialization, a training
 * frame, an audit, a key) more. An operation the bucket cannot pay for runs nothing: 429 `RATE_LIMITED`
 * with `Retry-After` and the `RateLimit-*` headers. One principal's flood never drains another's bucket.
 * The demo principal (demo mode) is not limited: it stands for every caller of a demo deployment.
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

  constructor(private readonly options: RateLimitOptions) {
    this.now = options.now ?? Date.now;
  }

  take(principal: Principal, cost: number): RateDecision {
    const { perSecond, burst } = this.options;
    if (principal === DEMO_PRINCIPAL || perSecond <= 0) return { allowed: true, unlimited: true, limit: burst, remaining: burst, retryAfter: 0, reset: 0 };
    const key = principalKey(principal);
    const now = this.now();
    const kept = this.buckets.get(key);
    const tokens = kept ? Math.min(burst, kept.tokens + ((now - kept.at) / 1000) * perSecond) : burst;
    this.buckets.delete(key);
    // An operation dearer than the whole bucket takes a full one.
    const charge = Math.min(cost, burst);
    const allowed = tokens >= charge;
    const left = allowed ? tokens - charge : tokens;
    this.buckets.set(key, { tokens: left, at: now });
    if (this.buckets.size > MAX_BUCKETS) this.buckets.delete(this.buckets.keys().next().value!);
    return {
      allowed,
      unlimited: false,
      limit: burst,
      remaining: Math.floor(left),
      retryAfter: allowed ? 0 : Math.ceil((charge - left) / perSecond),
      reset: Math.ceil((burst - left) / perSecond),
    };
  }
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

/**
 * Every HTTP request pays its first token as it arrives, right after authentication and before its body
 * is read (gateway/server.ts), so a refused flood costs the server little; this policy charges the extra
 * cost of heavy operations once the operation is known, after authorization.
 */
export function rateLimitPolicy(limiter: RateLimiter): OperationPolicy {
  return {
    resolved({ document, operationName, variables, context }, headers) {
      const extra = operationCost(document, operationName, variables) - 1;
      if (extra <= 0) return;
      const decision = limiter.take(context.principal, extra);
      if (!decision.allowed) throw rateLimitedError(context.principal, decision);
      for (const [name, value] of rateHeaders(decision)) headers.set(name, value);
    },
  };
}
