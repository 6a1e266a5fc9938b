import {
  GraphQLError,
  Kind,
  buildASTSchema,
  getNamedType,
  getNullableType,
  isCompositeType,
  isInputObjectType,
  isListType,
  isNonNullType,
  parse,
  valueFromASTUntyped,
  visit,
  type ArgumentNode,
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLArgument,
  type GraphQLField,
  type GraphQLInputType,
  type GraphQLNamedType,
  type GraphQLSchema,
  type InputValueDefinitionNode,
  type OperationDefinitionNode,
  type SelectionSetNode,
  type ValueNode,
} from 'graphql';
import type { ErrorCode } from '../../platform/errors.js';
import { jsonKey } from '../pipeline/json-key.js';

/**
 * Request limits, enforced on every GraphQL document before it is validated, planned or executed (HTTP and
 * WebSocket alike): a document over any of them costs one bounded parse and one linear walk, then is refused.
 * The defaults follow GraphQL Armor's (tokens, aliases, directives) and are documented in docs/operations.md ("Request limits")
 * ("Request limits"); each is configurable.
 */
export interface RequestLimits {
  /** Lexical tokens of the document; the parser stops at the limit. @default 1000 */
  maxTokens: number;
  /** Nesting of selections, fragments followed. @default 10 */
  maxDepth: number;
  /** Aliased fields in the operation, fragments expanded. @default 15 */
  maxAliases: number;
  /** Fields selected at the root of the operation, fragments expanded. @default 20 */
  maxRootFields: number;
  /**
   * Field selections of the operation, fragments expanded. Validation compares same-named selections in
   * pairs and planning expands fragments, so this bounds both. @default 200
   */
  maxFields: number;
  /** Directives written anywhere in the document. @default 50 */
  maxDirectives: number;
  /** Static cost of the operation (see `operationCost`). @default 5000 */
  maxCost: number;
  /** Size assumed for a list field that declares none. @default 10 */
  defaultListSize: number;
}

type LimitName = 'tokens' | 'depth' | 'aliases' | 'root_fields' | 'fields' | 'directives' | 'cost' | 'list_items';

const CODES: Readonly<Record<LimitName, ErrorCode>> = {
  tokens: 'TOKEN_LIMIT_EXCEEDED',
  depth: 'DEPTH_LIMIT_EXCEEDED',
  aliases: 'ALIAS_LIMIT_EXCEEDED',
  root_fields: 'ROOT_FIELD_LIMIT_EXCEEDED',
  fields: 'FIELD_LIMIT_EXCEEDED',
  directives: 'DIRECTIVE_LIMIT_EXCEEDED',
  cost: 'COST_LIMIT_EXCEEDED',
  list_items: 'LIST_LIMIT_EXCEEDED',
};

/** The configuration variable of each limit, named in refusals so an operator knows what to raise. */
const LIMIT_VARIABLES: Readonly<Record<Exclude<LimitName, 'list_items'>, string>> = {
  tokens: 'GRAPHQL_MAX_TOKENS',
  depth: 'GRAPHQL_MAX_DEPTH',
  aliases: 'GRAPHQL_MAX_ALIASES',
  root_fields: 'GRAPHQL_MAX_ROOT_FIELDS',
  fields: 'GRAPHQL_MAX_FIELDS',
  directives: 'GRAPHQL_MAX_DIRECTIVES',
  cost: 'GRAPHQL_MAX_COST',
};

/** A refused document: the catalogue code names the limit; `extensions.limit` carries its name and value. */
function limitError(name: LimitName, max: number, message: string): GraphQLError {
  return new GraphQLError(message, { extensions: { code: CODES[name], limit: { name, max } } });
}

export interface Limiter {
  readonly limits: RequestLimits;
  /**
   * Parses `query` within the token limit and checks every other limit against the operation(s) the
   * request can run. Returns the parsed document, or the one error that refuses it (a syntax error keeps
   * graphql-js's own message and is coded GRAPHQL_PARSE_FAILED).
   */
  check(
    query: string,
    variables: Readonly<Record<string, unknown>> | null | undefined,
    operationName?: string | null,
  ): { document: DocumentNode } | { error: GraphQLError };
}

