import { createHash } from 'node:crypto';
import {
  OperationTypeNode,
  getDirectiveValues,
  getNamedType,
  GraphQLError,
  GraphQLIncludeDirective,
  GraphQLSkipDirective,
  isLeafType,
  isListType,
  isNonNullType,
  isObjectType,
  Kind,
  print,
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  type FragmentSpreadNode,
  type GraphQLObjectType,
  type GraphQLOutputType,
  type GraphQLSchema,
  type InlineFragmentNode,
  type OperationDefinitionNode,
  type SelectionNode,
  type SelectionSetNode,
} from 'graphql';

/*
 * Answering the rest of a query when some of its fields are denied, as Apollo Router does by default: the
 * denied fields are removed from the operation before it is planned (a selection left empty takes its
 * field with it), the rest runs, and the answer is shaped back to the operation the client sent: each
 * removed field `null` with an error at its path, in the order the client selected, a `null` in a
 * non-null position propagating to the nearest nullable field as the GraphQL specification says.
 */

interface FieldDenial {
  /** `Type.field` */
  coordinate: string;
  /** What the principal lacks, in words (`prediction:read`). */
  needs: string;
}

/** Why a field is answered null: its own denial, or every field selected under it denied. */
interface Removal {
  denials: FieldDenial[];
  emptied: boolean;
}

/** The fields of one object in the operation as sent, merged by response key in the order selected. */
interface ShapeNode {
  fields: ShapeField[];
  /** Response keys in the order they were selected, for rebuilding an object a null was added to. */
  order: string[];
}

interface ShapeField {
  key: string;
  type: GraphQLOutputType;
  /** Present when every selection of this key was removed. */
  removal: Removal | null;
  /** The selections under it, where some were removed (null when nothing below needs shaping). */
  child: ShapeNode | null;
  /** Each selection of the key as the chain of nodes whose @skip/@include decide whether it is asked for. */
  conditions: readonly (readonly (FieldNode | InlineFragmentNode | FragmentSpreadNode)[])[];
}

export interface FilteredOperation {
  document: DocumentNode;
  operation: OperationDefinitionNode;
  source: string;
  queryHash: string;
  shape: ShapeNode;
  /** Whether the answer's data is null whatever runs: a removed non-null root field, unconditionally asked for. */
  certainlyNull: boolean;
}

export type Denier = (parent: GraphQLObjectType, field: FieldNode) => FieldDenial | null;

/**
 * The operation without the fields `deny` refuses, and how to shape its answer; null when nothing of the
 * operation remains (the whole operation is then refused).
 */
export function filterOperation(schema: GraphQLSchema, document: DocumentNode, operation: OperationDefinitionNode, deny: Denier): FilteredOperation | null {
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const def of document.definitions) if (def.kind === Kind.FRAGMENT_DEFINITION) fragments.set(def.name.value, def);
  const filter = new DeniedFieldFilter(schema, fragments, deny);
  const root = rootType(schema, operation);
  const top = filter.selectionSet(operation.selectionSet, root);
  if (!top.selectionSet) return null;
  const kept: OperationDefinitionNode = { ...operation, selectionSet: top.selectionSet };
  // The fragments the filtered operation still spreads, each filtered.
  const used = new Set<string>();
  collectSpreads(top.selectionSet, filter.filteredFragments, used);
  const definitions = [
    kept,
    ...[...used].map((name) => ({
      ...(fragments.get(name) as FragmentDefinitionNode),
      selectionSet: filter.filteredFragments.get(name)?.selectionSet as SelectionSetNode,
    })),
  ];
  const filtered: DocumentNode = { kind: Kind.DOCUMENT, definitions };
  const source = print(filtered);
  const shape = shapeOf([{ set: operation.selectionSet, conditions: [] }], root, fragments, filter.removed) ?? { fields: [], order: [] };
  return {
    document: filtered,
    operation: kept,
    source,
    queryHash: createHash('sha256').update(source).digest('hex'),
    shape,
    certainlyNull: shape.fields.some(
      (f) => f.removal && isNonNullType(f.type) && f.conditions.some((chain) => chain.every((node) => !node.directives?.length)),
    ),
  };
}

/** A selection set without its denied fields (null: nothing of it remains), and the denials met in it. */
interface FilteredSelections {
  selectionSet: SelectionSetNode | null;
  denials: FieldDenial[];
}

/**
 * One walk of an operation's selections, removing the fields `deny` refuses: a selection set left empty
 * takes its field with it, and each fragment is filtered once, whichever spread reaches it first.
 */
class DeniedFieldFilter {
  /** Every field removed, with why: read again to shape the answer to the operation as sent. */
  readonly removed = new Map<FieldNode, Removal>();
  /** The fragments filtered so far, by name. */
  readonly filteredFragments = new Map<string, FilteredSelections>();

