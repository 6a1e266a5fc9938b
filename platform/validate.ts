import { z } from 'zod';
import { domainError, type FieldProblem } from './errors.js';

/**
 * C0 control characters and DEL (U+0000-U+001F, U+007F). None belongs in a name or an id, and
 * PostgreSQL refuses NUL in text outright, so every string input is checked at the edge.
 */
// eslint-disable-next-line no-control-regex -- control characters are what this pattern finds
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/;
const NO_CONTROL_CHARACTERS = 'must not contain control characters';

// With the u flag a surrogate pair is one code point, so this matches only a lone (unpaired) surrogate,
// which no UTF-8 text can hold: stored, it would silently become U+FFFD.
const LONE_SURROGATE = /\p{Cs}/u;
const WELL_FORMED = 'must be well-formed Unicode (no unpaired surrogate)';

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

const UNITS: Readonly<Record<string, [one: string, many: string]>> = {
  string: ['character', 'characters'],
  array: ['item', 'items'],
  set: ['item', 'items'],
};

const sizeLimit = (origin: string, bound: number | bigint, word: 'least' | 'most' | 'exactly') => {
  const unit = UNITS[origin];
  const phrase = word === 'exactly' ? 'exactly' : `at ${word}`;
  if (!unit) return `must be ${phrase} ${bound}`;
  return `must ${origin === 'string' ? 'be' : 'have'} ${phrase} ${bound} ${Number(bound) === 1 ? unit[0] : unit[1]}`;
};

/**
 * Our wording for every kind of zod issue, so zod's own ("Invalid input: expected string, received
 * number", "Too big: expected ...") never reaches a caller. A schema's own message takes precedence.
 */
const issueMessages: z.core.$ZodErrorMap = (issue) => {
  switch (issue.code) {
    case 'invalid_type': {
      const input: unknown = issue.input;
      if (issue.expected === 'number' && typeof input === 'number' && !Number.isNaN(input)) return 'must be a finite number';
      return `must be ${TYPE_NAMES[issue.expected] ?? issue.expected}`;
    }
    case 'too_small':
      if (issue.origin === 'string' && Number(issue.minimum) === 1) return 'must not be empty';
      if ((issue.origin === 'array' || issue.origin === 'set') && Number(issue.minimum) === 1) return 'must not be empty';
      if (issue.inclusive === false && !UNITS[issue.origin]) return `must be greater than ${issue.minimum}`;
      return sizeLimit(issue.origin, issue.minimum, issue.exact ? 'exactly' : 'least');
    case 'too_big':
      if (issue.inclusive === false && !UNITS[issue.origin]) return `must be less than ${issue.maximum}`;
      return sizeLimit(issue.origin, issue.maximum, issue.exact ? 'exactly' : 'most');
    case 'invalid_format':
      return issue.format === 'regex' ? 'is not in the expected format' : `must be a valid ${issue.format.replace(/_/g, ' ')}`;
    case 'not_multiple_of':
      return `must be a multiple of ${issue.divisor}`;
    case 'unrecognized_keys':
      return `unknown field${issue.keys.length === 1 ? '' : 's'}: ${issue.keys.slice(0, 5).join(', ')}${issue.keys.length > 5 ? ', ...' : ''}`;
    case 'invalid_value':
      return `must be one of ${issue.values
        .slice(0, 10)
        .map((v) => JSON.stringify(v))
        .join(', ')}`;
    default:
      return 'is not valid';
  }
};

/**
 * At most this many field problems are listed in one answer; the rest are counted. Enough for the
 * widest input (the 22 dwell features) to be listed whole.
 */
export const MAX_FIELD_PROBLEMS = 25;

/** Field problems as one answer lists them: the first MAX_FIELD_PROBLEMS, and how many more there were. */
export function boundedFields(fields: readonly FieldProblem[]): { fields: FieldProblem[]; truncated: number } {
  return { fields: fields.slice(0, MAX_FIELD_PROBLEMS), truncated: Math.max(0, fields.length - MAX_FIELD_PROBLEMS) };
}

/**
 * One sentence about invalid fields: a few are named with their problems; many are counted
 * ("3,412 fields are invalid; the first 25 are listed in errors").
 */
export function fieldsDetail(listed: readonly FieldProblem[], truncated = 0): string {
  const total = listed.length + truncated;
  if (truncated === 0 && total <= 3) return listed.map((f) => `${f.field}: ${f.message}`).join('; ');
  const count = total.toLocaleString('en-US');
  return truncated === 0
    ? `${count} fields are invalid; each is listed in errors`
    : `${count} fields are invalid; the first ${listed.length} are listed in errors`;
}

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
 * decided here, from the value itself). Each field is named once, with its first problem (an id with a
 * control character is not also told it is malformed).
 */
export function checkInput<T>(schema: z.ZodType<T>, value: unknown): { data: T } | { issues: InputIssue[] } {
  const parsed = schema.safeParse(value, { error: issueMessages });
  if (parsed.success) return { data: parsed.data };
  const seen = new Set<string>();
  const issues: InputIssue[] = [];
  for (const issue of parsed.error.issues) {
    const key = JSON.stringify(issue.path.map(String));
    if (seen.has(key)) continue;
    seen.add(key);
    issues.push({
      path: issue.path,
      message: issue.code === 'invalid_type' && !isPresent(value, issue.path) ? 'is required' : issue.message,
    });
  }
  return { issues };
}

/** Validates a subgraph input with zod; failures become one BAD_USER_INPUT naming every field. */
export function parseInput<T>(schema: z.ZodType<T>, value: unknown, root?: string): T {
  const checked = checkInput(schema, value);
  if ('data' in checked) return checked.data;
  throw invalidInput(issuesAt(checked.issues, root));
}

/** Input issues as field problems, their paths under `root` (a GraphQL argument name). */
export function issuesAt(issues: readonly InputIssue[], root?: string): FieldProblem[] {
  return issues.map((issue) => ({
    field: [root, ...issue.path.map(String)].filter((s) => s !== undefined && s !== '').join('.') || (root ?? 'input'),
    message: issue.message,
  }));
}

/**
 * BAD_USER_INPUT for invalid fields: the first MAX_FIELD_PROBLEMS in `extensions.fields`, the number left
 * out in `extensions.fieldsTruncated`, and a one-sentence message.
 */
export function invalidInput(fields: readonly FieldProblem[]) {
  const bounded = boundedFields(fields);
  const error = domainError('BAD_USER_INPUT', `Invalid input: ${fieldsDetail(bounded.fields, bounded.truncated)}`, bounded.fields);
  if (bounded.truncated > 0) error.extensions['fieldsTruncated'] = bounded.truncated;
  return error;
}
