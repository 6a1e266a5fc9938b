import type { GraphQLDataSource, ServiceMap } from '@apollo/gateway';
import { buildOperationContext, executeQueryPlan } from '@apollo/gateway';
import { Supergraph, operationFromDocument, type Schema } from '@apollo/federation-internals';
import { QueryPlanner, type FetchNode, type PlanNode, type QueryPlan } from '@apollo/query-planner';
import type { GatewayGraphQLRequestContext } from '@apollo/server-gateway-interface';
import { GraphQLError, Kind, print, validate, visit, type DocumentNode, type ExecutionResult, type GraphQLFormattedError, type GraphQLSchema } from 'graphql';
import { Channel } from '../../platform/channel.js';
import { checkCustomScalars } from '../../platform/scalars.js';
import { StreamOverflowError } from '../../platform/event-hub.js';
import { principalKey, type GatewayContext } from '../pipeline/context.js';
import type { Principal } from '../../platform/principal.js';
import { isLoss, RESUME_AFTER, resumable, takeCursor } from './resumable.js';

/** A subgraph's answer to a subscription operation: an event stream, or errors instead of one. */
export type UpstreamResult = AsyncIterableIterator<ExecutionResult> | { errors: readonly GraphQLFormattedError[] };

/** Opens a subscription operation on the subgraph that owns its root field (in process or over the network). */
export type UpstreamOpener = (
  service: string,
  request: { query: string; variables: Record<string, unknown>; operationName?: string | undefined },
  context: GatewayContext,
  /** `exclusive`: a resuming stream with one subscriber, to be read at that subscriber's pace. */
  options: { exclusive: boolean },
) => Promise<UpstreamResult>;

/** The cursor of each event delivered whose root field has one (an SSE event's `id`). */
const cursors = new WeakMap<ExecutionResult, string>();

/** The cursor of an event this executor delivered, or null when its root field has none. */
export function cursorOf(result: ExecutionResult): string | null {
  return cursors.get(result) ?? null;
}

export class SlowSubscriberError extends Error {
  constructor() {
    super('Subscriber too slow: events overflowed its buffer');
    this.name = 'SlowSubscriberError';
  }
}

export interface SubscriptionExecutorOptions {
  supergraphSdl: string;
  /** The data sources queries use; per-event entity fetches go through them too. */
  services: () => ServiceMap;
  openUpstream: UpstreamOpener;
  /** Results that may wait for one subscriber before it is dropped as too slow. @default 1000 */
  maxQueuedPerSubscriber?: number;
  /**
   * How long a stream whose subgraph was lost keeps trying to reopen it from its last event before its
   * subscribers get UPSTREAM_UNAVAILABLE; 0 ends it at once. @default 0
   */
  resumeGraceMs?: number;
  logger: { error(obj: unknown, msg?: string): void; warn(obj: unknown, msg?: string): void };
}

/**
 * Runs federated subscriptions, which @apollo/gateway's executor refuses. The query planner plans a
 * subscription as a `primary` fetch (the subscription opened on the owning subgraph) and the `rest` of the
 * plan; for each upstream event the gateway's own `executeQueryPlan` runs `Sequence[primary, rest]` with
 * the primary fetch answered by that event, so fields of other subgraphs resolve per event as in a query.
 * Identical live subscriptions (no `after`) share one upstream stream and one execution per event.
 * When a subgraph is lost (it restarts, its relay restarts), a stream reopens its upstream from the last
 * event it delivered, within `resumeGraceMs` (gateway/subscriptions/resumable.ts): its subscribers see a
 * pause, not an error, a gap or a repeat.
 */
interface PlanningParts {
  schema: GraphQLSchema;
  apiSchema: Schema;
  supergraphSchema: GraphQLSchema;
  planner: QueryPlanner;
}

export class SubscriptionExecutor {
  /**
   * What planning needs (swapped whole by `reload`): built on first use; its planner by the first
   * subscription or by `warm` after the server listens (a tenth of a second of a start).
   */
  private built: PlanningParts | null = null;
  private plans = new Map<string, QueryPlan>();
  private readonly shared = new Map<string, SharedStream>();
  /** Every stream open, shared or a resumer's own. */
  private readonly streams = new Set<SharedStream>();

  constructor(private readonly options: SubscriptionExecutorOptions) {}

  private get parts(): PlanningParts {
    return (this.built ??= SubscriptionExecutor.build(this.options.supergraphSdl));
  }