  constructor(
    private readonly schema: GraphQLSchema,
    private readonly fragments: ReadonlyMap<string, FragmentDefinitionNode>,
    private readonly deny: Denier,
  ) {}

  /** `set` as selected on `parent`, without its denied fields; the set itself when nothing was removed. */
  selectionSet(set: SelectionSetNode, parent: GraphQLObjectType): FilteredSelections {
    const kept: SelectionNode[] = [];
    const denials: FieldDenial[] = [];
    for (const selection of set.selections) {
      if (selection.kind === Kind.FIELD) {
        const denial = selection.name.value.startsWith('__') ? null : this.deny(parent, selection);
        if (denial) {
          this.removed.set(selection, { denials: [denial], emptied: false });
          denials.push(denial);
          continue;
        }
        const type = parent.getFields()[selection.name.value]?.type;
        const named = type ? getNamedType(type) : null;
        if (!selection.selectionSet || !named || !isObjectType(named)) {
          kept.push(selection);
          continue;
        }
        const below = this.selectionSet(selection.selectionSet, named);
        denials.push(...below.denials);
        if (below.selectionSet) kept.push(below.selectionSet === selection.selectionSet ? selection : { ...selection, selectionSet: below.selectionSet });
        else this.removed.set(selection, { denials: below.denials, emptied: true });
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        const on = selection.typeCondition ? this.schema.getType(selection.typeCondition.name.value) : parent;
        const below = this.selectionSet(selection.selectionSet, on && isObjectType(on) ? on : parent);
        denials.push(...below.denials);
        if (below.selectionSet) kept.push(below.selectionSet === selection.selectionSet ? selection : { ...selection, selectionSet: below.selectionSet });
      } else {
        const below = this.fragment(selection.name.value);
        denials.push(...below.denials);
        if (below.selectionSet) kept.push(selection);
      }
    }
    const unchanged = kept.length === set.selections.length && kept.every((s, i) => s === set.selections[i]);
    return { selectionSet: kept.length === 0 ? null : unchanged ? set : { ...set, selections: kept }, denials };
  }

  /** The fragment `name` filtered on its type condition (nothing remains of one the document does not define). */
  private fragment(name: string): FilteredSelections {
    let done = this.filteredFragments.get(name);
    if (done) return done;
    const fragment = this.fragments.get(name);
    const on = fragment ? this.schema.getType(fragment.typeCondition.name.value) : null;
    done = fragment && on && isObjectType(on) ? this.selectionSet(fragment.selectionSet, on) : { selectionSet: null, denials: [] };
    this.filteredFragments.set(name, done);
    return done;
  }
}

/** Adds to `used` the fragments `set` spreads, directly or through the filtered fragments it spreads, in the order first spread. */
function collectSpreads(set: SelectionSetNode, filteredFragments: ReadonlyMap<string, FilteredSelections>, used: Set<string>): void {
  for (const s of set.selections) {
    if (s.kind === Kind.FRAGMENT_SPREAD) {
      if (used.has(s.name.value)) continue;
      used.add(s.name.value);
      const f = filteredFragments.get(s.name.value)?.selectionSet;
      if (f) collectSpreads(f, filteredFragments, used);
    } else if (s.selectionSet) collectSpreads(s.selectionSet, filteredFragments, used);
  }
}

function rootType(schema: GraphQLSchema, operation: OperationDefinitionNode): GraphQLObjectType {
  const root =
    operation.operation === OperationTypeNode.QUERY
      ? schema.getQueryType()
      : operation.operation === OperationTypeNode.MUTATION
        ? schema.getMutationType()
        : schema.getSubscriptionType();
  if (!root) throw new Error(`the schema has no ${operation.operation} type`);
  return root;
}

type Conditional = FieldNode | InlineFragmentNode | FragmentSpreadNode;

