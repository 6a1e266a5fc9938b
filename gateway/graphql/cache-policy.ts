import {
  getNamedType,
  isCompositeType,
  isInterfaceType,
  isObjectType,
  Kind,
  OperationTypeNode,
  parse,
  type DocumentNode,
  type FragmentDefinitionNode,
  type FragmentSpreadNode,
  type InlineFragmentNode,
  type GraphQLCompositeType,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type SelectionSetNode,
} from 'graphql';

/*
 * How long an answer may be kept, from the `@cacheControl(maxAge, scope)` hints the subgraphs declare (a
 * composed directive, in the supergraph): the least maxAge of the fields an operation reads, PUBLIC only
 * when every hint on the way is. A field without a hint of its own (or on its type) takes its parent's, and
 * a root field without one is not cached: an operation is cacheable only when each of its root fields
 * declares how long. Mutations never are.
 */

export interface CachePolicy {
  maxAge: number;
  scope: 'PUBLIC' | 'PRIVATE';
}

interface Hint {
  maxAge: number;
  scope: 'PUBLIC' | 'PRIVATE';
}

const NOT_CACHEABLE: CachePolicy = Object.freeze({ maxAge: 0, scope: 'PRIVATE' });

export class CachePolicies {
  /** Hints by `Type.field`, and by `Type` for types that carry one. */
  private readonly hints = new Map<string, Hint>();

  constructor(
    supergraphSdl: string,
    private readonly schema: GraphQLSchema,
  ) {
    for (const definition of parse(supergraphSdl, { noLocation: true }).definitions) {
      if (definition.kind !== Kind.OBJECT_TYPE_DEFINITION && definition.kind !== Kind.OBJECT_TYPE_EXTENSION) continue;
      const typeHint = hintOf(definition.directives);
      if (typeHint) this.hints.set(definition.name.value, typeHint);
      for (const field of definition.fields ?? []) {
        const hint = hintOf(field.directives);
        if (hint) this.hints.set(`${definition.name.value}.${field.name.value}`, hint);
      }
    }
  }

