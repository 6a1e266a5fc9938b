import {
  GraphQLError,
  getNamedType,
  isCompositeType,
  isInterfaceType,
  isObjectType,
  Kind,
  type DirectiveNode,
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLCompositeType,
  type GraphQLNamedType,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type SelectionSetNode,
  type ValueNode,
} from 'graphql';

/*
 * The fields an operation runs, as GraphQL execution would collect them: through inline fragments and
 * named fragment spreads, with `@skip` and `@include` resolved against the request's variables. One
 * collection serves the audit line (which mutation fields ran), the rate-limit charge (which heavy root
 * fields ran) and authorization (which fields the principal would use), so a fragment or a directive
 * cannot take a field past one of them and not the others.
 *
 * A condition whose variable is not given (a REST route judged before its input is read, a document judged
 * for documentation) counts as "runs": the conservative answer for every caller of this module.
 */

/** A field that runs: its node, the type it is selected on, and its response path (no list indices). */
export interface RunField {
  node: FieldNode;
  /** The object, interface or union type the selection is made on (its parent in the schema). */
  parent: GraphQLNamedType;
  /** `Parent.field` */
  coordinate: string;
  /** Response keys from the root (aliases as sent). */
  path: readonly string[];
}

/**
 * The most selections (fields, fragment spreads, inline fragments) an operation may expand to, fragments
 * followed at every use. A document over it is refused whole (`OperationTooLargeError`), never judged in
 * part: nested fragments reach this in a few hundred bytes, long before any real operation does (the
 * request limits refuse at 200 fields by default).
 */
export const MAX_COLLECTED = 20_000;

/** A document whose operation expands past `MAX_COLLECTED` selections: refused whole, 400. */
export class OperationTooLargeError extends GraphQLError {
  /** `expanded`: the count, when it is known (a walk cut short at the bound knows only that it is past it). */
  constructor(expanded: number | null) {
    super(
      `The operation expands to ${expanded === null ? 'more than the bound of' : Number.isFinite(expanded) ? expanded.toLocaleString('en-US') : 'more than 2^53'} selections once its fragments are followed; at most ${MAX_COLLECTED.toLocaleString('en-US')} can be judged, so it is refused whole`,
      { extensions: { code: 'FIELD_LIMIT_EXCEEDED', limit: { name: 'collected_selections', max: MAX_COLLECTED }, http: { status: 400 } } },
    );
    this.name = 'OperationTooLargeError';
  }
}

type Variables = Readonly<Record<string, unknown>> | null | undefined;

function conditionValue(directive: DirectiveNode | undefined, variables: Variables): boolean | undefined {
  const value: ValueNode | undefined = directive?.arguments?.find((a) => a.name.value === 'if')?.value;
  if (!value) return undefined;
  if (value.kind === Kind.BOOLEAN) return value.value;
  if (value.kind === Kind.VARIABLE) {
    const given = variables?.[value.name.value];
    return typeof given === 'boolean' ? given : undefined;
  }
  return undefined;
}

/** Whether a selection runs under its `@skip` and `@include` (an unknown condition runs). */
function runs(node: { directives?: readonly DirectiveNode[] | undefined }, variables: Variables): boolean {
  if (!node.directives?.length) return true;
  const skip = conditionValue(
    node.directives.find((d) => d.name.value === 'skip'),
    variables,
  );
  if (skip === true) return false;
  const include = conditionValue(
    node.directives.find((d) => d.name.value === 'include'),
    variables,
  );
  return include !== false;
}

function fragmentsOf(document: DocumentNode): Map<string, FragmentDefinitionNode> {
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const def of document.definitions) if (def.kind === Kind.FRAGMENT_DEFINITION) fragments.set(def.name.value, def);
  return fragments;
}

