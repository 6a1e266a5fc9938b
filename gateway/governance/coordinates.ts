import {
  getNamedType,
  getNullableType,
  isEnumType,
  isInputObjectType,
  isListType,
  Kind,
  TypeInfo,
  typeFromAST,
  visit,
  visitWithTypeInfo,
  type DocumentNode,
  type GraphQLInputType,
  type GraphQLSchema,
  type OperationDefinitionNode,
} from 'graphql';

/*
 * The schema coordinates an operation uses: every field (`Type.field`), argument (`Type.field(arg:)`), input
 * field (`Input.field`) and enum value (`Enum.VALUE`) it names, the ones its variables carry included. These
 * are what a schema change can break, so they are what usage records and what a schema check looks up.
 */

export interface OperationCoordinates {
  /** What the document itself names (the same for every request of the operation). */
  fixed: readonly string[];
  /** Variables whose values can name input fields or enum values (input objects, enums, lists of them). */
  variables: ReadonlyArray<{ name: string; type: GraphQLInputType }>;
}

/** The coordinates of `operationName` in a document valid against `schema`, fragments included. */
export function coordinatesOf(schema: GraphQLSchema, document: DocumentNode, operationName: string | null | undefined): OperationCoordinates {
  const operations = document.definitions.filter((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION);
  const operation = operationName ? operations.find((o) => o.name?.value === operationName) : operations[0];
  const used = new Set<string>();
  const typeInfo = new TypeInfo(schema);
  // Fragments are walked wherever they are defined: a document that holds one operation uses them all.
  const definitions = document.definitions.filter((d) => d.kind !== Kind.OPERATION_DEFINITION || d === operation);
  visit(
    { ...document, definitions },
    visitWithTypeInfo(typeInfo, {
      Field(node) {
        const parent = typeInfo.getParentType();
        if (parent && !node.name.value.startsWith('__')) used.add(`${parent.name}.${node.name.value}`);
      },
      Argument(node) {
        const field = typeInfo.getFieldDef();
        const parent = typeInfo.getParentType();
        if (field && parent) used.add(`${parent.name}.${field.name}(${node.name.value}:)`);
      },
      ObjectField(node) {
        const input = typeInfo.getParentInputType();
        const named = input ? getNamedType(input) : null;
        if (named && isInputObjectType(named)) used.add(`${named.name}.${node.name.value}`);
      },
      EnumValue(node) {
        const type = typeInfo.getInputType();
        const named = type ? getNamedType(type) : null;
        if (named && isEnumType(named)) used.add(`${named.name}.${node.value}`);
      },
    }),
  );
  const variables: Array<{ name: string; type: GraphQLInputType }> = [];
  for (const definition of operation?.variableDefinitions ?? []) {
    const type = typeFromAST(schema, definition.type) as GraphQLInputType | undefined;
    const named = type ? getNamedType(type) : null;
    if (type && named && (isInputObjectType(named) || isEnumType(named))) variables.push({ name: definition.variable.name.value, type });
  }
  return { fixed: [...used], variables };
}

/** The input fields and enum values that variable values name (walked against their declared types). */
export function variableCoordinates(variables: OperationCoordinates['variables'], values: Record<string, unknown> | null | undefined, into: Set<string>): void {
  if (!values) return;
  for (const { name, type } of variables) walkValue(type, values[name], into, 0);
}

const MAX_DEPTH = 16;

function walkValue(type: GraphQLInputType, value: unknown, into: Set<string>, depth: number): void {
  if (value === null || value === undefined || depth > MAX_DEPTH) return;
  const nullable = getNullableType(type);
  if (isListType(nullable)) {
    if (Array.isArray(value)) for (const item of value) walkValue(nullable.ofType, item, into, depth + 1);
    else walkValue(nullable.ofType, value, into, depth + 1);
    return;
  }
  if (isEnumType(nullable)) {
    if (typeof value === 'string') into.add(`${nullable.name}.${value}`);
    return;
  }
  if (isInputObjectType(nullable) && typeof value === 'object') {
    const fields = nullable.getFields();
    for (const [key, item] of Object.entries(value as Record<string, unknown>)) {
      const field = fields[key];
      if (!field) continue;
      into.add(`${nullable.name}.${key}`);
      walkValue(field.type, item, into, depth + 1);
    }
  }
}

const COORDINATE = /^([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*)(?:\(([A-Za-z_][A-Za-z0-9_]*):\))?)?$/;

/**
 * What a schema coordinate names in `schema`: whether it exists, and its deprecation reason (fields,
 * arguments, input fields, enum values); null when the text is not a coordinate at all.
 */
export function lookUpCoordinate(schema: GraphQLSchema, coordinate: string): { exists: boolean; deprecated: string | null } | null {
  const match = COORDINATE.exec(coordinate);
  if (!match) return null;
  const [, typeName, member, argument] = match;
  const type = schema.getType(typeName!);
  if (!type) return { exists: false, deprecated: null };
  if (member === undefined) return { exists: true, deprecated: null };
  if (isEnumType(type)) {
    const value = argument === undefined ? type.getValue(member) : undefined;
    return { exists: value !== undefined, deprecated: value?.deprecationReason ?? null };
  }
  if (isInputObjectType(type)) {
    const field = argument === undefined ? type.getFields()[member] : undefined;
    return { exists: field !== undefined, deprecated: field?.deprecationReason ?? null };
  }
  if (!('getFields' in type)) return { exists: false, deprecated: null };
  const field = type.getFields()[member];
  if (!field) return { exists: false, deprecated: null };
  if (argument === undefined) return { exists: true, deprecated: field.deprecationReason ?? null };
  const arg = 'args' in field ? field.args.find((a) => a.name === argument) : undefined;
  return { exists: arg !== undefined, deprecated: arg?.deprecationReason ?? null };
}
