import { createHash } from 'node:crypto';
import type { GraphQLSchema } from 'graphql';
import { delegate } from '../../platform/delegate.js';
import { schemaWithDefer } from '../planner/defer.js';
import type { FederatedGateway } from '../sources/federated-gateway.js';
import { createAuthorizer, type Authorizer } from '../security/authorization.js';
import { createLimiter, type Limiter, type RequestLimits } from '../security/limits.js';
import { SubscriptionExecutor } from '../subscriptions/executor.js';
import { CachePolicies } from './cache-policy.js';

/*
 * The supergraph the gateway serves, and everything made from it: the authorizer (who may use which field),
 * the request limits (costs, list sizes), the cache hints, the schema clients see, the query planners of
 * queries and of subscriptions. A reload builds all of it from the new SDL first, and only when every part
 * builds swaps them together, in one synchronous step: a request in flight finishes on the supergraph it
 * started with, the next one starts on the new one. Live subscriptions whose operation is still valid go
 * on; the others end with an error that names what is gone. A reload that fails changes nothing and is
 * reported (`status()`, on /health).
 */

interface Parts {
  sdl: string;
  authorizer: Authorizer;
  limiter: Limiter;
  /** What needs the planned API schema: made once the gateway is attached (null before). */
  served: { schema: GraphQLSchema; cachePolicies: CachePolicies } | null;
}

export interface ReloadStatus {
  /** The first 12 hex digits of the SHA-256 of the SDL served. */
  hash: string;
  loadedAt: string;
  reloads: number;
  lastFailure: { at: string; error: string } | null;
}

export type ReloadResult = { ok: true; hash: string; unchanged: boolean; subscriptionsEnded: number } | { ok: false; error: string };

export class ServedSupergraph {
  private parts: Parts;
  private readonly state: ReloadStatus;
  /** Forward to the parts served now: whoever holds them sees a reload at once. */
  readonly authorizer: Authorizer = delegate(() => this.parts.authorizer);
  readonly limiter: Limiter = delegate(() => this.parts.limiter);
  readonly cachePolicies: CachePolicies = delegate(() => this.served().cachePolicies);

  private constructor(
    sdl: string,
    authorizer: Authorizer,
    private readonly limits: RequestLimits,
    private federated: FederatedGateway | null = null,
    private subscriptions: SubscriptionExecutor | null = null,
  ) {
    this.parts = { sdl, authorizer, limiter: createLimiter(authorizer.plannerSdl, limits), served: null };
    this.state = { hash: hashOf(sdl), loadedAt: new Date().toISOString(), reloads: 0, lastFailure: null };
  }

  /** The supergraph read at start; `attach` hands it the gateway and the subscriptions made from it. */
  static initial(sdl: string, limits: RequestLimits): ServedSupergraph {
    return new ServedSupergraph(sdl, createAuthorizer(sdl), limits);
  }

  /** The SDL the planners read (the supergraph without the security directives they do not support). */
  get plannerSdl(): string {
    return this.parts.authorizer.plannerSdl;
  }

  get sdl(): string {
    return this.parts.sdl;
  }

  /** The schema clients see now (with @defer). */
  readonly schema = (): GraphQLSchema => this.served().schema;

  attach(federated: FederatedGateway, subscriptions: SubscriptionExecutor): void {
    this.federated = federated;
    this.subscriptions = subscriptions;
    this.parts = { ...this.parts, served: servedParts(this.plannerSdl, subscriptions.schema) };
  }

  private served(): NonNullable<Parts['served']> {
    if (!this.parts.served) throw new Error('the supergraph is read before the gateway was attached');
    return this.parts.served;
  }

  status(): ReloadStatus {
    return { ...this.state };
  }

  /** Serves `sdl` if every part builds from it; otherwise keeps what is served and says why. */
  reload(sdl: string): ReloadResult {
    if (!this.federated || !this.subscriptions) throw new Error('reload before the gateway was attached');
    const hash = hashOf(sdl);
    if (hash === this.state.hash) {
      // The file is what is served (again): an earlier failure is over.
      this.state.lastFailure = null;
      return { ok: true, hash, unchanged: true, subscriptionsEnded: 0 };
    }
    let next: Parts;
    let built: ReturnType<typeof SubscriptionExecutor.build>;
    try {
      const authorizer = createAuthorizer(sdl);
      built = SubscriptionExecutor.build(authorizer.plannerSdl);
      next = { sdl, authorizer, limiter: createLimiter(authorizer.plannerSdl, this.limits), served: servedParts(authorizer.plannerSdl, built.schema) };
      // @apollo/gateway builds its own from the SDL here: when it refuses, nothing has been swapped yet.
      this.federated.update(next.authorizer.plannerSdl);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      this.state.lastFailure = { at: new Date().toISOString(), error: message };
      return { ok: false, error: message };
    }
    this.parts = next;
    // Live subscriptions are judged again by the new rules: those no longer allowed end, saying why.
    const authorizer = next.authorizer;
    const subscriptionsEnded = this.subscriptions.reload(built, ({ document, operationName, variables, principal }) =>
      authorizer.refusal(document, operationName, principal, variables),
    );
    Object.assign(this.state, { hash, loadedAt: new Date().toISOString(), reloads: this.state.reloads + 1, lastFailure: null });
    return { ok: true, hash, unchanged: false, subscriptionsEnded };
  }
}

/** The schema clients see (the API schema with @defer) and the cache hints read against it. */
function servedParts(plannerSdl: string, apiSchema: GraphQLSchema): NonNullable<Parts['served']> {
  const schema = schemaWithDefer(apiSchema);
  return { schema, cachePolicies: new CachePolicies(plannerSdl, schema) };
}

function hashOf(sdl: string): string {
  return createHash('sha256').update(sdl).digest('hex').slice(0, 12);
}
