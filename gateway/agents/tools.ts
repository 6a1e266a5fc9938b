import {
  getNamedType,
  getNullableType,
  getOperationAST,
  GraphQLEnumType,
  GraphQLInputObjectType,
  GraphQLList,
  GraphQLNonNull,
  GraphQLScalarType,
  typeFromAST,
  type GraphQLInputType,
  type GraphQLSchema,
  type OperationDefinitionNode,
} from 'graphql';
import type { TrustedDocument } from '../graphql/manifests.js';

/*
 * The MCP endpoint's tools, made from what clients registered: each registered query or mutation of the
 * clients a principal may act as is a tool, named by its operation, described by the comment its document
 * opens with, its input schema (JSON Schema, draft 2020-12) made from the operation's variables against the
 * schema served. A principal holding `schema:free-text` also gets `execute`, which runs any text.
 */

/** The tool that runs an operation's text (principals holding `schema:free-text` only). */
export const EXECUTE_TOOL = 'execute';

/** A JSON Schema object, as tools publish their input. */
type JsonSchema = Record<string, unknown>;

export interface DocumentTool {
  name: string;
  description: string;
  inputSchema: JsonSchema;
  document: TrustedDocument;
  /** The operation the document selects (its only one, or the one named as the document is). */
  operation: OperationDefinitionNode;
}

/** MCP's rule for tool names: 1 to 128 of letters, digits, `_`, `-` and `.`. */
const TOOL_NAME = /[^A-Za-z0-9_.-]/g;

/**
 * The tools of these documents (subscriptions are left out: a tool answers once). A name two documents
 * share is told apart by client (`client.Name`); a document whose operation the schema no longer serves is
 * left out.
 */
export function documentTools(documents: readonly TrustedDocument[], schema: GraphQLSchema, made: ToolParts): DocumentTool[] {
  const usable = documents.flatMap((document) => {
    let parts = made.get(document);
    if (parts === undefined) made.set(document, (parts = partsOf(document, schema)));
    return parts ? [{ document, ...parts }] : [];
  });
  const counts = new Map<string, number>();
  for (const tool of usable) counts.set(tool.base, (counts.get(tool.base) ?? 0) + 1);
  const tools = usable.map(({ document, operation, inputSchema, base }) => ({
    name: (counts.get(base)! > 1 || base === EXECUTE_TOOL ? `${document.client}.${base}` : base).slice(0, 128),
    description: descriptionOf(document),
    inputSchema,
    document,
    operation,
  }));
  // Two documents of one client under one name (a Relay manifest may hold them): the first is the tool.
  const seen = new Set<string>();
  return tools.filter((tool) => !seen.has(tool.name) && seen.add(tool.name));
}

/** What a document's tool is made of, kept per document (for one schema); null: it makes no tool. */
export type ToolParts = WeakMap<TrustedDocument, { operation: OperationDefinitionNode; inputSchema: JsonSchema; base: string } | null>;

function partsOf(document: TrustedDocument, schema: GraphQLSchema): { operation: OperationDefinitionNode; inputSchema: JsonSchema; base: string } | null {
  if (document.type === 'subscription') return null;
  const operation = getOperationAST(document.document, document.name);
  if (!operation) return null;
  const inputSchema = variablesSchema(operation, schema);
  return inputSchema ? { operation, inputSchema, base: (document.name ?? document.id).replace(TOOL_NAME, '_') } : null;
}

/** The input schema of `execute`: an operation's text, its variables and the operation to run. */
export const EXECUTE_INPUT: JsonSchema = {
  type: 'object',
  properties: {
    query: { type: 'string', minLength: 1, description: 'The GraphQL document to run (a query or a mutation)' },
    variables: { type: 'object', description: "The operation's variables" },
    operationName: { type: 'string', description: 'Which operation of the document to run, when it holds several' },
  },
  required: ['query'],
  additionalProperties: false,
};

