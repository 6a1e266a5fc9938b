import { getVariableValues, type GraphQLFormattedError } from 'graphql';
import type { ApolloGateway } from '@apollo/gateway';
import { MAX_FIELD_PROBLEMS } from '../../platform/validate.js';
import { wrapIncomingRequestValidation } from '../planner/apollo-seam.js';
import type { OperationPolicy } from './operation-policy.js';

/*
 * Answers stay proportional to their requests: a document or variables with thousands of problems get
 * the first few listed and a count, and no message carries library internals or a caller's long value
 * back in full.
 */

/** Quoted values longer than this are shortened in messages (graphql-js echoes invalid values whole). */
const MAX_QUOTED = 40;
const LONG_QUOTED = new RegExp(`"((?:[^"\\\\]|\\\\.){${MAX_QUOTED + 1},})"`, 'g');

/** Whether an error, or anything it wraps, is a JavaScript engine fault (a stack overflow on deep nesting). */
function isEngineFault(error: unknown): boolean {
  for (let e = error, depth = 0; e !== null && typeof e === 'object' && depth < 10; depth++) {
    if (e instanceof RangeError || (e instanceof Error && /Maximum call stack size exceeded/.test(e.message))) return true;
    e = (e as { originalError?: unknown; cause?: unknown }).originalError ?? (e as { cause?: unknown }).cause;
  }
  return false;
}

const TOO_DEEP = 'The request is nested too deeply to be processed';

/**
 * graphql-js's suggestions ("Did you mean "fleetSummary"?", "...; Did you mean the enum value "X"?"): they
 * name fields, types and values of the schema, which only a caller that may introspect should learn.
 */
const SUGGESTION = /;? Did you mean [^\n]*\?$/;

/**
 * A client error's message as a caller may see it: no engine internals, no long value echoed whole, and no
 * suggestion of schema names (introspection, with `schema:read`, is the way to read the schema).
 */
export function clientMessage(message: string, error: unknown): string {
  if (isEngineFault(error) || /Maximum call stack size exceeded/.test(message)) return TOO_DEEP;
  return message.replace(SUGGESTION, '').replace(LONG_QUOTED, (_match, value: string) => `"${value.slice(0, MAX_QUOTED)}..." (${value.length} characters)`);
}

/**
 * Variables this policy has coerced without error, by the operation they were checked for (the gateway
 * receives a copy of the request, but the same variables object and the same parsed operation).
 */
const checkedVariables = new WeakMap<object, object>();

/**
 * Coerces the variables of an operation before the gateway does, stopping after MAX_FIELD_PROBLEMS
 * errors: graphql-js otherwise reports every invalid value (a batch of 50,000 bad items is hundreds of
 * thousands of errors, and minutes of work). Valid variables pass on to the gateway untouched.
 */
export function boundedVariablesPolicy(): OperationPolicy {
  return {
    answerInstead({ schema, operation, variables }) {
      const definitions = operation?.variableDefinitions ?? [];
      if (!operation || definitions.length === 0) return null;
      const { errors } = getVariableValues(schema, definitions, variables ?? {}, { maxErrors: MAX_FIELD_PROBLEMS });
      if (!errors || errors.length === 0) {
        if (variables) checkedVariables.set(variables, operation);
        return null;
      }
      const listed = errors.slice(0, MAX_FIELD_PROBLEMS);
      const formatted: GraphQLFormattedError[] = listed.map((e) => ({
        message: clientMessage(e.message, e),
        ...(e.locations ? { locations: e.locations } : {}),
        extensions: { code: 'BAD_USER_INPUT' },
      }));
      if (errors.length > MAX_FIELD_PROBLEMS) {
        formatted.push({
          message: `More variable values are invalid; the first ${MAX_FIELD_PROBLEMS} are listed`,
          extensions: { code: 'BAD_USER_INPUT' },
        });
      }
      return { status: 400, errors: formatted };
    },
  };
}

/**
 * The gateway coerces an operation's variables again before planning, only to find errors, and discards
 * the values: a second full pass over every item of a 1,000-item batch. This lets it skip requests the
 * policy above has already coerced without error (the same variables object for the same operation, against
 * the same API schema); any other request the gateway validates itself.
 */
export function skipRepeatedVariableValidation(gateway: ApolloGateway): void {
  wrapIncomingRequestValidation(gateway, (requestContext, operationContext) => {
    const variables = requestContext.request.variables;
    return variables !== undefined && checkedVariables.get(variables) === operationContext.operation;
  });
}
