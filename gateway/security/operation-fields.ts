import {
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

/** More collected fields than this is a document the request limits refuse long before: stop there. */
const MAX_COLLECTED = 20_000;

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
 * The root fields an operation runs, in selection order, fragments followed and conditions resolved. No
 * schema needed: at the root every fragment is on the operation's root type.
 */
export function rootFields(document: DocumentNode, operation: OperationDefinitionNode, variables: Variables): FieldNode[] {
  const fragments = fragmentsOf(document);
  const found: FieldNode[] = [];
  const walk = (set: SelectionSetNode, seen: ReadonlySet<string>) => {
    for (const selection of set.selections) {
      if (!runs(selection, variables)) continue;
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

/**
 * Every field an operation runs, depth first in selection order, with its parent type and response path.
 * Fields of abstract types are reported on the type their fragment names (or the abstract type itself).
 */
export function collectRunFields(schema: GraphQLSchema, document: DocumentNode, operation: OperationDefinitionNode, variables: Variables): RunField[] {
  const root = schema.getRootType(operation.operation);
  if (!root) return [];
  const fragments = fragmentsOf(document);
  const found: RunField[] = [];
  const walk = (set: SelectionSetNode, parent: GraphQLCompositeType, path: readonly string[], seen: ReadonlySet<string>) => {
    for (const selection of set.selections) {
      if (found.length >= MAX_COLLECTED) return;
      if (!runs(selection, variables)) continue;
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