/**
 * Declared sizes and costs of the supergraph's fields, read once from its `@cost`, `@listSize` and
 * `@maxItems`; a subgraph server gives the schema it serves (`options.schema`), built from its own SDL.
 */
export function createLimiter(supergraphSdl: string, limits: RequestLimits, options: { schema?: GraphQLSchema } = {}): Limiter {
  const schema = options.schema ?? buildASTSchema(parse(supergraphSdl), { assumeValidSDL: true });
  // A verdict depends on the document, the operation name and the variables alone, and clients send the same
  // few again and again: each is reached once (parse, directive count, walk) and kept, least recently used
  // first out.
  const verdicts = new Map<string, Verdict>();
  // The parsed documents, by text: a verdict is kept per variables, but the variables of mutations differ on
  // every request (ids, amounts), so each verdict refers to the one parse of its text instead of holding its
  // own (2,000 verdicts of a mutation otherwise kept 2,000 copies of one tree; `npm run bench -- soak`).
  const documents = new Map<string, DocumentNode>();
  const parsed = (query: string): DocumentNode => {
    const kept = recentlyUsed(documents, query);
    if (kept) return kept;
    const document = parse(query, { maxTokens: limits.maxTokens });
    if (query.length <= MAX_KEPT_KEY_LENGTH) keep(documents, query, document, MAX_KEPT_DOCUMENTS);
    return document;
  };
  return {
    limits,
    check(query, variables, operationName) {
      const given = jsonKey(variables);
      if (given === null || query.length + given.length > MAX_KEPT_KEY_LENGTH) return judge(query, variables, operationName);
      const key = `${operationName ?? ''}\u0000${given}\u0000${query}`;
      const kept = recentlyUsed(verdicts, key);
      if (kept) return kept;
      const verdict = judge(query, variables, operationName);
      keep(verdicts, key, verdict, MAX_KEPT_VERDICTS);
      return verdict;
    },
  };

  function judge(query: string, variables: Readonly<Record<string, unknown>> | null | undefined, operationName?: string | null): Verdict {
    let document: DocumentNode;
    try {
      document = parsed(query);
    } catch (error) {
      if (error instanceof GraphQLError && /Document contains more tha[nt] \d+ tokens/.test(error.message)) {
        return {
          error: limitError(
            'tokens',
            limits.maxTokens,
            `The document has more than ${limits.maxTokens} tokens; the limit is ${limits.maxTokens} (${LIMIT_VARIABLES.tokens})`,
          ),
        };
      }
      if (error instanceof GraphQLError) {
        return {
          error: new GraphQLError(error.message, {
            nodes: error.nodes,
            source: error.source,
            positions: error.positions,
            extensions: { code: 'GRAPHQL_PARSE_FAILED' },
          }),
        };
      }
      throw error;
    }
    const refused = checkDocument(schema, document, limits, variables ?? {}, operationName ?? undefined);
    return refused ? { error: refused } : { document };
  }
}

type Verdict = { document: DocumentNode } | { error: GraphQLError };

/** A kept entry of a least-recently-used map (Map keeps insertion order), moved to the newest end. */
function recentlyUsed<V>(map: Map<string, V>, key: string): V | undefined {
  const value = map.get(key);
  if (value !== undefined) {
    map.delete(key);
    map.set(key, value);
  }
  return value;
}

/** Keeps an entry, the least recently used one out first when `max` are kept. */
function keep<V>(map: Map<string, V>, key: string, value: V, max: number): void {
  if (map.size >= max) map.delete(map.keys().next().value!);
  map.set(key, value);
}
const MAX_KEPT_VERDICTS = 2000;
/** Distinct document texts whose parse is kept (the verdicts of one text share it). */
const MAX_KEPT_DOCUMENTS = 500;
/** Longer documents and variables (batches of inputs) are judged every time rather than kept. */
const MAX_KEPT_KEY_LENGTH = 16_384;