  /** Builds what planning needs now rather than at the first subscription (the start's warm-up). */
  warm(): void {
    void this.parts.planner;
  }

  /** The API schema subscriptions are planned against. */
  get schema(): GraphQLSchema {
    return this.parts.schema;
  }

  private get apiSchema(): Schema {
    return this.parts.apiSchema;
  }

  private get supergraphSchema(): GraphQLSchema {
    return this.parts.supergraphSchema;
  }

  private get planner(): QueryPlanner {
    return this.parts.planner;
  }

  /** Everything planning needs, built from a supergraph SDL; throws when the SDL is not a valid supergraph. */
  static build(supergraphSdl: string): PlanningParts {
    const supergraph = Supergraph.build(supergraphSdl);
    const apiSchema = supergraph.apiSchema();
    const schema = apiSchema.toGraphQLJSSchema();
    checkCustomScalars(schema);
    // The API schema is read at once (clients' schema, the cache hints); the planner and the supergraph's
    // own schema only by the first subscription or the warm-up: half of the build's time.
    let planning: { supergraphSchema: GraphQLSchema; planner: QueryPlanner } | null = null;
    const planned = () => (planning ??= { supergraphSchema: supergraph.schema.toGraphQLJSSchema(), planner: new QueryPlanner(supergraph) });
    return {
      schema,
      apiSchema,
      get supergraphSchema() {
        return planned().supergraphSchema;
      },
      get planner() {
        return planned().planner;
      },
    };
  }

  /**
   * Plans new subscriptions against another supergraph (already built and checked: `build`). Every open
   * stream whose operation is still valid goes on as it is; the others end with an error naming what the
   * new supergraph no longer has. Returns how many ended.
   */
  reload(built: PlanningParts, authorize?: (operation: StreamOperation) => GraphQLError | null): number {
    this.built = built;
    this.plans = new Map();
    let ended = 0;
    for (const stream of [...this.streams]) {
      const invalid = validate(built.schema, stream.document);
      if (invalid.length === 0) {
        // Valid still: judged again by the new supergraph's rules, for the principal it was opened for.
        const refused = authorize?.(stream.operation);
        if (!refused) continue;
        ended++;
        stream.endWith(
          new GraphQLError(`The supergraph was reloaded and this subscription is no longer allowed: ${refused.message}`, {
            extensions: { ...refused.extensions },
          }),
        );
        continue;
      }
      ended++;
      stream.endWith(
        new GraphQLError(
          `The supergraph was reloaded and this subscription is no longer valid (${invalid.map((e) => e.message).join('; ')}): subscribe again`,
          {
            extensions: { code: 'GRAPHQL_VALIDATION_FAILED' },
          },
        ),
      );
    }
    return ended;
  }

  /** Live subscriptions open now (shared streams count once). */
  get upstreamCount(): number {
    return this.shared.size;
  }

  async subscribe(args: {
    document: DocumentNode;
    operationName?: string | null | undefined;
    variables: Record<string, unknown>;
    context: GatewayContext;
    /** Called the moment this subscriber's queue overflows (its connection should close at once). */
    onSlow?: () => void;
    /**
     * Resume after this cursor instead of where the operation says (an SSE `Last-Event-ID`); the operation's
     * root field must take `after`.
     */
    after?: string;
  }): Promise<AsyncIterableIterator<ExecutionResult> | ExecutionResult> {
    const operationName = args.operationName ?? undefined;
    // Every event's cursor is read (cursorOf) where the root field has one, whether or not lost streams reopen.
    const resume = resumable(this.schema, args.document, operationName, args.variables);
    if (args.after !== undefined && !resume) {
      return {
        errors: [
          new GraphQLError(
            'Last-Event-ID: this subscription cannot resume from a cursor (its root field takes no `after` argument or its events no `cursor`)',
            {
              extensions: { code: 'BAD_REQUEST' },
            },
          ),
        ],
      };
    }
    const document = resume?.document ?? args.document;
    const variables = resume ? { ...args.variables, [RESUME_AFTER]: args.after ?? resume.initialAfter } : args.variables;
    const text = print(document);
    let plan: QueryPlan;
    try {
      plan = this.plan(text, document, operationName);
    } catch (error) {
      return { errors: [error instanceof GraphQLError ? error : new GraphQLError(String(error), { extensions: { code: 'GRAPHQL_VALIDATION_FAILED' } })] };
    }
    const node = plan.node;
    if (!node || node.kind !== 'Subscription') {
      return { errors: [new GraphQLError('Not a subscription operation', { extensions: { code: 'BAD_REQUEST' } })] };
    }
    const resumes = args.after !== undefined || hasAfterArgument(args.document, args.variables);
    // One principal's stream is never shared with another: what it may see differs.
    const key = `${operationName ?? ''}\u0000${text}\u0000${stableJson(variables)}\u0000${principalKey(args.context.principal)}`;
    if (!resumes) {
      const existing = this.shared.get(key);
      if (existing) {
        // A stream may still be opening: a joiner shares its refusal as well as its events.
        const joined = existing.join(args.onSlow);
        const refused = await existing.open();
        if (refused) return { errors: refused.map(toGraphQLError) };
        return joined;
      }
    }
    const stream = new SharedStream({
      executor: this,
      clientDocument: args.document,
      primary: node.primary,
      rest: node.rest,
      document,
      operationName,
      variables,
      context: args.context,
      exclusive: resumes,
      resume: resume ? { rootKey: resume.rootKey, initialAfter: args.after ?? resume.initialAfter, graceMs: this.resumeGraceMs } : null,
      onEmpty: () => {
        if (this.shared.get(key) === stream) this.shared.delete(key);
        this.streams.delete(stream);
      },
    });
    this.streams.add(stream);
    if (!resumes) this.shared.set(key, stream);
    // Join before opening, so no event can pass before the first subscriber listens.
    const channel = stream.join(args.onSlow);
    const refused = await stream.open();
    if (refused) return { errors: refused.map(toGraphQLError) };
    return channel;
  }

