import { z } from 'zod';
import { domainError, type FieldProblem } from './errors.js';

/**
 * C0 control characters and DEL (U+0000-U+001F, U+007F). None belongs in a name or an id, and
 * PostgreSQL refuses NUL in text outright, so every string input is checked at the edge.
 */
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/;
export const NO_CONTROL_CHARACTERS = 'must not contain control characters';

// With the u flag a surrogate pair is one code point, so this matches only a lone (unpaired) surrogate,
// which no UTF-8 text can hold: stored, it would silently become U+FFFD.
const LONE_SURROGATE = /\p{Cs}/u;
export const WELL_FORMED = 'must be well-formed Unicode (no unpaired surrogate)';

/** A string input without control characters or unpaired surrogates (checked as sent, before any trimming). */
export function text() {
  return z
    .string()
    .refine((s) => !CONTROL_CHARACTERS.test(s), NO_CONTROL_CHARACTERS)
    .refine((s) => !LONE_SURROGATE.test(s), WELL_FORMED);
}

/** One problem with an input, at a path relative to the validated value. */
export interface InputIssue {
  path: readonly PropertyKey[];
  message: string;
}

const TYPE_NAMES: Readonly<Record<string, string>> = {
  string: 'a string',
  number: 'a number',
  int: 'a whole number',
  boolean: 'true or false',
  array: 'an array',
  object: 'an object',
  date: 'a date',
};

/** Messages for values of the wrong type; a schema's own message takes precedence. */
const typeMessages: z.core.$ZodErrorMap = (issue) => {
  if (issue.code !== 'invalid_type') return undefined;
  const input: unknown = issue.input;
  if (issue.expected === 'number' && typeof input === 'number' && !Number.isNaN(input)) return 'must be a finite number';
  return `must be ${TYPE_NAMES[issue.expected] ?? issue.expected}`;
};

/** Whether `path` names a key present (and not undefined) in `value`. */
function isPresent(value: unknown, path: readonly PropertyKey[]): boolean {
  let node = value;
  for (const key of path) {
    if (node === null || typeof node !== 'object' || !Object.hasOwn(node, key)) return false;
    node = (node as Record<PropertyKey, unknown>)[key];
  }
  return node !== undefined;
}

/**
 * Validates `value` with `schema`. An absent field "is required"; a present one of the wrong type says
 * what type it must be (zod 4 no longer reports the offending input on its issues, so presence is
 * decided here, from the value itself).
 */
export function checkInput<T>(schema: z.ZodType<T>, value: unknown): { data: T } | { issues: InputIssue[] } {
  const parsed = schema.safeParse(value, { error: typeMessages });
  if (parsed.success) return { data: parsed.data };
  return {
    issues: parsed.error.issues.map((issue) => ({
      path: issue.path,
      message: issue.code === 'invalid_type' && !isPresent(value, issue.path) ? 'is required' : issue.message,
    })),
  };
}

/** Validates a subgraph input with zod; failures become one BAD_USER_INPUT naming every field. */
export function parseInput<T>(schema: z.ZodType<T>, value: unknown, root?: string): T {
  const checked = checkInput(schema, value);
  if ('data' in checked) return checked.data;
  throw invalidInput(
    checked.issues.map((issue) => ({
      field: [root, ...issue.path.map(String)].filter((s) => s !== undefined && s !== '').join('.') || (root ?? 'input'),
      message: issue.message,
    })),
  );
}

export function invalidInput(fields: FieldProblem[]) {
  const detail = fields.map((f) => `${f.field}: ${f.message}`).join('; ');
  return domainError('BAD_USER_INPUT', `Invalid input: ${detail}`, fields);
}
