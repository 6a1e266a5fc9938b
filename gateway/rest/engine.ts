import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { GraphQLError, type GraphQLFormattedError } from 'graphql';
import type { z } from 'zod';
import { isErrorCode, type FieldProblem } from '../../platform/errors.js';
import { snakeFieldPath, type RestRoute } from '../../platform/rest.js';
import { boundedFields, checkInput, fieldsDetail } from '../../platform/validate.js';
import type { Principal } from '../../platform/principal.js';
import { gatewayContextOfRequest, principalOf, type GatewayContext } from '../pipeline/context.js';
import type { Pipeline } from '../pipeline/pipeline.js';
import { problem, sendProblem, type Problem } from '../http/problem.js';

interface OperationResult {
  data?: Record<string, unknown> | null;
  errors?: readonly GraphQLFormattedError[];
}

/** The client REST routes' operations are registered under (gateway/graphql/documents.ts): a safelist never refuses them. */
export const REST_CLIENT = 'rest';

/** Runs one GraphQL operation through the gateway (the same executor GraphQL clients reach). */
export type OperationExecutor = (operation: string, variables: Record<string, unknown>, context: GatewayContext) => Promise<OperationResult>;

/**
 * Registers a subgraph's REST route table under its prefix. Each request is validated against the
 * route's schemas, executed as the route's GraphQL operation, and answered with the route's mapping;
 * every error becomes problem details whose status comes from the error catalogue.
 */
export function registerRestRoutes(
  app: FastifyInstance,
  prefix: string,
  routes: readonly RestRoute[],
  execute: OperationExecutor,
  options: RestEngineOptions,
): void {
  for (const route of routes) {
    const textBodies = route.textBodies;
    if (!textBodies) {
      app.route(routeOptions(prefix, route, execute, options));
      continue;
    }
    // A path that takes another media type gets its parsers in a scope of its own (fastify encapsulation),
    // so every other path and /graphql keep answering 415 to it.
    void app.register(async (scoped) => {
      for (const type of Object.keys(textBodies)) {
        scoped.addContentTypeParser(type, { parseAs: 'string' }, (_request, body, done) => {
          done(null, { [TEXT_BODY]: { type, text: typeof body === 'string' ? body : body.toString('utf8') } });
        });
      }
      scoped.route(routeOptions(prefix, route, execute, options));
    });
  }
}

export interface RestEngineOptions {
  /**
   * The operation pipeline (gateway/pipeline/pipeline.ts): a route's operation is taken in like any other
   * (document resolution under REST's own client, the request limits on the route's variables) before it runs.
   */
  pipeline: Pipeline;
  /**
   * Check every JSON answer against the route's documented `response` schema (outside production): an
   * answer that strays from the OpenAPI document is a fault, answered 500 and logged, so tests catch it.
   */
  checkAnswers: boolean;
  /**
   * Judges the route's operation for the request's principal before its input is read (gateway/
   * authorization.ts): a caller who may not use the route learns nothing from validation. @default none
   */
  authorize?: (operation: string, principal: Principal) => GraphQLError | null;
}

/** An answer that does not match its route's documented schema (a fault of the server, never the caller). */
class UndocumentedAnswerError extends Error {
  constructor(route: string, issues: readonly z.core.$ZodIssue[]) {
    const first = issues
      .slice(0, 3)
      .map((i) => `${i.path.join('.') || '(body)'}: ${i.message}`)
      .join('; ');
    super(`the answer of ${route} does not match its documented schema: ${first}`);
    this.name = 'UndocumentedAnswerError';
  }
}

/** Marks a body that arrived as text of another media type, for the route's own parser. */
const TEXT_BODY = Symbol('text body');
type TextBody = { [TEXT_BODY]: { type: string; text: string } };
const isTextBody = (body: unknown): body is TextBody => typeof body === 'object' && body !== null && TEXT_BODY in body;

