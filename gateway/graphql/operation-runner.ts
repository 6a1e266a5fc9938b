import type { IncomingHttpHeaders } from 'node:http';
import { HeaderMap } from '@apollo/server';
import { BREAK, getOperationAST, OperationTypeNode, visit, type DocumentNode } from 'graphql';
import type { Principal } from '../../platform/principal.js';
import type { FastifyRequest } from 'fastify';
import { gatewayContextFrom, principalOf, type GatewayContext } from '../pipeline/context.js';
import type { Intake, Pipeline } from '../pipeline/pipeline.js';
import type { GraphQLServer } from './apollo.js';

/*
 * One GraphQL operation run as /graphql runs a JSON POST of it, for the doors that carry operations inside
 * something else: each entry of a batch (gateway/graphql/route.ts) and each tool call of the MCP endpoint
 * (gateway/agents/mcp.ts). The operation passes the pipeline's document step and limits here (`judge`),
 * then runs with every other check (validation, authorization, the rate charge, audit, usage) by the direct
 * execution when it takes it, by Apollo Server's own pipeline otherwise (`run`): the executions that serve
 * a plain POST, with the same context, so these doors refuse what /graphql refuses and charge what it
 * charges. What the caller sent stays the caller's: only text is read from what it names.
 */

/** What a caller sent for one operation, as a JSON POST body carries it. */
export type OperationParams = Record<string, unknown>;

/** The request around an operation: who sends it, and what its door knows of the request. */
export interface OperationCaller {
  principal: Principal;
  /** The HTTP request's headers: the forwarded ones, and the client's name and version. */
  headers: IncomingHttpHeaders;
  /** The client the operation names its trusted documents by (`apollographql-client-name` unless given). */
  clientName?: string | undefined;
  /** The log position the caller asked to read at least (`state-position`). */
  statePosition: bigint | null;
  /** Takes the rate-limit tokens the request paid at its edge: the first operation of a request gets them. */
  takePrepaid(): number;
}

/** An answer to one operation: Apollo Server's status, headers and JSON (no trailing newline). */
export interface RunAnswer {
  status: number;
  headers: ReadonlyMap<string, string>;
  body: string;
}

/** An operation past the document step and the limits, ready to run. */
export interface Judged {
  ok: true;
  intake: Intake;
  /** The parameters Apollo Server is given: the resolved text as `query`, what named it removed. */
  params: OperationParams;
  variables: Record<string, unknown> | null;
  operationName: string | null;
  /** The operation it selects is a subscription, or it defers a fragment: answered as a stream, not here. */
  streamed: 'subscription' | 'defer' | null;
}

/** An operation refused before anything ran: the status and JSON a single POST of it is answered with. */
export interface Refused {
  ok: false;
  status: number;
  code: string;
  message: string;
  body: string;
}

export class OperationRunner {
  constructor(
    private readonly pipeline: Pipeline,
    private readonly server: GraphQLServer,
  ) {}

  /** The document step and the request limits: the operation to run, or its refusal. Nothing runs here. */
  judge(params: OperationParams, caller: OperationCaller): Judged | Refused {
    const sent = graphQLParamsOf({ ...params, query: '' });
    if (!sent) {
      return refusedWith(400, 'BAD_REQUEST', '`variables` must be an object and `operationName` a string');
    }
    const taken = this.pipeline.intake({
      params,
      variables: sent.variables,
      operationName: sent.operationName,
      principal: caller.principal,
      clientName: caller.clientName ?? clientNameOf(caller.headers['apollographql-client-name']),
    });
    if (!taken.ok) return refusedWith(taken.status, taken.code, taken.message, taken.error.extensions);
    const { intake } = taken;
    const operation = getOperationAST(intake.document, sent.operationName);
    const streamed = operation?.operation === OperationTypeNode.SUBSCRIPTION ? 'subscription' : defers(intake.document) ? 'defer' : null;
    return {
      ok: true,
      intake,
      params: intake.byId ? withQuery(params, intake.source) : params,
      variables: sent.variables,
      operationName: sent.operationName,
      streamed,
    };
  }