/**
 * The comment a document opens with (`# ...` lines before its first definition), or what it is: a tool's
 * description for an agent.
 */
function descriptionOf(document: TrustedDocument): string {
  const lines: string[] = [];
  for (const line of document.body.split('\n')) {
    const text = line.trim();
    if (text === '') continue;
    if (!text.startsWith('#')) break;
    lines.push(text.replace(/^#+\s?/, ''));
  }
  const comment = lines.join(' ').trim();
  if (comment) return comment;
  return `The ${document.type} ${document.name ?? document.id}, registered by client ${document.client}`;
}

/** The JSON Schema of an operation's variables; null when one names a type the schema does not have. */
function variablesSchema(operation: OperationDefinitionNode, schema: GraphQLSchema): JsonSchema | null {
  const properties: Record<string, JsonSchema> = {};
  const required: string[] = [];
  const defs: Record<string, JsonSchema> = {};
  for (const definition of operation.variableDefinitions ?? []) {
    const type = typeFromAST(schema, definition.type) as GraphQLInputType | undefined;
    if (!type) return null;
    const name = definition.variable.name.value;
    properties[name] = inputSchema(type, defs);
    if (type instanceof GraphQLNonNull && !definition.defaultValue) required.push(name);
  }
  return {
    type: 'object',
    properties,
    ...(required.length > 0 ? { required } : {}),
    additionalProperties: false,
    ...(Object.keys(defs).length > 0 ? { $defs: defs } : {}),
  };
}

/** The JSON Schema of a GraphQL input type; input objects are `$defs` (they may refer to themselves). */
function inputSchema(type: GraphQLInputType, defs: Record<string, JsonSchema>): JsonSchema {
  const nullable = !(type instanceof GraphQLNonNull);
  const inner = getNullableType(type);
  let schema: JsonSchema;
  if (inner instanceof GraphQLList) {
    schema = { type: 'array', items: inputSchema(inner.ofType, defs) };
  } else if (inner instanceof GraphQLEnumType) {
    schema = { type: 'string', enum: inner.getValues().map((v) => v.name) };
  } else if (inner instanceof GraphQLInputObjectType) {
    defineInputObject(inner, defs);
    schema = { $ref: `#/$defs/${inner.name}` };
  } else {
    schema = scalarSchema(getNamedType(inner) as GraphQLScalarType);
  }
  if (!nullable) return schema;
  return { anyOf: [schema, { type: 'null' }] };
}

function defineInputObject(type: GraphQLInputObjectType, defs: Record<string, JsonSchema>): void {
  if (defs[type.name]) return;
  const properties: Record<string, JsonSchema> = {};
  const required: string[] = [];
  // Marked as defined before its fields are made: a field that names the type again refers to it by `$ref`.
  defs[type.name] = {};
  for (const field of Object.values(type.getFields())) {
    properties[field.name] = {
      ...inputSchema(field.type, defs),
      ...(field.description ? { description: field.description } : {}),
    };
    if (field.type instanceof GraphQLNonNull && field.defaultValue === undefined) required.push(field.name);
  }
  defs[type.name] = {
    type: 'object',
    ...(type.description ? { description: type.description } : {}),
    properties,
    ...(required.length > 0 ? { required } : {}),
    additionalProperties: false,
  };
}

function scalarSchema(type: GraphQLScalarType): JsonSchema {
  switch (type.name) {
    case 'Int':
      return { type: 'integer', minimum: -2147483648, maximum: 2147483647 };
    case 'Float':
      return { type: 'number' };
    case 'Boolean':
      return { type: 'boolean' };
    case 'String':
      return { type: 'string' };
    case 'ID':
      return { type: ['string', 'integer'] };
    case 'DateTime':
      return { type: 'string', format: 'date-time' };
    default:
      return { description: `GraphQL scalar ${type.name}${type.description ? `: ${type.description}` : ''}` };
  }
}