function routeOptions(prefix: string, route: RestRoute, execute: OperationExecutor, options: RestEngineOptions) {
  // How usage names the operation (`GET /rental/fleet/machines`): the route's own pattern, made once.
  const routeName = `${route.method} ${prefix}${route.path}`;
  return {
    method: route.method,
    url: `${prefix}${route.path}`,
    config: { public: route.public === true },
    exposeHeadRoute: route.method === 'GET',
    handler: async (request: FastifyRequest, reply: FastifyReply) => {
      const instance = request.url;
      const denied = options.authorize?.(route.operation, principalOf(request));
      if (denied) return sendProblem(reply, problemFromGraphQL(denied.toJSON(), [], instance, {}));
      if (isTextBody(request.body)) {
        const { type, text } = request.body[TEXT_BODY];
        const parsed = route.textBodies![type]!(text);
        if ('errors' in parsed) {
          const bounded = boundedFields(parsed.errors);
          return sendProblem(
            reply,
            problem('BAD_USER_INPUT', fieldsDetail(bounded.fields, bounded.truncated), {
              instance,
              errors: bounded.fields,
              errorsTruncated: bounded.truncated,
            }),
          );
        }
        request.body = parsed.value;
      }
      const input = readInput(route, request);
      if ('problem' in input) return sendProblem(reply, { ...input.problem, instance });
      const variables = omitUndefined(route.variables(input.value));
      const taken = options.pipeline.intake({
        params: { query: route.operation },
        variables,
        operationName: undefined,
        principal: principalOf(request),
        clientName: REST_CLIENT,
      });
      if (!taken.ok) return sendProblem(reply, problemFromGraphQL(taken.error.toJSON(), [], instance, route.fieldNames ?? {}));
      const context = gatewayContextOfRequest(request, taken.intake);
      context.route = routeName;
      const result = await execute(route.operation, variables, context);
      // A write's log position: a later request that sends it back reads state at least that new.
      const written = context.statePositions?.written;
      if (written !== null && written !== undefined) void reply.header('state-position', written.toString());
      const failure = result.errors?.[0];
      const retryAfter = failure?.extensions?.['retryAfter'];
      if (failure?.extensions?.['code'] === 'RATE_LIMITED' && typeof retryAfter === 'number') void reply.header('retry-after', String(retryAfter));
      if (failure) return sendProblem(reply, problemFromGraphQL(failure, result.errors ?? [], instance, route.fieldNames ?? {}));
      try {
        const other = route.represent?.(result.data ?? {}, request.headers.accept);
        if (other) return reply.code(200).type(other.contentType).send(other.body);
        const body = route.result(result.data ?? {});
        if (options.checkAnswers) {
          const checked = route.response.safeParse(body);
          if (!checked.success) throw new UndocumentedAnswerError(`${route.method} ${prefix}${route.path}`, checked.error.issues);
        }
        return reply.code(200).send(body);
      } catch (error) {
        if (error instanceof GraphQLError) return sendProblem(reply, problemFromGraphQL(error.toJSON(), [], instance, {}));
        throw error;
      }
    },
  };
}

/**
 * The variables as JSON carries them: an optional the caller left out is absent, not null. graphql-js reads
 * a variable present with the value undefined as null (a default would not apply), while over HTTP the same
 * key is dropped; leaving it out makes both mean what a GraphQL client that omits it means.
 */
function omitUndefined(variables: Record<string, unknown>): Record<string, unknown> {
  return hasUndefined(variables) ? (strip(variables) as Record<string, unknown>) : variables;
}

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype;

/** Whether a value holds an undefined anywhere in its arrays and plain objects (most requests: none, nothing copied). */
function hasUndefined(value: unknown): boolean {
  if (Array.isArray(value)) return value.some(hasUndefined);
  if (!isPlainObject(value)) return false;
  for (const key in value) if (value[key] === undefined || hasUndefined(value[key])) return true;
  return false;
}

function strip(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(strip);
  if (!isPlainObject(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) if (v !== undefined) out[key] = strip(v);
  return out;
}

type Parsed = { value: { body: unknown; query: unknown; params: unknown } } | { problem: Problem };

function readInput(route: RestRoute, request: FastifyRequest): Parsed {
  const fields: FieldProblem[] = [];
  const check = (schema: z.ZodType | undefined, value: unknown, where: 'body' | 'query' | 'params') => {
    if (!schema) return undefined;
    if (where === 'body' && (value === undefined || value === null || typeof value !== 'object' || Array.isArray(value))) {
      fields.push({ field: 'body', message: 'must be a JSON object (Content-Type: application/json)' });
      return undefined;
    }
    const checked = checkInput(schema, value ?? {});
    if ('data' in checked) return checked.data;
    for (const issue of checked.issues) {
      fields.push({ field: snakeFieldPath(issue.path.map(String).join('.') || where), message: issue.message });
    }
    return undefined;
  };
  if (!route.body && !isNoBody(request.body)) fields.push({ field: 'body', message: 'this path takes no body (send none, or {})' });
  const body = check(route.body, request.body, 'body');
  const query = check(route.query, request.query, 'query');
  const params = check(route.params, request.params, 'params');
  if (fields.length > 0) {
    const bounded = boundedFields(fields);
    return {
      problem: problem('BAD_USER_INPUT', fieldsDetail(bounded.fields, bounded.truncated), {
        errors: bounded.fields,
        errorsTruncated: bounded.truncated,
      }),
    };
  }
  return { value: { body, query, params } };
}

/** What a path without a body accepts: nothing, JSON null, or an empty object. */
function isNoBody(body: unknown): boolean {
  if (body === undefined || body === null) return true;
  return typeof body === 'object' && !Array.isArray(body) && Object.keys(body).length === 0;
}

function problemFromGraphQL(
  first: GraphQLFormattedError,
  all: readonly GraphQLFormattedError[],
  instance: string,
  fieldNames: Readonly<Record<string, string>>,
): Problem {
  const code = first.extensions?.['code'];
  const catalogued = isErrorCode(code) ? code : 'INTERNAL_SERVER_ERROR';
  let truncated = 0;
  const fields = all.flatMap((e) => {
    const list = e.extensions?.['fields'];
    const more = e.extensions?.['fieldsTruncated'];
    if (typeof more === 'number') truncated += more;
    return Array.isArray(list) ? (list as FieldProblem[]) : [];
  });
  if (fields.length > 0) {
    const bounded = boundedFields(fields.map((f) => ({ field: fieldNames[f.field] ?? snakeFieldPath(f.field), message: f.message })));
    const left = bounded.truncated + truncated;
    return problem(catalogued, fieldsDetail(bounded.fields, left), { instance, errors: bounded.fields, errorsTruncated: left });
  }
  const detail = catalogued === 'INTERNAL_SERVER_ERROR' ? 'Internal server error' : first.message;
  return problem(catalogued, detail, { instance });
}