/** The operation `operationName` selects (the only one when no name is given); null when there is none. */
export function operationOf(document: DocumentNode, operationName?: string | null): OperationDefinitionNode | null {
  const operations = document.definitions.filter((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION);
  if (operationName) return operations.find((o) => o.name?.value === operationName) ?? null;
  return operations.length === 1 ? operations[0]! : null;
}

/**
 * How many selections (fields, spreads, inline fragments) the operation visits once every fragment is
 * followed at every use, conditions resolved: counted with each fragment's size memoized, so a document of
 * a few hundred bytes whose fragments double at every level costs one linear pass. `deep` false counts the
 * root level alone (the fields below a root field are not followed).
 */
function expandedSize(document: DocumentNode, operation: OperationDefinitionNode, variables: Variables, deep: boolean): number {
  const fragments = fragmentsOf(document);
  const sizes = new Map<string, number | 'open'>();
  const sizeOf = (set: SelectionSetNode): number => {
    let size = 0;
    for (const selection of set.selections) {
      if (!runs(selection, variables)) continue;
      size += 1;
      if (selection.kind === Kind.FIELD) {
        if (deep && selection.selectionSet && !selection.name.value.startsWith('__')) size += sizeOf(selection.selectionSet);
      } else if (selection.kind === Kind.INLINE_FRAGMENT) size += sizeOf(selection.selectionSet);
      else {
        const name = selection.name.value;
        const known = sizes.get(name);
        // A fragment that spreads itself is a validation error; the walks below skip the inner spread too.
        if (known === 'open') continue;
        if (known !== undefined) {
          size += known;
          continue;
        }
        const fragment = fragments.get(name);
        if (!fragment) continue;
        sizes.set(name, 'open');
        const inner = sizeOf(fragment.selectionSet);
        sizes.set(name, inner);
        size += inner;
      }
    }
    return size;
  };
  return sizeOf(operation.selectionSet);
}

/** Throws `OperationTooLargeError` when the operation expands past `MAX_COLLECTED` selections. */
function assertJudgeable(document: DocumentNode, operation: OperationDefinitionNode, variables: Variables, deep: boolean): void {
  const size = expandedSize(document, operation, variables, deep);
  if (size > MAX_COLLECTED) throw new OperationTooLargeError(size);
}

/**
 * A count of the selections a walk visits that throws past `MAX_COLLECTED`: the size counted first is exact
 * for valid documents; this holds the bound for any other (fragments that spread one another in a loop).
 */
function visitCounter(): () => void {
  let visited = 0;
  return () => {
    if (++visited > MAX_COLLECTED) throw new OperationTooLargeError(null);
  };
}

/**
 * The root fields an operation runs, in selection order, fragments followed and conditions resolved. No
 * schema needed: at the root every fragment is on the operation's root type. Throws
 * `OperationTooLargeError` rather than return part of them.
 */
export function rootFields(document: DocumentNode, operation: OperationDefinitionNode, variables: Variables): FieldNode[] {
  assertJudgeable(document, operation, variables, false);
  const fragments = fragmentsOf(document);
  const found: FieldNode[] = [];
  const visit = visitCounter();
  const walk = (set: SelectionSetNode, seen: ReadonlySet<string>) => {
    for (const selection of set.selections) {
      if (!runs(selection, variables)) continue;
      visit();
      if (selection.kind === Kind.FIELD) found.push(selection);
      else if (selection.kind === Kind.INLINE_FRAGMENT) walk(selection.selectionSet, seen);
      else {
        const name = selection.name.value;
        const fragment = fragments.get(name);
        if (fragment && !seen.has(name)) walk(fragment.selectionSet, new Set([...seen, name]));
      }
    }
  };
  walk(operation.selectionSet, new Set());
  return found;
}

/** Collections kept per schema and document, one per operation and resolution of its conditions. */
const collections = new WeakMap<GraphQLSchema, WeakMap<DocumentNode, Map<string, readonly RunField[]>>>();
const MAX_COLLECTIONS_PER_DOCUMENT = 64;

/**
 * Every field an operation runs, depth first in selection order, with its parent type and response path.
 * Fields of abstract types are reported on the type their fragment names (or the abstract type itself).
 * The whole operation or nothing: past `MAX_COLLECTED` selections it throws `OperationTooLargeError`
 * (a 400 for the caller), so no consumer ever judges a part. Kept per schema, document, operation and
 * resolution of the conditions: authorization, the rate charge and the audit line read one collection.
 */
export function collectRunFields(schema: GraphQLSchema, document: DocumentNode, operation: OperationDefinitionNode, variables: Variables): readonly RunField[] {
  let byDocument = collections.get(schema);
  if (!byDocument) collections.set(schema, (byDocument = new WeakMap<DocumentNode, Map<string, readonly RunField[]>>()));
  let byKey = byDocument.get(document);
  if (!byKey) byDocument.set(document, (byKey = new Map<string, readonly RunField[]>()));
  const key = `${operation.name?.value ?? ''}\n${document.definitions.indexOf(operation)}\n${conditionKey(document, variables)}`;
  const known = byKey.get(key);
  if (known) return known;
  assertJudgeable(document, operation, variables, true);
  const found = walkRunFields(schema, document, operation, variables);
  if (byKey.size >= MAX_COLLECTIONS_PER_DOCUMENT) byKey.clear();
  byKey.set(key, found);
  return found;
}

function walkRunFields(schema: GraphQLSchema, document: DocumentNode, operation: OperationDefinitionNode, variables: Variables): RunField[] {
  const root = schema.getRootType(operation.operation);
  if (!root) return [];
  const fragments = fragmentsOf(document);
  const found: RunField[] = [];
  const visit = visitCounter();
  const walk = (set: SelectionSetNode, parent: GraphQLCompositeType, path: readonly string[], seen: ReadonlySet<string>) => {
    for (const selection of set.selections) {
      if (!runs(selection, variables)) continue;
      visit();
      if (selection.kind === Kind.FIELD) {
        const name = selection.name.value;
        const here = [...path, selection.alias?.value ?? name];
        found.push({ node: selection, parent, coordinate: `${parent.name}.${name}`, path: here });
        if (!selection.selectionSet || name.startsWith('__')) continue;
        const field = isObjectType(parent) || isInterfaceType(parent) ? parent.getFields()[name] : undefined;
        const below = field ? getNamedType(field.type) : undefined;
        if (below && isCompositeType(below)) walk(selection.selectionSet, below, here, seen);
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        const on = selection.typeCondition ? schema.getType(selection.typeCondition.name.value) : parent;
        walk(selection.selectionSet, on && isCompositeType(on) ? on : parent, path, seen);
      } else {
        const name = selection.name.value;
        const fragment = fragments.get(name);
        if (!fragment || seen.has(name)) continue;
        const on = schema.getType(fragment.typeCondition.name.value);
        walk(fragment.selectionSet, on && isCompositeType(on) ? on : parent, path, new Set([...seen, name]));
      }
    }
  };
  walk(operation.selectionSet, root, [], new Set());
  return found;
}

const conditionVariablesCache = new WeakMap<DocumentNode, readonly string[]>();

/** The variables a document's `@skip` and `@include` conditions read, sorted (cached per document). */
function conditionVariables(document: DocumentNode): readonly string[] {
  let names = conditionVariablesCache.get(document);
  if (names) return names;
  const found = new Set<string>();
  const scan = (set: SelectionSetNode | undefined) => {
    for (const selection of set?.selections ?? []) {
      for (const directive of selection.directives ?? []) {
        if (directive.name.value !== 'skip' && directive.name.value !== 'include') continue;
        const value = directive.arguments?.find((a) => a.name.value === 'if')?.value;
        if (value?.kind === Kind.VARIABLE) found.add(value.name.value);
      }
      if (selection.kind !== Kind.FRAGMENT_SPREAD) scan(selection.selectionSet);
    }
  };
  for (const def of document.definitions) if (def.kind === Kind.OPERATION_DEFINITION || def.kind === Kind.FRAGMENT_DEFINITION) scan(def.selectionSet);
  names = [...found].sort();
  conditionVariablesCache.set(document, names);
  return names;
}

/** A key of what the document's conditions resolve to for these variables ('' when it has none). */
export function conditionKey(document: DocumentNode, variables: Variables): string {
  const names = conditionVariables(document);
  if (names.length === 0) return '';
  return names.map((name) => (variables?.[name] === true ? '1' : variables?.[name] === false ? '0' : '?')).join('');
}