function checkDocument(
  schema: GraphQLSchema,
  document: DocumentNode,
  limits: RequestLimits,
  variables: Readonly<Record<string, unknown>>,
  operationName: string | undefined,
): GraphQLError | null {
  let directives = 0;
  visit(document, {
    Directive() {
      directives++;
    },
  });
  if (directives > limits.maxDirectives) {
    return limitError(
      'directives',
      limits.maxDirectives,
      `The document has ${directives} directives; the limit is ${limits.maxDirectives} (${LIMIT_VARIABLES.directives})`,
    );
  }
  const fragments = new Map<string, FragmentDefinitionNode>();
  const operations: OperationDefinitionNode[] = [];
  for (const definition of document.definitions) {
    if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition);
    else if (definition.kind === Kind.OPERATION_DEFINITION) operations.push(definition);
  }
  // The operation the request runs; when it cannot be told (validation will say why), every operation.
  const named = operationName === undefined ? (operations.length === 1 ? operations : []) : operations.filter((o) => o.name?.value === operationName);
  const checked = named.length > 0 ? named : operations;
  for (const operation of checked) {
    const walker = new Walker(schema, fragments, limits, variableValues(operation, variables));
    const refused = walker.check(operation);
    if (refused) return refused;
  }
  return null;
}

/** The request's variables with the operation's declared defaults filled in. */
function variableValues(operation: OperationDefinitionNode, given: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const values: Record<string, unknown> = { ...given };
  for (const definition of operation.variableDefinitions ?? []) {
    const name = definition.variable.name.value;
    if (!(name in values) && definition.defaultValue) values[name] = valueFromASTUntyped(definition.defaultValue);
  }
  return values;
}

/** Depth, aliases, root fields and cost of a selection, memoized per fragment so fragment reuse stays linear. */
interface Tally {
  depth: number;
  aliases: number;
  /** Fields selected directly in the selection set (the root fields, at the root). */
  fields: number;
  /** Every field selection within it, at any depth. */
  selections: number;
  cost: number;
}

const EMPTY: Tally = { depth: 0, aliases: 0, fields: 0, selections: 0, cost: 0 };

class Walker {
  private readonly fragmentTallies = new Map<string, Tally | 'open'>();
  private listError: GraphQLError | null = null;

  constructor(
    private readonly schema: GraphQLSchema,
    private readonly fragments: ReadonlyMap<string, FragmentDefinitionNode>,
    private readonly limits: RequestLimits,
    private readonly variables: Readonly<Record<string, unknown>>,
  ) {}

  check(operation: OperationDefinitionNode): GraphQLError | null {
    const root = this.schema.getRootType(operation.operation);
    if (!root) return null;
    const tally = this.selection(operation.selectionSet, root, new Map());
    if (this.listError) return this.listError;
    const { limits } = this;
    if (tally.depth > limits.maxDepth) {
      return limitError('depth', limits.maxDepth, `The operation nests ${tally.depth} levels deep; the limit is ${limits.maxDepth} (${LIMIT_VARIABLES.depth})`);
    }
    if (tally.aliases > limits.maxAliases) {
      return limitError(
        'aliases',
        limits.maxAliases,
        `The operation has ${count(tally.aliases)} aliases; the limit is ${limits.maxAliases} (${LIMIT_VARIABLES.aliases})`,
      );
    }
    if (tally.fields > limits.maxRootFields) {
      return limitError(
        'root_fields',
        limits.maxRootFields,
        `The operation selects ${count(tally.fields)} root fields; the limit is ${limits.maxRootFields} (${LIMIT_VARIABLES.root_fields})`,
      );
    }
    if (tally.selections > limits.maxFields) {
      return limitError(
        'fields',
        limits.maxFields,
        `The operation selects ${count(tally.selections)} fields, fragments expanded; the limit is ${limits.maxFields} (${LIMIT_VARIABLES.fields})`,
      );
    }
    if (tally.cost > limits.maxCost) {
      return limitError(
        'cost',
        limits.maxCost,
        `The operation costs ${count(tally.cost)}; the limit is ${limits.maxCost} (${LIMIT_VARIABLES.cost}; docs/operations.md explains the cost of each field)`,
      );
    }
    return null;
  }

