import {
  ERRORS,
  isCompositeType,
  isCustomScalarType,
  isEnumType,
  isListType,
  isNonNullType,
  isObjectType,
  isSubtype,
  parseSelectionSet,
  Variable,
  type Directive,
  type FieldSelection,
  type NamedType,
  type OperationElement,
  type Operation,
  type Schema,
  type Selection,
  type SelectionSet,
  type Type,
} from '@apollo/federation-internals';
import {
  executeSync,
  GraphQLError,
  Kind,
  OperationTypeNode,
  visit,
  type DocumentNode,
  type GraphQLSchema,
  type SelectionNode,
  type VariableDefinitionNode,
} from 'graphql';
import { type ResultMap, hasOwn } from './plan-nodes.js';

/* eslint-disable @typescript-eslint/no-base-to-string, @typescript-eslint/restrict-template-expressions --
   the messages below are @apollo/gateway's resultShaping.js word for word, values stringified as it does
   (test/gateway/planner/plan-executor-shaping.test.ts compares them); those rules would change what a client reads. */

/*
 * Result shaping, compiled: @apollo/gateway's computeResponse (dist/resultShaping.js) over records built
 * once per operation, and the introspection fields answered from the API schema.
 */

export function executeIntrospection(
  schema: GraphQLSchema,
  selection: SelectionNode,
  variableDefinitions: readonly VariableDefinitionNode[] | undefined,
  variableValues: Record<string, unknown> | undefined,
): unknown {
  const used = new Set<string>();
  visit(selection, { Variable: ({ name }) => void used.add(name.value) });
  const document: DocumentNode = {
    kind: Kind.DOCUMENT,
    definitions: [
      {
        kind: Kind.OPERATION_DEFINITION,
        operation: OperationTypeNode.QUERY,
        variableDefinitions: variableDefinitions?.filter((d) => used.has(d.variable.name.value)),
        selectionSet: { kind: Kind.SELECTION_SET, selections: [selection] },
      },
    ],
  };
  const { data, errors } = executeSync({ schema, document, rootValue: {}, variableValues });
  if ((errors && errors.length > 0) || !data)
    throw new Error(`Introspection query for ${JSON.stringify(selection)} should not have failed but got ${JSON.stringify(errors)}`);
  const key = selection.kind === Kind.FIELD ? (selection.alias?.value ?? selection.name.value) : '';
  return hasOwn(data, key) ? data[key] : undefined;
}

// ---------------------------------------------------------------------------------------------------
// Result shaping, compiled: @apollo/gateway's computeResponse over records built once per operation.

/** A value's shape along its type's wrappers. `sel`: the field has a selection set. */
type ValueShape =
  | { kind: 'nonNull'; of: ValueShape; sel: boolean; typeStr: string }
  | { kind: 'list'; of: ValueShape; sel: boolean; typeStr: string }
  | { kind: 'composite'; selections: SelectionShape[]; typeName: string; sel: boolean; typeStr: string; plain: boolean }
  | { kind: 'leaf'; leaf: LeafKind; enumValues: ReadonlySet<string> | null; sel: boolean; typeStr: string };

type LeafKind = 'custom' | 'boolean' | 'int' | 'id' | 'float' | 'string' | 'enum';

/** A test of @skip / @include against the request's variables (with the operation's defaults). */
type SkipTest = (variables: ResultMap) => boolean;

type SelectionShape =
  | { kind: 'introspection'; responseName: string; skip: SkipTest | null; selection: FieldSelection }
  | { kind: 'typename'; responseName: string; skip: SkipTest | null }
  | { kind: 'field'; responseName: string; skip: SkipTest | null; value: ValueShape }
  | { kind: 'fragment'; skip: SkipTest | null; matches: ReadonlySet<string> | null; typeConditionName: string | null; selections: SelectionShape[] };

interface SchemaFacts {
  all: ReadonlySet<string>;
  objects: ReadonlySet<string>;
  composites: ReadonlySet<string>;
  named: ReadonlyMap<string, NamedType>;
}

const schemaFacts = new WeakMap<Schema, SchemaFacts>();

