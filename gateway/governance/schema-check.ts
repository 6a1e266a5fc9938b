import { Supergraph } from '@apollo/federation-internals';
import { CriticalityLevel, diff, type Change } from '@graphql-inspector/core';
import { isEnumType, isInputObjectType, isInterfaceType, isIntrospectionType, isObjectType, parse, type GraphQLSchema } from 'graphql';
import { createAuthorizer } from '../security/authorization.js';
import { coordinatesOf } from './coordinates.js';
import type { UsageRow } from './usage.js';

/*
 * A schema change checked before it lands: the API schema of the proposed supergraph against the one served,
 * each change classed by @graphql-inspector/core (breaking, dangerous, safe), and every breaking change looked
 * up where it would hurt: the clients and operations that used its coordinate (field usage), and the trusted
 * documents and REST routes that name it. A breaking change nobody uses or registered passes; one that
 * somebody does fails the check.
 */

/** A registered operation: a trusted document of a client, or a REST route's operation. */
export interface RegisteredOperation {
  client: string;
  /** The document's id, or the REST route (`GET /rental/fleet/machines`). */
  id: string;
  name: string | null;
  body: string;
}

export interface CheckInput {
  /** The supergraph SDL served now (a running gateway's, or the checked-in one). */
  served: string;
  /** The supergraph SDL composed from the working tree. */
  proposed: string;
  registered: readonly RegisteredOperation[];
  /** Who used a coordinate in the window; absent when no usage store was asked. */
  usage?: (coordinate: string) => Promise<UsageRow[]>;
}

type Class = 'breaking' | 'dangerous' | 'safe';

interface CheckedChange {
  class: Class;
  message: string;
  /** The schema coordinate the change is about (`Type.field`, `Type.field(arg:)`, `Enum.VALUE`), when it has one. */
  coordinate: string | null;
  /** Clients and operations that used it (breaking changes only). */
  usedBy: UsageRow[];
  /** Trusted documents and REST routes that name it (breaking changes only). */
  registeredIn: Array<Omit<RegisteredOperation, 'body'>>;
}

export interface CheckReport {
  changes: CheckedChange[];
  /** Deprecated coordinates of the proposed schema, with who still uses them. */
  deprecated: Array<{ coordinate: string; reason: string; usedBy: UsageRow[] }>;
  /** Whether usage was consulted (a gateway or usage store was given). */
  usageConsulted: boolean;
  /** A breaking change that a client used or a registered operation names. */
  failed: boolean;
}

/** The API schema (what clients see) of a supergraph SDL. */
export function apiSchemaOf(supergraphSdl: string): GraphQLSchema {
  return Supergraph.build(createAuthorizer(supergraphSdl).plannerSdl).apiSchema().toGraphQLJSSchema();
}

export async function checkSchema(input: CheckInput): Promise<CheckReport> {
  const served = apiSchemaOf(input.served);
  const proposed = apiSchemaOf(input.proposed);
  const usedIn = registeredCoordinates(served, input.registered);
  const changes: CheckedChange[] = [];
  for (const change of await diff(served, proposed)) {
    const klass = classOf(change);
    const coordinate = coordinateOf(change);
    const checked: CheckedChange = { class: klass, message: change.message, coordinate, usedBy: [], registeredIn: [] };
    if (klass === 'breaking' && coordinate) {
      checked.registeredIn = registeredUsing(usedIn, coordinate);
      if (input.usage) checked.usedBy = await usedBy(input.usage, served, coordinate);
    }
    changes.push(checked);
  }
  const deprecated = [];
  for (const { coordinate, reason } of deprecatedCoordinates(proposed))
    deprecated.push({ coordinate, reason, usedBy: input.usage ? await input.usage(coordinate).catch(() => []) : [] });
  return {
    changes,
    deprecated,
    usageConsulted: input.usage !== undefined,
    failed: changes.some((c) => c.class === 'breaking' && (c.usedBy.length > 0 || c.registeredIn.length > 0)),
  };
}

function classOf(change: Change): Class {
  if (change.criticality.level === CriticalityLevel.Breaking) return 'breaking';
  if (change.criticality.level === CriticalityLevel.Dangerous) return 'dangerous';
  return 'safe';
}

/** Inspector's path (`Type.field.arg`) as a schema coordinate (`Type.field(arg:)`). */
function coordinateOf(change: Change): string | null {
  if (!change.path) return null;
  const parts = change.path.split('.');
  if (parts.length >= 3) return `${parts[0]}.${parts[1]}(${parts[2]}:)`;
  return change.path;
}

/** Every coordinate each registered operation names, against the served schema. */
function registeredCoordinates(
  schema: GraphQLSchema,
  registered: readonly RegisteredOperation[],
): Array<{ operation: RegisteredOperation; coordinates: Set<string> }> {
  return registered.flatMap((operation) => {
    try {
      return [{ operation, coordinates: new Set(coordinatesOf(schema, parse(operation.body), null).fixed) }];
    } catch {
      return [];
    }
  });
}

/** The registered operations that name `coordinate` (or, for a type, any of its members). */
function registeredUsing(usedIn: ReturnType<typeof registeredCoordinates>, coordinate: string): CheckedChange['registeredIn'] {
  const typeOnly = !coordinate.includes('.');
  return usedIn
    .filter(({ coordinates }) => coordinates.has(coordinate) || (typeOnly && [...coordinates].some((c) => c.startsWith(`${coordinate}.`))))
    .map(({ operation: { client, id, name } }) => ({ client, id, name }));
}

/** Usage of a coordinate; for a type removed whole, of each of its fields. */
async function usedBy(usage: NonNullable<CheckInput['usage']>, served: GraphQLSchema, coordinate: string): Promise<UsageRow[]> {
  if (coordinate.includes('.')) return usage(coordinate);
  const type = served.getType(coordinate);
  const members =
    type && (isObjectType(type) || isInterfaceType(type) || isInputObjectType(type))
      ? Object.keys(type.getFields()).map((f) => `${coordinate}.${f}`)
      : type && isEnumType(type)
        ? type.getValues().map((v) => `${coordinate}.${v.name}`)
        : [];
  return (await Promise.all(members.map((m) => usage(m)))).flat();
}

function deprecatedCoordinates(schema: GraphQLSchema): Array<{ coordinate: string; reason: string }> {
  const found: Array<{ coordinate: string; reason: string }> = [];
  for (const type of Object.values(schema.getTypeMap())) {
    if (isIntrospectionType(type)) continue;
    if (isObjectType(type) || isInterfaceType(type)) {
      for (const field of Object.values(type.getFields())) {
        if (field.deprecationReason) found.push({ coordinate: `${type.name}.${field.name}`, reason: field.deprecationReason });
        for (const arg of field.args)
          if (arg.deprecationReason) found.push({ coordinate: `${type.name}.${field.name}(${arg.name}:)`, reason: arg.deprecationReason });
      }
    } else if (isInputObjectType(type)) {
      for (const field of Object.values(type.getFields()))
        if (field.deprecationReason) found.push({ coordinate: `${type.name}.${field.name}`, reason: field.deprecationReason });
    } else if (isEnumType(type)) {
      for (const value of type.getValues())
        if (value.deprecationReason) found.push({ coordinate: `${type.name}.${value.name}`, reason: value.deprecationReason });
    }
  }
  return found;
}