/** The shape of the selections `sets` make on one object type; null when nothing under them was removed. */
function shapeOf(
  sets: readonly { set: SelectionSetNode; conditions: readonly Conditional[] }[],
  parent: GraphQLObjectType,
  fragments: ReadonlyMap<string, FragmentDefinitionNode>,
  removed: ReadonlyMap<FieldNode, Removal>,
): ShapeNode | null {
  const byKey = new Map<string, { nodes: FieldNode[]; conditions: (readonly Conditional[])[] }>();
  const collect = (set: SelectionSetNode, conditions: readonly Conditional[]) => {
    for (const s of set.selections) {
      if (s.kind === Kind.FIELD) {
        const key = s.alias?.value ?? s.name.value;
        let entry = byKey.get(key);
        if (!entry) byKey.set(key, (entry = { nodes: [], conditions: [] }));
        entry.nodes.push(s);
        entry.conditions.push([...conditions, s]);
      } else if (s.kind === Kind.INLINE_FRAGMENT) collect(s.selectionSet, [...conditions, s]);
      else {
        const fragment = fragments.get(s.name.value);
        if (fragment) collect(fragment.selectionSet, [...conditions, s]);
      }
    }
  };
  for (const { set, conditions } of sets) collect(set, conditions);

  const fields: ShapeField[] = [];
  let needsShaping = false;
  for (const [key, { nodes, conditions }] of byKey) {
    const first = nodes[0] as FieldNode;
    const type = first.name.value === '__typename' ? null : parent.getFields()[first.name.value]?.type;
    if (!type) {
      fields.push({ key, type: parent, removal: null, child: null, conditions });
      continue;
    }
    const removals = nodes.map((n) => removed.get(n));
    const removal = removals.every((r) => r !== undefined)
      ? { denials: removals.flatMap((r) => r?.denials ?? []), emptied: removals.every((r) => r?.emptied) }
      : null;
    const named = getNamedType(type);
    const child = isObjectType(named)
      ? shapeOf(
          nodes.flatMap((n) => (n.selectionSet ? [{ set: n.selectionSet, conditions: [] }] : [])),
          named,
          fragments,
          removed,
        )
      : null;
    if (removal || child) needsShaping = true;
    fields.push({ key, type, removal, child, conditions });
  }
  return needsShaping ? { fields, order: [...byKey.keys()] } : null;
}

function isIncluded(node: Conditional, variables: Record<string, unknown>): boolean {
  if (!node.directives?.length) return true;
  if (getDirectiveValues(GraphQLSkipDirective, node, variables)?.['if'] === true) return false;
  return getDirectiveValues(GraphQLIncludeDirective, node, variables)?.['if'] !== false;
}

const INVALID = Symbol('a null in a non-null position');
type Json = unknown;

/**
 * The answer to the filtered operation, shaped to the operation as sent: removed fields null with an
 * error each at their path (`error` builds it), in the client's order, nulls propagated per the spec.
 */
export function shapeAnswer(
  shape: ShapeNode,
  data: Record<string, Json> | null | undefined,
  variables: Record<string, unknown>,
  error: (path: readonly (string | number)[], removal: Removal) => GraphQLError,
): { data: Record<string, Json> | null | undefined; errors: GraphQLError[] } {
  const errors: GraphQLError[] = [];
  const included = (field: ShapeField) => field.conditions.some((chain) => chain.every((node) => isIncluded(node, variables)));

  const object = (value: Record<string, Json>, node: ShapeNode, path: (string | number)[]): Record<string, Json> | null => {
    let out = value;
    let added = false;
    for (const field of node.fields) {
      if (!field.removal && !field.child) continue;
      if (field.removal) {
        if (field.key in value || !included(field)) continue;
        errors.push(error([...path, field.key], field.removal));
        if (isNonNullType(field.type)) return null;
        if (out === value) out = { ...value };
        out[field.key] = null;
        added = true;
        continue;
      }
      if (!(field.key in value) || !field.child) continue;
      const shaped = valueOf(value[field.key], field.type, field.child, [...path, field.key]);
      if (shaped === INVALID) return null;
      if (shaped !== value[field.key]) {
        if (out === value) out = { ...value };
        out[field.key] = shaped;
      }
    }
    if (!added) return out;
    const ordered: Record<string, Json> = {};
    for (const key of node.order) if (key in out) ordered[key] = out[key];
    for (const key of Object.keys(out)) if (!(key in ordered)) ordered[key] = out[key];
    return ordered;
  };

  const valueOf = (value: Json, type: GraphQLOutputType, node: ShapeNode, path: (string | number)[]): unknown => {
    if (isNonNullType(type)) {
      const inner = valueOf(value, type.ofType, node, path);
      return inner === null || inner === INVALID ? INVALID : inner;
    }
    if (value === null || value === undefined) return value ?? null;
    if (isListType(type)) {
      if (!Array.isArray(value)) return value;
      let out: Json[] = value;
      for (let i = 0; i < value.length; i++) {
        const shaped = valueOf(value[i], type.ofType, node, [...path, i]);
        if (shaped === INVALID) return null;
        if (shaped !== value[i]) {
          if (out === value) out = [...(value as unknown[])];
          out[i] = shaped;
        }
      }
      return out;
    }
    if (isLeafType(type) || typeof value !== 'object') return value;
    return object(value as Record<string, Json>, node, path);
  };

  if (!data) return { data, errors };
  return { data: object(data, shape, []), errors };
}