  /** Executes `Sequence[primary, rest]` with the primary fetch answered by one upstream event. */
  async executeEvent(args: {
    primary: FetchNode;
    rest: PlanNode | undefined;
    event: ExecutionResult;
    document: DocumentNode;
    operationName: string | undefined;
    variables: Record<string, unknown>;
    context: GatewayContext;
  }): Promise<ExecutionResult> {
    const services = { ...this.options.services() };
    const real = services[args.primary.serviceName];
    const eventSource: GraphQLDataSource = {
      process: async (options) => {
        if (options.request.query === args.primary.operation) {
          return {
            ...(args.event.data !== undefined ? { data: args.event.data } : {}),
            ...(args.event.errors ? { errors: args.event.errors.map((e) => ('toJSON' in e ? e.toJSON() : e)) } : {}),
          };
        }
        if (!real) throw new Error(`no data source for ${args.primary.serviceName}`);
        return real.process(options);
      },
    };
    services[args.primary.serviceName] = eventSource;
    const queryPlan: QueryPlan = {
      kind: 'QueryPlan',
      node: args.rest ? { kind: 'Sequence', nodes: [args.primary, args.rest] } : args.primary,
    };
    const request = { query: print(args.document), variables: args.variables, operationName: args.operationName };
    const requestContext = {
      request,
      context: args.context,
      document: args.document,
      operationName: args.operationName ?? null,
      metrics: {},
      logger: { debug() {}, info() {}, warn: (m: unknown) => this.options.logger.warn(m), error: (m: unknown) => this.options.logger.error(m) },
      cache: undefined,
      overallCachePolicy: undefined,
    } as unknown as GatewayGraphQLRequestContext;
    const operationContext = buildOperationContext({
      schema: this.schema,
      operationDocument: args.document,
      operationName: args.operationName,
    });
    const result = await executeQueryPlan(queryPlan, services, requestContext, operationContext, this.supergraphSchema, this.apiSchema);
    return {
      ...(result.data !== undefined ? { data: result.data } : {}),
      ...(result.errors ? { errors: result.errors.map(toGraphQLError) } : {}),
    };
  }

  openUpstream(primary: FetchNode, variables: Record<string, unknown>, context: GatewayContext, exclusive: boolean) {
    const used: Record<string, unknown> = {};
    for (const name of primary.variableUsages ?? []) if (name in variables) used[name] = variables[name];
    return this.options.openUpstream(primary.serviceName, { query: primary.operation, variables: used, operationName: primary.operationName }, context, {
      exclusive,
    });
  }

  get maxQueued(): number {
    return this.options.maxQueuedPerSubscriber ?? 1000;
  }

  get resumeGraceMs(): number {
    return this.options.resumeGraceMs ?? 0;
  }

  /** Streams reopened after their subgraph was lost, since start (for /metrics and tests). */
  resumed = 0;