function factsOf(schema: Schema): SchemaFacts {
  let facts = schemaFacts.get(schema);
  if (!facts) {
    const named = new Map<string, NamedType>();
    for (const type of schema.allTypes()) named.set(type.name, type);
    const names = [...named.keys()];
    facts = {
      all: new Set(names),
      objects: new Set(names.filter((n) => isObjectType(named.get(n)!))),
      composites: new Set(names.filter((n) => isCompositeType(named.get(n)!))),
      named,
    };
    schemaFacts.set(schema, facts);
  }
  return facts;
}

export interface CompiledOperation {
  operation: Operation;
  /** The whole operation's shaping. */
  shape: CompiledSelection;
  /** The shaping of a part of it (a query plan's primary or deferred subselection) on `parentTypeName`. */
  part(source: string, parentTypeName: string): CompiledSelection;
}

/** Compiles the operation's shaping once; `shape` then runs per request (`part` for deferred parts). Exported for tests. */
export function compileOperation(operation: Operation): CompiledOperation {
  const schema = operation.schema();
  const rootTypeName = schema.schemaDefinition.rootType(operation.rootKind)!.name;
  const whole = compileSelection(operation, operation.selectionSet, rootTypeName);
  const parts = new Map<string, CompiledSelection>();
  return {
    operation,
    shape: whole,
    part(source, parentTypeName) {
      const key = `${parentTypeName}\u0000${source}`;
      let compiled = parts.get(key);
      if (!compiled) {
        const parentType = schema.type(parentTypeName);
        if (!parentType || !isCompositeType(parentType)) throw new Error(`No composite type ${parentTypeName} for a deferred part`);
        const selectionSet = parseSelectionSet({ parentType, source, variableDefinitions: operation.variableDefinitions, validate: false });
        compiled = compileSelection(operation, selectionSet, parentTypeName);
        parts.set(key, compiled);
      }
      return compiled;
    },
  };
}

/** A selection's shaping: `input` (the merged answers at its object) shaped into a new object. */
type CompiledSelection = (
  input: ResultMap,
  variables: Record<string, unknown> | undefined,
  introspect: (selection: FieldSelection) => unknown,
  path?: readonly (string | number)[],
) => { data: ResultMap | null; errors: GraphQLError[] };

/**
 * Compiles a selection set's shaping once: its shapes against the operation's schema, then a function that
 * runs them per request with the operation's variable defaults.
 */
function compileSelection(operation: Operation, selectionSet: SelectionSet, parentTypeName: string): CompiledSelection {
  const compiler = new ShapeCompiler(operation.schema());
  const root = compiler.selectionShapes(selectionSet);
  const rootPlain = plainObjects(root);
  const { facts, usesVariables } = compiler;
  const defaults = operation.collectDefaultedVariableValues();
  const hasDefaults = Object.keys(defaults).length > 0;

  return (input, variables, introspect, path = []) => {
    const state: ShapeState = {
      variables: usesVariables ? (hasDefaults ? { __proto__: null, ...defaults, ...variables } : { __proto__: null, ...variables }) : EMPTY,
      errors: [],
      introspect,
      path: [...path],
      invalid: false,
      hasErrors: false,
      facts,
    };
    const data: ResultMap = rootPlain ? {} : (Object.create(null) as ResultMap);
    const bubbled = applySelections(state, input, root, data, parentTypeName);
    return { data: bubbled ? null : data, errors: state.errors };
  };
}

/**
 * The shapes of an operation's selections against its schema, built case by case as @apollo/gateway's
 * result shaping reads the operation. One compiler per compiled selection: it remembers the fragment
 * conditions it has resolved and whether any @skip or @include reads a variable.
 */
class ShapeCompiler {
  readonly facts: SchemaFacts;
  /** Whether a @skip or @include of the selections compiled reads a variable (then each request's are merged with the defaults). */
  usesVariables = false;
  private readonly leafKinds: ReadonlyMap<NamedType, LeafKind>;
  /** The names of the types a fragment on each type condition applies to, by the condition's name. */
  private readonly matchesCache = new Map<string, ReadonlySet<string>>();

  constructor(private readonly schema: Schema) {
    this.facts = factsOf(schema);
    this.leafKinds = new Map<NamedType, LeafKind>([
      [schema.booleanType(), 'boolean'],
      [schema.intType(), 'int'],
      [schema.idType(), 'id'],
      [schema.floatType(), 'float'],
    ]);
  }

