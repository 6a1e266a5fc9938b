import type { Readable } from 'node:stream';
import { z } from 'zod';
import type { ErrorCode, FieldProblem } from './errors.js';

type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

interface RestInput<B, Q, P> {
  body: B;
  query: Q;
  params: P;
}

/**
 * One documented REST path, declared as data: the gateway's REST engine validates the request with the
 * schemas, runs `operation` through the gateway with `variables(...)`, and answers `result(data)`.
 * Errors map to problem details through the error catalogue, so REST and GraphQL never disagree.
 */
export interface RestRoute<B = unknown, Q = unknown, P = unknown, D = unknown> {
  method: HttpMethod;
  /** Path under the subgraph prefix, fastify syntax (`/booking/:booking_id/track`). */
  path: string;
  summary: string;
  /** Served without an API key when API_KEYS is set: a public document such as the JWKS. @default false */
  public?: boolean;
  /** The GraphQL operation this path runs. */
  operation: string;
  body?: z.ZodType<B>;
  query?: z.ZodType<Q>;
  params?: z.ZodType<P>;
  /**
   * The operation's variables. A parameter the caller left out stays undefined (the engine leaves it out of
   * the request), never null: it must mean what it means to a GraphQL client that omits the argument, the
   * schema's default (test/gateway/rest/rest-equivalence.test.ts holds every route to that).
   */
  variables(input: RestInput<B, Q, P>): Record<string, unknown>;
  /**
   * REST names of the operation's arguments where they differ from the snake_case of the GraphQL name
   * (`{ after: 'cursor' }`), so an error the operation reports names the field as the caller sent it.
   */
  fieldNames?: Readonly<Record<string, string>>;
  /** Maps the operation's `data` to the documented snake_case body. */
  result(data: D): unknown;
  /**
   * The documented body of a 200 answer: the OpenAPI document's response schema, and, outside production,
   * checked against every answer `result` gives (a mismatch is a fault, so the suite keeps them in step).
   */
  response: z.ZodType;
  /**
   * Domain codes this path answers besides those every path may (BAD_USER_INPUT for a path with input,
   * UNAUTHENTICATED, PAYLOAD_TOO_LARGE and UNSUPPORTED_MEDIA_TYPE for a body, UPSTREAM_UNAVAILABLE,
   * SERVICE_UNAVAILABLE, INTERNAL_SERVER_ERROR): the OpenAPI document lists them under their statuses.
   */
  errors?: readonly ErrorCode[];
  /** Request headers the path reads (documentation; the operation reads them from the context). */
  headers?: z.ZodObject;
  /** Media types of other answers `represent` gives besides JSON (`text/csv`), with what they hold. */
  representations?: Readonly<Record<string, string>>;
  /**
   * Request bodies of other media types this path accepts (`text/csv`), by media type: each parser turns the
   * text into the JSON body shape (then checked by `body` as any JSON body), or names what is wrong with it.
   * Only these paths accept those types; everywhere else they stay 415.
   */
  textBodies?: Readonly<Record<string, (text: string) => { value: unknown } | { errors: FieldProblem[] }>>;
  /**
   * Another representation of the answer chosen by the request's Accept header (CSV), or a large answer
   * written as a stream rather than one string; undefined answers `result(data)` as JSON.
   */
  represent?(data: D, accept: string | undefined): { contentType: string; body: Readable } | undefined;
}

/** Keeps each route's generic types while collecting routes of different shapes in one table. */
export function defineRoute<B = undefined, Q = undefined, P = undefined, D = unknown>(route: RestRoute<B, Q, P, D>): RestRoute {
  return route;
}

/*
 * Building blocks of the documented answers (`response`), shared by every route table.
 */

/** An instant as every answer gives it: the DateTime scalar's `toISOString()`, UTC with milliseconds. */
export const instant = () => z.iso.datetime({ precision: 3 });

/**
 * `schema` or null. Not `.nullable()`: for a schema with a components id, zod-to-openapi 9 writes that as
 * `allOf: [$ref, { type: [object, null] }]`, which no null satisfies (and, met first, makes the component
 * itself nullable); a union is written `anyOf: [$ref, { type: null }]`.
 */
export const orNull = <T extends z.ZodType>(schema: T) => z.union([schema, z.null()]);

/**
 * A value the schema types as String but the documented answer narrows to known values (a currency, a key
 * type): one of them, or a fault naming the field (never an answer outside its contract).
 */
export function oneOf<const T extends string>(value: string, allowed: readonly T[], field: string): T {
  if ((allowed as readonly string[]).includes(value)) return value as T;
  throw new Error(`${field} is ${JSON.stringify(value)}, not one of ${allowed.join(', ')}`);
}

/** A mapping that met a value its contract rules out: a fault of the service (500), never sent on. */
export function fault(message: string): never {
  throw new Error(message);
}

const GRAPHQL_NAME = /^[_A-Za-z][_0-9A-Za-z]*$/;

/**
 * camelCase field paths of GraphQL inputs, as the snake_case names REST callers sent. Only GraphQL names
 * are converted: a segment that cannot be one, such as the header name `Idempotency-Key`, stays as it is.
 */
export function snakeFieldPath(path: string): string {
  return path
    .split('.')
    .map((segment, i) => {
      if (/^\d+$/.test(segment)) return `[${segment}]`;
      const name = GRAPHQL_NAME.test(segment) ? segment.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`) : segment;
      return `${i > 0 ? '.' : ''}${name}`;
    })
    .join('');
}