  private plan(text: string, document: DocumentNode, operationName: string | undefined): QueryPlan {
    const key = `${operationName ?? ''}\u0000${text}`;
    let plan = this.plans.get(key);
    if (!plan) {
      const operation = operationFromDocument(this.apiSchema, document, { operationName });
      plan = this.planner.buildQueryPlan(operation);
      if (this.plans.size > 1000) this.plans.clear();
      this.plans.set(key, plan);
    }
    return plan;
  }
}

/** A live subscription as a reload judges it again. */
export interface StreamOperation {
  document: DocumentNode;
  operationName: string | undefined;
  variables: Record<string, unknown>;
  principal: Principal;
}

interface SharedStreamArgs {
  executor: SubscriptionExecutor;
  /** The operation as the client sent it: a reload checks it against the new schema. */
  clientDocument: DocumentNode;
  primary: FetchNode;
  rest: PlanNode | undefined;
  document: DocumentNode;
  operationName: string | undefined;
  variables: Record<string, unknown>;
  context: GatewayContext;
  /**
   * A resuming subscription has its stream to itself: its replay may be long, so the stream waits for the
   * subscriber to take events instead of overflowing it. A shared live stream never waits for anyone.
   */
  exclusive: boolean;
  /** How the stream reopens its upstream from its last event when the subgraph is lost; null: it ends. */
  resume: { rootKey: string; initialAfter: unknown; graceMs: number } | null;
  onEmpty: () => void;
}

/** Waits between attempts to reopen a lost upstream: 100 ms, doubling to 2 s. */
const REOPEN_FIRST_MS = 100;
const REOPEN_MAX_MS = 2000;

/** One upstream subscription and its executed events, fanned out to every subscriber's bounded channel. */
class SharedStream {
  private upstream: AsyncIterableIterator<ExecutionResult> | undefined;
  private readonly subscribers = new Set<Channel<ExecutionResult>>();
  private opening: Promise<readonly GraphQLFormattedError[] | null> | undefined;
  private ended = false;

  constructor(private readonly args: SharedStreamArgs) {}

  /** Opens the upstream once; resolves to errors if the subgraph refused the subscription. */
  open(): Promise<readonly GraphQLFormattedError[] | null> {
    this.opening ??= (async () => {
      const result = await this.args.executor.openUpstream(this.args.primary, this.args.variables, this.args.context, this.args.exclusive);
      if ('errors' in result && !(Symbol.asyncIterator in result)) {
        this.end();
        return result.errors;
      }
      this.upstream = result as AsyncIterableIterator<ExecutionResult>;
      void this.pump();
      return null;
    })();
    return this.opening;
  }

  join(onSlow?: () => void): AsyncIterableIterator<ExecutionResult> {
    const channel: Channel<ExecutionResult> = new Channel<ExecutionResult>(
      () => this.leave(channel),
      this.args.executor.maxQueued,
      () => {
        // A consumer that stopped reading never pulls the error: tell its connection now.
        onSlow?.();
        return new SlowSubscriberError();
      },
    );
    if (this.ended) void channel.return();
    else this.subscribers.add(channel);
    return channel;
  }

  private leave(channel: Channel<ExecutionResult>): void {
    this.subscribers.delete(channel);
    if (this.subscribers.size === 0) this.end();
  }

  /** The operation as the client sent it (before it was made resumable). */
  get document(): DocumentNode {
    return this.args.clientDocument;
  }

  /** The operation, its variables and the principal it runs for (a reload judges it again). */
  get operation(): StreamOperation {
    return {
      document: this.args.clientDocument,
      operationName: this.args.operationName,
      variables: this.args.variables,
      principal: this.args.context.principal,
    };
  }

  /** Ends the stream with one last result: this error. */
  endWith(error: GraphQLError): void {
    for (const s of this.subscribers) s.push({ errors: [error] });
    this.end();
  }

  /** Ends the stream; each subscriber still receives what is queued for it (and a recorded failure). */
  private end(): void {
    if (this.ended) return;
    this.ended = true;
    this.args.onEmpty();
    void this.upstream?.return?.();
    for (const s of this.subscribers) s.end();
    this.subscribers.clear();
  }