  selectionShapes(selectionSet: SelectionSet): SelectionShape[] {
    return selectionSet.selections().map((selection): SelectionShape => {
      const skip = this.skipTest(selection);
      if (selection.kind === 'FieldSelection') {
        const field = selection.element;
        const responseName = field.responseName();
        if (field.definition.isSchemaIntrospectionField()) return { kind: 'introspection', responseName, skip, selection: selection };
        if (field.name === '__typename') return { kind: 'typename', responseName, skip };
        return { kind: 'field', responseName, skip, value: this.valueShape(field.definition.type!, selection.selectionSet) };
      }
      const fragment = selection.element;
      const condition = fragment.typeCondition;
      return {
        kind: 'fragment',
        skip,
        matches: condition ? this.matches(condition) : null,
        typeConditionName: condition?.name ?? null,
        selections: this.selectionShapes(selection.selectionSet),
      };
    });
  }

  private valueShape(type: Type, selectionSet: SelectionSet | undefined): ValueShape {
    const sel = selectionSet !== undefined;
    const typeStr = type.toString();
    if (isNonNullType(type)) return { kind: 'nonNull', of: this.valueShape(type.ofType as Type, selectionSet), sel, typeStr };
    if (isListType(type)) return { kind: 'list', of: this.valueShape(type.ofType as Type, selectionSet), sel, typeStr };
    if (isCompositeType(type)) {
      const selections = selectionSet ? this.selectionShapes(selectionSet) : [];
      return { kind: 'composite', selections, typeName: type.name, sel, typeStr, plain: plainObjects(selections) };
    }
    const named = type as NamedType;
    const leaf: LeafKind = isCustomScalarType(named) ? 'custom' : isEnumType(named) ? 'enum' : (this.leafKinds.get(named) ?? 'string');
    const enumValues = isEnumType(named) ? new Set(named.values.map((v) => v.name)) : null;
    return { kind: 'leaf', leaf, enumValues, sel, typeStr };
  }

  /** The selection's @skip and @include as one test (null without either). */
  private skipTest(selection: Selection): SkipTest | null {
    const element = selection.element;
    const skip = element.appliedDirectivesOf(this.schema.skipDirective())[0];
    const include = element.appliedDirectivesOf(this.schema.includeDirective())[0];
    if (!skip && !include) return null;
    const skipIf = skip ? this.conditionOf(skip) : null;
    const includeIf = include ? this.conditionOf(include) : null;
    return (variables) => Boolean((skipIf && skipIf(variables)) || (includeIf && !includeIf(variables)));
  }

  /** The value of a @skip or @include's `if`: a constant, or a variable read per request (a boolean, or the request fails). */
  private conditionOf(directive: Directive<OperationElement>): SkipTest {
    const arg = (directive.arguments() as { if: unknown }).if;
    if (arg instanceof Variable) {
      this.usesVariables = true;
      const name = arg.name;
      const described = `${arg}`;
      const of = `${directive}`;
      return (variables) => {
        const value = variables[name];
        if (value === undefined || typeof value !== 'boolean') throw new Error(`Unexpected value ${String(value)} for variable ${described} of ${of}`);
        return value;
      };
    }
    const constant = Boolean(arg);
    return () => constant;
  }

  /** The names of the types a fragment on `condition` applies to. */
  private matches(condition: NamedType): ReadonlySet<string> {
    let set = this.matchesCache.get(condition.name);
    if (!set) {
      set = new Set([...this.facts.named.values()].filter((t) => isSubtype(condition as never, t as never)).map((t) => t.name));
      this.matchesCache.set(condition.name, set);
    }
    return set;
  }
}

/**
 * Whether the objects of a selection can be plain ones: they can unless a response name is one that
 * Object.prototype has (`__proto__`, `constructor`, `toString`, ...; then, as in @apollo/gateway, they have
 * no prototype, so reading a key not yet written finds nothing). Plain objects are made in fast mode and
 * written by JSON.stringify about a third faster than prototype-less ones, which V8 keeps as dictionaries.
 */
function plainObjects(selections: readonly SelectionShape[]): boolean {
  return selections.every((s) => (s.kind === 'fragment' ? plainObjects(s.selections) : !(s.responseName in Object.prototype)));
}