  /**
   * A selection set's tally; `fields` counts the fields selected directly in it (fragments expanded).
   * `sized` gives the list size of child fields a parent's `@listSize(sizedFields:)` names.
   */
  private selection(set: SelectionSetNode, parent: GraphQLNamedType, sized: ReadonlyMap<string, number>): Tally {
    let depth = 0;
    let aliases = 0;
    let fields = 0;
    let selections = 0;
    let cost = 0;
    for (const node of set.selections) {
      let tally: Tally;
      if (node.kind === Kind.FIELD) {
        tally = this.field(node, parent, sized);
        fields++;
        selections++;
        if (node.alias) aliases++;
        depth = Math.max(depth, tally.depth + 1);
      } else if (node.kind === Kind.INLINE_FRAGMENT) {
        const type = node.typeCondition ? this.schema.getType(node.typeCondition.name.value) : parent;
        tally = type ? this.selection(node.selectionSet, type, sized) : EMPTY;
        fields += tally.fields;
        depth = Math.max(depth, tally.depth);
      } else {
        tally = this.fragment(node.name.value, sized);
        fields += tally.fields;
        depth = Math.max(depth, tally.depth);
      }
      aliases += tally.aliases;
      selections += tally.selections;
      cost += tally.cost;
    }
    return { depth, aliases, fields, selections, cost };
  }

  private fragment(name: string, sized: ReadonlyMap<string, number>): Tally {
    const known = this.fragmentTallies.get(name);
    // A fragment that spreads itself is a validation error; it adds nothing here.
    if (known === 'open') return EMPTY;
    if (known && sized.size === 0) return known;
    const definition = this.fragments.get(name);
    const type = definition && this.schema.getType(definition.typeCondition.name.value);
    if (!definition || !type) return EMPTY;
    this.fragmentTallies.set(name, 'open');
    const tally = this.selection(definition.selectionSet, type, sized);
    // Sized tallies depend on the spreading field; only the context-free one is kept.
    if (sized.size === 0) this.fragmentTallies.set(name, tally);
    else this.fragmentTallies.delete(name);
    return tally;
  }

  /** A field's own tally: `depth` is the depth below it; `aliases` those within its selection. */
  private field(node: FieldNode, parent: GraphQLNamedType, sized: ReadonlyMap<string, number>): Tally {
    const definition = 'getFields' in parent && !isInputObjectType(parent) ? parent.getFields()[node.name.value] : undefined;
    if (!definition) return EMPTY;
    const type = getNamedType(definition.type);
    const args = this.argumentsCost(definition, node.arguments ?? []);
    const listSize = this.listSizeOf(definition, node);
    const childSized = listSize.sizedFields.length > 0 ? new Map(listSize.sizedFields.map((f) => [f, listSize.size] as const)) : new Map<string, number>();
    const child = node.selectionSet ? this.selection(node.selectionSet, type, childSized) : EMPTY;
    const weight = weightOf(definition.astNode?.directives) ?? weightOf(type.astNode?.directives) ?? (isCompositeType(type) ? 1 : 0);
    const own = weight + child.cost;
    const isList = isListType(getNullableType(definition.type));
    const size = isList ? (sized.get(node.name.value) ?? (listSize.sizedFields.length > 0 ? this.limits.defaultListSize : listSize.size)) : 1;
    return { depth: child.depth, aliases: child.aliases, fields: 0, selections: child.selections, cost: args + size * own };
  }