  private async pump(): Promise<void> {
    let upstream = this.upstream!;
    /** The cursor of the last event delivered, where a reopened upstream starts. */
    let cursor: unknown = this.args.resume?.initialAfter ?? null;
    /** When the upstream was lost (null while it is live), and the wait before the next attempt. */
    let lostAt: number | null = null;
    let wait = REOPEN_FIRST_MS;
    try {
      for (;;) {
        const item = await upstream.next();
        if (this.ended) break;
        if (item.done) break;
        const resume = this.args.resume;
        if (resume && isLoss(item.value)) {
          lostAt ??= Date.now();
          const left = lostAt + resume.graceMs - Date.now();
          if (left > 0) {
            // Reopen from the last event delivered; a subgraph still away answers with another loss.
            await new Promise((resolve) => setTimeout(resolve, Math.min(wait, left)));
            wait = Math.min(wait * 2, REOPEN_MAX_MS);
            if (this.ended) break;
            void upstream.return?.();
            const reopened = await this.reopen(cursor);
            if ('errors' in reopened) {
              for (const s of this.subscribers) s.push({ errors: reopened.errors.map(toGraphQLError) });
              break;
            }
            upstream = this.upstream = reopened;
            continue;
          }
        } else if (lostAt !== null) {
          lostAt = null;
          wait = REOPEN_FIRST_MS;
          this.args.executor.resumed++;
        }
        let result = await this.args.executor.executeEvent({ ...this.args, event: item.value });
        if (resume) {
          const taken = takeCursor(result, resume.rootKey);
          result = taken.result;
          if (taken.cursor !== null) {
            cursor = taken.cursor;
            cursors.set(result, taken.cursor);
          }
        }
        for (const s of this.subscribers) s.push(result);
        if (this.args.exclusive) for (const s of this.subscribers) await s.room(Math.max(1, this.args.executor.maxQueued >> 1));
      }
    } catch (error) {
      // Events piling up unread upstream mean the same as a full subscriber queue: a slow consumer.
      const failure = error instanceof StreamOverflowError ? new SlowSubscriberError() : error;
      for (const s of this.subscribers) s.fail(failure);
    } finally {
      this.end();
    }
  }

  /** The upstream opened again from `after`, or the subgraph's refusal (a loss comes back as a stream that yields one). */
  private async reopen(after: unknown): Promise<AsyncIterableIterator<ExecutionResult> | { errors: readonly GraphQLFormattedError[] }> {
    const variables = { ...this.args.variables, [RESUME_AFTER]: after };
    try {
      const result = await this.args.executor.openUpstream(this.args.primary, variables, this.args.context, this.args.exclusive);
      if (Symbol.asyncIterator in result) return result as AsyncIterableIterator<ExecutionResult>;
      const { errors } = result;
      if (isLoss({ errors: errors as ExecutionResult['errors'] })) return lostStream(errors);
      return { errors };
    } catch (error) {
      return lostStream([{ message: String(error), extensions: { code: 'UPSTREAM_UNAVAILABLE' } }]);
    }
  }
}

/** A stream that yields one loss and ends: what a subgraph still away looks like to the pump. */
function lostStream(errors: readonly GraphQLFormattedError[]): AsyncIterableIterator<ExecutionResult> {
  let given = false;
  return {
    async next() {
      if (given) return { done: true, value: undefined };
      given = true;
      return { done: false, value: { errors } as unknown as ExecutionResult };
    },
    async return() {
      return { done: true, value: undefined };
    },
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}

/**
 * A resuming subscription names its cursor in an `after` argument. Every field of the document is looked
 * at, fragments included: when in doubt the subscription gets a stream of its own (never sharing a live
 * stream would cost a resumer its replay).
 */
function hasAfterArgument(document: DocumentNode, variables: Record<string, unknown>): boolean {
  let found = false;
  const defaults = new Set<string>();
  visit(document, {
    VariableDefinition(node) {
      if (node.defaultValue && node.defaultValue.kind !== Kind.NULL) defaults.add(node.variable.name.value);
    },
    Argument(node) {
      if (node.name.value !== 'after') return;
      if (node.value.kind === Kind.VARIABLE) {
        const name = node.value.name.value;
        const value = variables[name];
        if ((value !== null && value !== undefined) || (!(name in variables) && defaults.has(name))) found = true;
      } else if (node.value.kind !== Kind.NULL) found = true;
    },
  });
  return found;
}

function stableJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'undefined';
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`;
  const record = value as Record<string, unknown>;
  return `{${Object.keys(record)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${stableJson(record[k])}`)
    .join(',')}}`;
}

function toGraphQLError(error: GraphQLFormattedError | GraphQLError): GraphQLError {
  if (error instanceof GraphQLError) return error;
  return new GraphQLError(error.message, { ...(error.path ? { path: error.path } : {}), extensions: error.extensions ?? {} });
}
