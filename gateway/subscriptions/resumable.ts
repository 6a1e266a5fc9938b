import {
  OperationTypeNode,
  getNamedType,
  getOperationAST,
  isObjectType,
  Kind,
  valueFromAST,
  type ArgumentNode,
  type DocumentNode,
  type ExecutionResult,
  type FieldNode,
  type GraphQLSchema,
} from 'graphql';

/*
 * A subscription the gateway can reopen on its subgraph from the last event it delivered, so a subgraph
 * (or its relay) restarting is a pause for the subscriber, not an error. The gateway plans the operation
 * with its root field's `after` argument bound to a variable of its own and the event's `cursor` selected
 * under an alias of its own; it reads the cursor of every event it delivers (and removes the alias from
 * what the client sees), and reopens with `after` set to that cursor.
 */

export const RESUME_AFTER = '__resumeAfter';
const RESUME_CURSOR = '__resumeCursor';

export interface Resumable {
  /** The operation as planned: `after: $__resumeAfter` and `__resumeCursor: cursor` on its root field. */
  document: DocumentNode;
  /** The root field's response key. */
  rootKey: string;
  /** Where the client asked to start: its own `after` value (null: live). */
  initialAfter: unknown;
}

/**
 * `document` made resumable, or null when it cannot be: its root field takes no `after` argument, its
 * events have no `cursor`, or the root selection is not a single field.
 */
export function resumable(
  schema: GraphQLSchema,
  document: DocumentNode,
  operationName: string | null | undefined,
  variables: Record<string, unknown>,
): Resumable | null {
  const operation = getOperationAST(document, operationName);
  const root = schema.getSubscriptionType();
  if (!operation || operation.operation !== OperationTypeNode.SUBSCRIPTION || !root) return null;
  const [field, ...others] = operation.selectionSet.selections;
  if (!field || others.length > 0 || field.kind !== Kind.FIELD || field.directives?.length) return null;
  const definition = root.getFields()[field.name.value];
  const afterArg = definition?.args.find((a) => a.name === 'after');
  const eventType = definition ? getNamedType(definition.type) : null;
  if (!definition || !afterArg || !eventType || !isObjectType(eventType) || !eventType.getFields()['cursor']) return null;
  if (operation.variableDefinitions?.some((v) => v.variable.name.value === RESUME_AFTER)) return null;

  const given = field.arguments?.find((a) => a.name.value === 'after');
  const initialAfter = given ? (valueFromAST(given.value, afterArg.type, variables) ?? null) : null;
  const after: ArgumentNode = {
    kind: Kind.ARGUMENT,
    name: { kind: Kind.NAME, value: 'after' },
    value: { kind: Kind.VARIABLE, name: { kind: Kind.NAME, value: RESUME_AFTER } },
  };
  const cursor: FieldNode = { kind: Kind.FIELD, alias: { kind: Kind.NAME, value: RESUME_CURSOR }, name: { kind: Kind.NAME, value: 'cursor' } };
  const rewritten: FieldNode = {
    ...field,
    arguments: [...(field.arguments ?? []).filter((a) => a.name.value !== 'after'), after],
    selectionSet: { kind: Kind.SELECTION_SET, selections: [...(field.selectionSet?.selections ?? []), cursor] },
  };
  const planned = {
    ...operation,
    variableDefinitions: [
      ...(operation.variableDefinitions ?? []),
      {
        kind: Kind.VARIABLE_DEFINITION,
        variable: { kind: Kind.VARIABLE, name: { kind: Kind.NAME, value: RESUME_AFTER } },
        type: { kind: Kind.NAMED_TYPE, name: { kind: Kind.NAME, value: getNamedType(afterArg.type).name } },
      },
    ],
    selectionSet: { ...operation.selectionSet, selections: [rewritten] },
  } as const;
  return {
    document: { ...document, definitions: document.definitions.map((d) => (d === operation ? planned : d)) },
    rootKey: field.alias?.value ?? field.name.value,
    initialAfter,
  };
}

/** The cursor of an executed event, and the event as the client asked for it (the alias removed). */
export function takeCursor(result: ExecutionResult, rootKey: string): { cursor: string | null; result: ExecutionResult } {
  const event = result.data?.[rootKey];
  if (!event || typeof event !== 'object' || !(RESUME_CURSOR in event)) return { cursor: null, result };
  const { [RESUME_CURSOR]: cursor, ...rest } = event as Record<string, unknown>;
  return { cursor: typeof cursor === 'string' ? cursor : null, result: { ...result, data: { ...result.data, [rootKey]: rest } } };
}

/** Whether an upstream result says the subgraph was lost (what a remote upstream yields before it ends). */
export function isLoss(result: ExecutionResult): boolean {
  return result.data == null && (result.errors?.length ?? 0) > 0 && (result.errors ?? []).every((e) => e.extensions?.['code'] === 'UPSTREAM_UNAVAILABLE');
}