  /**
   * Arguments cost their `@cost` weight plus one per input object they carry (a batch of 1,000 inputs costs
   * 1,000); a list longer than its `@maxItems` is refused here, before any item is coerced.
   */
  private argumentsCost(definition: GraphQLField<unknown, unknown>, nodes: readonly ArgumentNode[]): number {
    let cost = 0;
    for (const argument of definition.args) {
      const node = nodes.find((n) => n.name.value === argument.name);
      const value = node ? this.valueOf(node.value) : argument.defaultValue;
      if (value === undefined) continue;
      cost += (weightOf(argument.astNode?.directives) ?? 0) + this.inputCost(argument.type, value, argument.astNode, `${definition.name}(${argument.name}:)`);
    }
    return cost;
  }

  private inputCost(type: GraphQLInputType, value: unknown, definition: InputValueDefinitionNode | undefined | null, where: string): number {
    if (value === null || value === undefined) return 0;
    const nullable = isNonNullType(type) ? type.ofType : type;
    if (isListType(nullable)) {
      const items = Array.isArray(value) ? value : [value];
      const max = maxItemsOf(definition?.directives);
      if (max !== null && items.length > max && !this.listError) {
        this.listError = limitError('list_items', max, `${where} has ${count(items.length)} items; the limit is ${max} (the argument's @maxItems)`);
      }
      // A list beyond its maximum is refused; its items are not looked at.
      if (this.listError) return 0;
      let cost = 0;
      for (const item of items) cost += this.inputCost(nullable.ofType, item, null, where);
      return cost;
    }
    if (!isInputObjectType(nullable) || typeof value !== 'object' || Array.isArray(value)) return 0;
    let cost = 1;
    const fields = nullable.getFields();
    for (const [key, fieldValue] of Object.entries(value as Record<string, unknown>)) {
      const field = fields[key];
      if (!field) continue;
      cost += (weightOf(field.astNode?.directives) ?? 0) + this.inputCost(field.type, fieldValue, field.astNode, `${where}.${key}`);
    }
    return cost;
  }

  /** An argument's value as the request gives it (literals and variables alike), before coercion. */
  private valueOf(node: ValueNode): unknown {
    switch (node.kind) {
      case Kind.VARIABLE:
        return this.variables[node.name.value];
      case Kind.LIST:
        return node.values.map((v) => this.valueOf(v));
      case Kind.OBJECT:
        return Object.fromEntries(node.fields.map((f) => [f.name.value, this.valueOf(f.value)]));
      default:
        return valueFromASTUntyped(node);
    }
  }

  /**
   * A list field's size: its slicing argument (`first`), else the length of the list it answers item for
   * item (a batch field's `@maxItems` list argument, or that list inside its input object), else its
   * `@listSize(assumedSize:)`,
   * else the default. `sizedFields` pass the size to children (a connection's `edges`).
   */
  private listSizeOf(definition: GraphQLField<unknown, unknown>, node: FieldNode): { size: number; sizedFields: string[] } {
    const directive = definition.astNode?.directives?.find((d) => d.name.value === 'listSize');
    const args: Record<string, unknown> = {};
    for (const a of directive?.arguments ?? []) args[a.name.value] = valueFromASTUntyped(a.value);
    const sizedFields = Array.isArray(args['sizedFields']) ? (args['sizedFields'] as string[]) : [];
    const slicing = Array.isArray(args['slicingArguments']) ? (args['slicingArguments'] as string[]) : [];
    const given = (argument: GraphQLArgument): unknown => {
      const n = node.arguments?.find((x) => x.name.value === argument.name);
      return n ? this.valueOf(n.value) : argument.defaultValue;
    };
    const sliced = definition.args
      .filter((a) => slicing.includes(a.name))
      .map((a) => given(a))
      .filter((v): v is number => typeof v === 'number' && Number.isFinite(v));
    if (sliced.length > 0) return { size: Math.max(0, ...sliced), sizedFields };
    const batch = batchListOf(definition.args, given);
    if (batch) return { size: batch.length, sizedFields };
    const assumed = args['assumedSize'];
    return { size: typeof assumed === 'number' ? assumed : this.limits.defaultListSize, sizedFields };
  }
}