  /** Runs a judged operation (not a streamed one) with every check after the limits; `contentType` is the answer's media type. */
  async run(judged: Judged, caller: OperationCaller, contentType: string): Promise<RunAnswer> {
    const context = gatewayContextFrom(caller.headers, caller.principal);
    context.intake = judged.intake;
    context.prepaid = caller.takePrepaid();
    context.statePositions!.asked = caller.statePosition;
    if (caller.clientName !== undefined) context.client = { name: caller.clientName, version: null };
    // Whole answers only: a deferred fragment is refused before this (`streamed`).
    context.incremental = { accepted: false };
    const direct = this.server.direct;
    const accepted = direct && isPlain(judged.params) ? direct.accept(judged.intake.source, judged.operationName) : null;
    if (direct && accepted) {
      const answer = await direct.http(accepted, judged.variables, context, contentType);
      return { status: answer.status, headers: answer.headers, body: answer.body.trimEnd() };
    }
    return this.runByApollo(judged, context, contentType);
  }

  /** Apollo Server's own pipeline (introspection, a document that does not validate, direct execution off). */
  private async runByApollo(judged: Judged, context: GatewayContext, contentType: string): Promise<RunAnswer> {
    const headers = new HeaderMap([
      ['content-type', 'application/json'],
      ['accept', contentType],
    ]);
    const response = await this.server.apollo.executeHTTPGraphQLRequest({
      httpGraphQLRequest: { method: 'POST', headers, search: '', body: judged.params },
      context: () => Promise.resolve(context),
    });
    if (response.body.kind !== 'complete') throw new Error('a streamed answer reached a door that answers whole operations');
    return { status: response.status ?? 200, headers: response.headers, body: response.body.string.trimEnd() };
  }
}

/** A refusal before anything ran, with the JSON a single POST of it is answered with. */
export function refusedWith(status: number, code: string, message: string, extensions: Record<string, unknown> = {}): Refused {
  return { ok: false, status, code, message, body: JSON.stringify({ errors: [{ message, extensions: { ...extensions, code } }] }) };
}

/** Whether a document defers a fragment (answered as a stream: never inside a batch or a tool call). */
function defers(document: DocumentNode): boolean {
  let found = false;
  visit(document, {
    Directive(node) {
      if (node.name.value !== 'defer') return undefined;
      found = true;
      return BREAK;
    },
  });
  return found;
}

/**
 * Parameters the direct execution reads as Apollo Server would: `variables` an object (or none),
 * `operationName` a string (or none), no `extensions` left once a persisted query's hash is resolved.
 */
export function isPlain(params: OperationParams): boolean {
  const { variables, operationName, extensions } = params;
  if (variables != null && (typeof variables !== 'object' || Array.isArray(variables))) return false;
  if (operationName != null && typeof operationName !== 'string') return false;
  return extensions == null;
}

/**
 * The query, variables and operation name of a GraphQL-over-HTTP request (a JSON body, or GET parameters
 * whose variables are JSON text); null when they are not well-formed, which Apollo then answers.
 */
export function graphQLParamsOf(raw: unknown): { query: string; variables: Record<string, unknown> | null; operationName: string | null } | null {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return null;
  const { query, variables, operationName } = raw as Record<string, unknown>;
  if (typeof query !== 'string') return null;
  let vars: unknown = variables ?? null;
  if (typeof vars === 'string') {
    try {
      vars = JSON.parse(vars) as unknown;
    } catch {
      return null;
    }
  }
  if (vars !== null && (typeof vars !== 'object' || Array.isArray(vars))) return null;
  return { query, variables: vars as Record<string, unknown> | null, operationName: typeof operationName === 'string' ? operationName : null };
}

/** The parameters with the resolved text as `query`, and what named it removed (Apollo Server sees plain text). */
export function withQuery(params: Record<string, unknown>, query: string): Record<string, unknown> {
  const { documentId: _documentId, doc_id: _docId, extensions, ...rest } = params;
  const others = typeof extensions === 'object' && extensions !== null ? Object.entries(extensions).filter(([key]) => key !== 'persistedQuery') : [];
  return { ...rest, query, ...(others.length > 0 ? { extensions: Object.fromEntries(others) } : {}) };
}

/**
 * The caller of an operation an HTTP request carries: its principal, headers and asked log position, and
 * `prepaid` tokens handed to its first operation only.
 */
export function requestCaller(request: FastifyRequest, prepaid: number, headers: IncomingHttpHeaders = request.headers): OperationCaller {
  let left = prepaid;
  return {
    principal: principalOf(request),
    headers,
    statePosition: request.statePosition,
    takePrepaid: () => {
      const paid = left;
      left = 0;
      return paid;
    },
  };
}

export function clientNameOf(header: string | string[] | undefined): string | undefined {
  const name = Array.isArray(header) ? header[0] : header;
  return name?.trim() || undefined;
}