const EMPTY: ResultMap = Object.freeze(Object.create(null) as ResultMap);

interface ShapeState {
  variables: ResultMap;
  errors: GraphQLError[];
  introspect(selection: FieldSelection): unknown;
  path: (string | number)[];
  /** Set by `updateValue`: its value is invalid (a null where a non-null was owed), to bubble up. */
  invalid: boolean;
  /** Set by `updateValue`: an error was recorded for its value. */
  hasErrors: boolean;
  facts: SchemaFacts;
}

/** Shapes `input` into `output` along `selections`; true when a null bubbles up past this object. */
function applySelections(state: ShapeState, input: ResultMap, selections: readonly SelectionShape[], output: ResultMap, parentTypeName: string): boolean {
  for (const selection of selections) {
    if (selection.skip !== null && selection.skip(state.variables)) continue;
    switch (selection.kind) {
      case 'field': {
        const name = selection.responseName;
        const outputValue = output[name];
        const inputValue = (hasOwn(input, name) ? input[name] : undefined) ?? null;
        state.path.push(name);
        const updated = updateValue(state, outputValue, selection.value, inputValue, parentTypeName);
        output[name] = updated;
        state.path.pop();
        if (state.invalid) return true;
        break;
      }
      case 'typename': {
        const name = selection.responseName;
        if (output[name] !== undefined) break;
        let inputValue = (hasOwn(input, name) ? input[name] : undefined) ?? null;
        if (inputValue === null && name !== '__typename') inputValue = input['__typename'] ?? null;
        const typeName = typeof inputValue === 'string' && state.facts.all.has(inputValue) ? inputValue : parentTypeName;
        if (!state.facts.objects.has(typeName)) return true;
        output[name] = typeName;
        break;
      }
      case 'introspection':
        if (output[selection.responseName] === undefined) output[selection.responseName] = state.introspect(selection.selection);
        break;
      case 'fragment': {
        const typename = input['__typename'];
        if (typename && typeof typename !== 'string') throw new Error(`Got unexpected value for __typename: ${String(typename)}`);
        const applies = selection.matches === null || selection.matches.has(typeof typename === 'string' && typename !== '' ? typename : parentTypeName);
        if (applies && applySelections(state, input, selection.selections, output, selection.typeConditionName ?? parentTypeName)) return true;
        break;
      }
    }
  }
  return false;
}

function describeLast(path: readonly (string | number)[], typeStr: string, parentTypeName: string): string {
  const element = path[path.length - 1];
  return typeof element === 'string' ? `field ${parentTypeName}.${element}` : `array element of type ${typeStr} at index ${element}`;
}

const integerString = /^-?(?:0|[1-9][0-9]*)$/;

function validLeaf(shape: Extract<ValueShape, { kind: 'leaf' }>, value: unknown): boolean {
  const leaf = shape.leaf;
  if (leaf === 'custom') return true;
  if (typeof value === 'boolean') return leaf === 'boolean';
  if (typeof value === 'number' && isFinite(value)) {
    if (leaf === 'int' || leaf === 'id') return integerString.test(String(value));
    return leaf === 'float';
  }
  if (typeof value === 'string') {
    if (leaf === 'enum') return shape.enumValues!.has(value);
    return leaf !== 'boolean' && leaf !== 'int' && leaf !== 'float';
  }
  return false;
}

/**
 * The shaped value; sets `state.invalid` and `state.hasErrors` as the gateway's result object would say.
 * It is @apollo/gateway's `updateValue`, case by case in the same order. It runs for every value of every
 * answer, so the cases stay inline; only what happens when a value is wrong (`nullInNonNull`,
 * `invalidValue`) is a function of its own.
 */