/**
 * The one bounded list a field answers item for item: a `@maxItems` list argument, or a `@maxItems` list
 * field of its one input-object argument (`pitTraining(input: { targets: [...] })`). Null when there is
 * none, or more than one.
 */
function batchListOf(args: readonly GraphQLArgument[], given: (argument: GraphQLArgument) => unknown): unknown[] | null {
  const found: unknown[] = [];
  for (const argument of args) {
    const type = getNullableType(argument.type);
    if (isListType(type)) {
      if (maxItemsOf(argument.astNode?.directives) !== null) found.push(given(argument));
      continue;
    }
    if (!isInputObjectType(type)) continue;
    const value = given(argument);
    // Inside an input object, the batch is the bounded list of input objects (entity rows), not a list of
    // names beside it.
    for (const field of Object.values(type.getFields())) {
      if (!isListType(getNullableType(field.type)) || maxItemsOf(field.astNode?.directives) === null) continue;
      if (!isInputObjectType(getNamedType(field.type))) continue;
      found.push(typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>)[field.name] : undefined);
    }
  }
  return found.length === 1 && Array.isArray(found[0]) ? found[0] : null;
}

type Directives = readonly { name: { value: string }; arguments?: readonly ArgumentNode[] | undefined }[] | undefined;

function intArgument(directives: Directives, directive: string, argument: string): number | null {
  const node = directives?.find((d) => d.name.value === directive)?.arguments?.find((a) => a.name.value === argument);
  return node?.value.kind === Kind.INT ? Number(node.value.value) : null;
}

function weightOf(directives: Directives): number | null {
  return intArgument(directives, 'cost', 'weight');
}

function maxItemsOf(directives: Directives): number | null {
  return intArgument(directives, 'maxItems', 'count');
}

function count(n: number): string {
  return Number.isFinite(n) ? n.toLocaleString('en-US') : 'more than 2^53';
}

/** The configuration the request limits are read from. */
export interface RequestLimitsConfig {
  GRAPHQL_MAX_TOKENS: number;
  GRAPHQL_MAX_DEPTH: number;
  GRAPHQL_MAX_ALIASES: number;
  GRAPHQL_MAX_ROOT_FIELDS: number;
  GRAPHQL_MAX_FIELDS: number;
  GRAPHQL_MAX_DIRECTIVES: number;
  GRAPHQL_MAX_COST: number;
  GRAPHQL_DEFAULT_LIST_SIZE: number;
}

/** The request limits of a configuration. */
export function requestLimitsOf(config: RequestLimitsConfig): RequestLimits {
  return {
    maxTokens: config.GRAPHQL_MAX_TOKENS,
    maxDepth: config.GRAPHQL_MAX_DEPTH,
    maxAliases: config.GRAPHQL_MAX_ALIASES,
    maxRootFields: config.GRAPHQL_MAX_ROOT_FIELDS,
    maxFields: config.GRAPHQL_MAX_FIELDS,
    maxDirectives: config.GRAPHQL_MAX_DIRECTIVES,
    maxCost: config.GRAPHQL_MAX_COST,
    defaultListSize: config.GRAPHQL_DEFAULT_LIST_SIZE,
  };
}

/**
 * The limits a subgraph server holds its gateway's signed calls to. A fetch the gateway plans for an
 * operation it accepted adds key fields, `__typename` and an `_entities` level to what the client sent,
 * so each bound is twice the gateway's (depth two more); a planned fetch of an accepted operation passes,
 * and nothing unbounded reaches the subgraph's validation and execution.
 */
export function subgraphLimitsOf(limits: RequestLimits): RequestLimits {
  return {
    maxTokens: limits.maxTokens * 2,
    maxDepth: limits.maxDepth + 2,
    maxAliases: limits.maxAliases * 2,
    maxRootFields: limits.maxRootFields * 2,
    maxFields: limits.maxFields * 2,
    maxDirectives: limits.maxDirectives * 2,
    maxCost: limits.maxCost * 2,
    defaultListSize: limits.defaultListSize,
  };
}
