import { Kind, parse, print, visit, type ASTNode } from 'graphql';
import type { z } from 'zod';
import type { Clock } from '../../platform/clock.js';
import type { RestRoute } from '../../platform/rest.js';

/*
 * Helpers of the REST/GraphQL equivalence test (test/gateway/rest/rest-equivalence.test.ts): the optional parameters a
 * route's schemas declare, the GraphQL request a GraphQL client would send for the same request (an
 * omitted optional left out of the operation), and masking of the fields two identical servers answer
 * differently (random ids, measured times).
 */

/** A clock that stands still unless moved: two servers sharing it see the same instants. */
export class FrozenClock implements Clock {
  constructor(private at: number) {}
  now(): Date {
    return new Date(this.at);
  }
  advance(ms: number): void {
    this.at += ms;
  }
}

type Def = { type: string; innerType?: z.ZodType; in?: z.ZodType; shape?: Record<string, z.ZodType>; element?: z.ZodType; options?: z.ZodType[] };
const defOf = (schema: z.ZodType): Def => (schema as unknown as { _zod: { def: Def } })._zod.def;

/** True when the caller may leave the field out (`.optional()`, `.default()`, `.nullish()`). */
function isOptional(schema: z.ZodType): boolean {
  const def = defOf(schema);
  if (def.type === 'optional' || def.type === 'default' || def.type === 'prefault') return true;
  if (def.type === 'pipe') return isOptional(def.in!);
  return false;
}

/** The schema a value is checked by, past the optional, default, nullable and pipe wrappers. */
function unwrap(schema: z.ZodType): z.ZodType {
  const def = defOf(schema);
  if (['optional', 'default', 'prefault', 'nullable', 'readonly', 'catch'].includes(def.type)) return unwrap(def.innerType!);
  if (def.type === 'pipe') return unwrap(def.in!);
  return schema;
}

/**
 * Every optional parameter of a schema, as paths (`ttl`, `constraints.max_latency_ms`, `paths[].jitter_ms`),
 * nested ones included (an optional field of an optional object, or of the items of a list).
 */
function optionalPaths(schema: z.ZodType | undefined, prefix: string): string[] {
  if (!schema) return [];
  const out: string[] = [];
  const walk = (s: z.ZodType, at: string) => {
    const inner = unwrap(s);
    const def = defOf(inner);
    if (def.type === 'object') {
      for (const [key, field] of Object.entries(def.shape!)) {
        const path = `${at}${key}`;
        if (isOptional(field)) out.push(path);
        walk(field, `${path}.`);
      }
    } else if (def.type === 'array') {
      walk(def.element!, `${at.slice(0, -1)}[].`);
    }
  };
  walk(schema, prefix);
  return out;
}

/** True when the schema takes a list anywhere (a batch, a frame's entity rows): a request sized by its body. */
export function takesList(schema: z.ZodType | undefined): boolean {
  if (!schema) return false;
  const def = defOf(unwrap(schema));
  if (def.type === 'array') return true;
  if (def.type === 'object') return Object.values(def.shape!).some(takesList);
  return false;
}

/** The optional parameters of a route: body, query and the headers it reads. */
export function routeOptionals(route: RestRoute): string[] {
  return [...optionalPaths(route.body, 'body.'), ...optionalPaths(route.query, 'query.'), ...optionalPaths(route.headers, 'headers.')];
}

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** Sets (or, with `undefined`, deletes) `path` in a copy of `value`; `[]` applies to every item of a list. */
export function setPath(value: Json | undefined, path: string, to: Json | undefined): Json | undefined {
  const [head, ...rest] = path.split('.');
  const list = head!.endsWith('[]');
  const key = list ? head!.slice(0, -2) : head!;
  const object = (value && typeof value === 'object' && !Array.isArray(value) ? { ...value } : {}) as Record<string, Json>;
  if (rest.length === 0 && !list) {
    if (to === undefined) delete object[key];
    else object[key] = to;
    return object;
  }
  if (list) {
    const items = Array.isArray(object[key]) ? object[key] : [];
    object[key] = items.map((item) => (rest.length === 0 ? (to as Json) : (setPath(item, rest.join('.'), to) as Json)));
    return object;
  }
  const next = setPath(object[key], rest.join('.'), to);
  if (next === undefined) delete object[key];
  else object[key] = next;
  return object;
}

/** Leaf paths (`input.ttl`, `paths.0.jitterMs`, `first`) where two variable objects differ. */
export function differingPaths(a: unknown, b: unknown, at: string[] = []): string[][] {
  const isObject = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null;
  if (isObject(a) && isObject(b) && Array.isArray(a) === Array.isArray(b)) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    return [...keys].flatMap((k) => differingPaths(a[k], b[k], [...at, k]));
  }
  return JSON.stringify(a) === JSON.stringify(b) ? [] : [at];
}

/** A copy of `variables` without the values at `paths`; a top-level variable left out is named in `dropped`. */
export function withoutPaths(variables: Record<string, unknown>, paths: readonly string[][]): { variables: Record<string, unknown>; dropped: Set<string> } {
  const copy = structuredClone(variables);
  const dropped = new Set<string>();
  for (const path of paths) {
    if (path.length === 1) {
      delete copy[path[0]!];
      dropped.add(path[0]!);
      continue;
    }
    let node: unknown = copy;
    for (const key of path.slice(0, -1)) node = node && typeof node === 'object' ? (node as Record<string, unknown>)[key] : undefined;
    if (node && typeof node === 'object') {
      const last = path.at(-1)!;
      if (Array.isArray(node)) continue;
      delete (node as Record<string, unknown>)[last];
    }
  }
  return { variables: copy, dropped };
}

/**
 * The operation as a GraphQL client writes it when it has no value for `dropped`: those variables are not
 * declared, and the arguments and input fields they fed are left out, so the schema's defaults apply.
 */
export function withoutVariables(operation: string, dropped: ReadonlySet<string>): string {
  if (dropped.size === 0) return operation;
  const usesDropped = (node: { value: ASTNode }) => node.value.kind === Kind.VARIABLE && dropped.has(node.value.name.value);
  const edited = visit(parse(operation), {
    VariableDefinition: (node) => (dropped.has(node.variable.name.value) ? null : undefined),
    Argument: (node) => (usesDropped(node) ? null : undefined),
    ObjectField: (node) => (usesDropped(node) ? null : undefined),
  });
  return print(edited);
}

/**
 * A copy of `value` with the fields at `paths` replaced by a marker: `a.b`, `list[].id`, `*` for every key
 * of an object (`timings.*`). Fields two servers answer differently for the same request.
 */
export function mask(value: unknown, paths: readonly string[]): unknown {
  let out = structuredClone(value);
  for (const path of paths) out = maskOne(out, path.split('.'));
  return out;
}

function maskOne(value: unknown, parts: string[]): unknown {
  if (parts.length === 0 || value === null || typeof value !== 'object') return value;
  const [head, ...rest] = parts as [string, ...string[]];
  const record = value as Record<string, unknown>;
  const list = head.endsWith('[]');
  const key = list ? head.slice(0, -2) : head;
  const keys = key === '*' ? Object.keys(record) : [key];
  for (const k of keys) {
    if (!(k in record)) continue;
    if (list) {
      if (Array.isArray(record[k])) record[k] = (record[k] as unknown[]).map((item) => (rest.length === 0 ? '(masked)' : maskOne(item, rest)));
    } else {
      record[k] = rest.length === 0 ? (record[k] === null ? null : '(masked)') : maskOne(record[k], rest);
    }
  }
  return record;
}