function updateValue(state: ShapeState, outputValue: unknown, shape: ValueShape, inputValue: unknown, parentTypeName: string): unknown {
  if (inputValue === undefined) throw new Error('Should not pass undefined for `inputValue` to this method');
  if (outputValue === null || (outputValue !== undefined && !shape.sel)) {
    state.invalid = false;
    state.hasErrors = false;
    return outputValue;
  }
  switch (shape.kind) {
    case 'nonNull': {
      const updated = updateValue(state, outputValue, shape.of, inputValue, parentTypeName);
      if (updated === null) return nullInNonNull(state, shape.of.typeStr, parentTypeName);
      state.invalid = false;
      state.hasErrors = false;
      return updated;
    }
    case 'list': {
      if (inputValue === null) return settle(state, null);
      if (!Array.isArray(inputValue)) throw new Error(`Invalid non-list value ${String(inputValue)} returned by subgraph for list type ${shape.typeStr}`);
      if (outputValue !== undefined && !Array.isArray(outputValue))
        throw new Error(`Invalid non-list value ${String(outputValue)} returned by subgraph for list type ${shape.typeStr}`);
      const previous = outputValue as unknown[] | undefined;
      const length = inputValue.length;
      if (previous !== undefined && previous.length !== length)
        throw new Error(`[${String(inputValue)}].length (${length}) !== [${String(previous)}].length (${previous.length})`);
      let nullify = false;
      let hasErrors = false;
      const updated: unknown[] = [];
      for (let i = 0; i < length; i++) {
        state.path.push(i);
        updated.push(updateValue(state, previous === undefined ? undefined : previous[i], shape.of, inputValue[i], parentTypeName));
        state.path.pop();
        nullify ||= state.invalid;
        hasErrors ||= state.hasErrors;
      }
      state.invalid = false;
      state.hasErrors = hasErrors;
      return nullify ? null : updated;
    }
    case 'composite': {
      if (inputValue === null) return settle(state, null);
      if (typeof inputValue !== 'object')
        throw new Error(`Invalid non-object value ${String(inputValue)} returned by subgraph for composite type ${shape.typeStr}`);
      if (outputValue !== undefined && typeof outputValue !== 'object')
        throw new Error(`Invalid non-object value ${String(inputValue)} returned by subgraph for composite type ${shape.typeStr}`);
      const record = inputValue as ResultMap;
      const inputTypename = record['__typename'];
      if (inputTypename !== undefined && typeof inputTypename !== 'string')
        throw new Error(`Invalid non-string value ${String(inputTypename)} for __typename at ${String(state.path)}`);
      let typeName = shape.typeName;
      if (inputTypename) {
        if (!state.facts.composites.has(inputTypename))
          return invalidValue(state, `Invalid __typename found for object at ${describeLast(state.path, shape.typeStr, parentTypeName)}.`);
        typeName = inputTypename;
      }
      const output = outputValue !== undefined ? (outputValue as ResultMap) : shape.plain ? {} : (Object.create(null) as ResultMap);
      const bubbled = applySelections(state, record, shape.selections, output, typeName);
      state.invalid = false;
      state.hasErrors = bubbled;
      return bubbled ? null : output;
    }
    case 'leaf': {
      if (inputValue === null) return settle(state, null);
      if (outputValue !== undefined) throw new Error(`Excepted output to be undefined but got ${shape.typeStr} for type ${shape.typeStr}`);
      if (!validLeaf(shape, inputValue)) return invalidValue(state, `Invalid value found for ${describeLast(state.path, shape.typeStr, parentTypeName)}.`);
      state.invalid = false;
      state.hasErrors = false;
      return inputValue;
    }
  }
}

/**
 * A null where a non-null was owed: it bubbles up to the nearest nullable position, with an error unless
 * the null already came with its own.
 */
function nullInNonNull(state: ShapeState, typeStr: string, parentTypeName: string): null {
  if (!state.hasErrors) {
    state.errors.push(
      ERRORS.INVALID_GRAPHQL.err(`Cannot return null for non-nullable ${describeLast(state.path, typeStr, parentTypeName)}.`, { path: [...state.path] }),
    );
  }
  state.invalid = true;
  state.hasErrors = true;
  return null;
}

/** A value its type does not allow: null, with an error at its path (a non-null type around it bubbles the null up without a second one). */
function invalidValue(state: ShapeState, message: string): null {
  state.errors.push(ERRORS.INVALID_GRAPHQL.err(message, { path: [...state.path] }));
  state.invalid = false;
  state.hasErrors = true;
  return null;
}

function settle(state: ShapeState, value: null): null {
  state.invalid = false;
  state.hasErrors = false;
  return value;
}