  /** The policy of `operationName` in `document` (already validated against the schema). */
  of(document: DocumentNode, operationName: string | null | undefined): CachePolicy {
    const operations = document.definitions.filter((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION);
    const operation = operationName ? operations.find((o) => o.name?.value === operationName) : operations.length === 1 ? operations[0] : undefined;
    if (!operation || operation.operation !== OperationTypeNode.QUERY) return NOT_CACHEABLE;
    const root = this.schema.getQueryType();
    if (!root) return NOT_CACHEABLE;
    const fragments = new Map(
      document.definitions.filter((d): d is FragmentDefinitionNode => d.kind === Kind.FRAGMENT_DEFINITION).map((f) => [f.name.value, f] as const),
    );
    const policy = { maxAge: Number.POSITIVE_INFINITY, scope: 'PUBLIC' as 'PUBLIC' | 'PRIVATE' };
    this.walk(operation.selectionSet, root, null, fragments, policy, new Set());
    return Number.isFinite(policy.maxAge) && policy.maxAge > 0 ? { maxAge: policy.maxAge, scope: policy.scope } : NOT_CACHEABLE;
  }

  /**
   * The least maxAge (seconds) of the hinted fields a subgraph fetch document selects (root fields, or the
   * entity fragments of `_entities`); null when no field it selects carries a hint. Fields without one do not
   * shorten it: what caps a state entry is a hint, what keeps it exact is the event log.
   */
  capOf(query: string): number | null {
    let document: DocumentNode;
    try {
      document = parse(query, { noLocation: true });
    } catch {
      return 0;
    }
    const root = this.schema.getQueryType();
    const operation = document.definitions.find((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION);
    if (!root || !operation) return 0;
    const fragments = new Map(
      document.definitions.filter((d): d is FragmentDefinitionNode => d.kind === Kind.FRAGMENT_DEFINITION).map((f) => [f.name.value, f] as const),
    );
    const cap = { maxAge: Number.POSITIVE_INFINITY };
    this.capWalk(operation.selectionSet, root, fragments, cap, new Set());
    return Number.isFinite(cap.maxAge) ? cap.maxAge : null;
  }

  private capWalk(
    selections: SelectionSetNode,
    parent: GraphQLCompositeType,
    fragments: ReadonlyMap<string, FragmentDefinitionNode>,
    cap: { maxAge: number },
    spread: Set<string>,
  ): void {
    for (const selection of selections.selections) {
      if (selection.kind === Kind.INLINE_FRAGMENT || selection.kind === Kind.FRAGMENT_SPREAD) {
        const entered = this.enter(selection, parent, fragments, spread);
        if (entered) this.capWalk(entered.selectionSet, entered.type, fragments, cap, spread);
        continue;
      }
      const name = selection.name.value;
      const field = isObjectType(parent) || isInterfaceType(parent) ? parent.getFields()[name] : undefined;
      const type = field ? getNamedType(field.type) : undefined;
      const hint = this.hints.get(`${parent.name}.${name}`) ?? (type && isCompositeType(type) ? this.hints.get(type.name) : undefined);
      if (hint) cap.maxAge = Math.min(cap.maxAge, hint.maxAge);
      // `_entities` is no field of the API schema: its fragments name their types.
      if (selection.selectionSet) this.capWalk(selection.selectionSet, type && isCompositeType(type) ? type : parent, fragments, cap, spread);
    }
  }

  /** A fragment's selections and the type they apply to; null for a spread of an unknown fragment or one already followed. */
  private enter(
    selection: InlineFragmentNode | FragmentSpreadNode,
    parent: GraphQLCompositeType,
    fragments: ReadonlyMap<string, FragmentDefinitionNode>,
    spread: Set<string>,
  ): { selectionSet: SelectionSetNode; type: GraphQLCompositeType } | null {
    const fragment = selection.kind === Kind.FRAGMENT_SPREAD ? fragments.get(selection.name.value) : selection;
    if (!fragment || (selection.kind === Kind.FRAGMENT_SPREAD && spread.has(selection.name.value))) return null;
    if (selection.kind === Kind.FRAGMENT_SPREAD) spread.add(selection.name.value);
    const condition = fragment.typeCondition ? this.schema.getType(fragment.typeCondition.name.value) : parent;
    return { selectionSet: fragment.selectionSet, type: condition && isCompositeType(condition) ? condition : parent };
  }

  private walk(
    selections: SelectionSetNode,
    parent: GraphQLCompositeType,
    inherited: Hint | null,
    fragments: ReadonlyMap<string, FragmentDefinitionNode>,
    policy: CachePolicy,
    spread: Set<string>,
  ): void {
    for (const selection of selections.selections) {
      if (selection.kind === Kind.INLINE_FRAGMENT || selection.kind === Kind.FRAGMENT_SPREAD) {
        const entered = this.enter(selection, parent, fragments, spread);
        if (entered) this.walk(entered.selectionSet, entered.type, inherited, fragments, policy, spread);
        continue;
      }
      const name = selection.name.value;
      if (name === '__typename') continue;
      const field = isObjectType(parent) || isInterfaceType(parent) ? parent.getFields()[name] : undefined;
      const type = field ? getNamedType(field.type) : undefined;
      const hint = this.hints.get(`${parent.name}.${name}`) ?? (type && isCompositeType(type) ? this.hints.get(type.name) : undefined) ?? inherited;
      if (!hint) {
        policy.maxAge = 0;
        return;
      }
      policy.maxAge = Math.min(policy.maxAge, hint.maxAge);
      if (hint.scope === 'PRIVATE') policy.scope = 'PRIVATE';
      if (selection.selectionSet && type && isCompositeType(type)) this.walk(selection.selectionSet, type, hint, fragments, policy, spread);
    }
  }
}

function hintOf(
  directives: readonly { name: { value: string }; arguments?: readonly { name: { value: string }; value: { kind: string; value?: unknown } }[] }[] | undefined,
): Hint | null {
  const directive = directives?.find((d) => d.name.value === 'cacheControl');
  if (!directive) return null;
  const maxAge = directive.arguments?.find((a) => a.name.value === 'maxAge')?.value;
  const scope = directive.arguments?.find((a) => a.name.value === 'scope')?.value;
  return {
    maxAge: maxAge?.kind === Kind.INT ? Number(maxAge.value) : 0,
    scope: scope?.kind === Kind.ENUM && scope.value === 'PUBLIC' ? 'PUBLIC' : 'PRIVATE',
  };
}
