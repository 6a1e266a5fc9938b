import { z } from 'zod';
import { domainError, type FieldProblem } from './errors.js';

/**
 * C0 control characters and DEL (U+0000-U+001F, U+007F). None belongs in a name or an id, and
 * PostgreSQL refuses NUL in text outright, so every string input is checked at the edge.
 */
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/;
export const NO_CONTROL_CHARACTERS = 'must not contain control characters';

/** A string input without control characters (checked as sent, before any trimming). */
export function text() {
  return z.string().refine((s) => !CONTROL_CHARACTERS.test(s), NO_CONTROL_CHARACTERS);
}

/** Validates a subgraph input with zod; failures become one BAD_USER_INPUT naming every field. */
export function parseInput<T>(schema: z.ZodType<T>, value: unknown, root?: string): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  throw invalidInput(
    parsed.error.issues.map((issue) => ({
      field: [root, ...issue.path.map(String)].filter((s) => s !== undefined && s !== '').join('.') || (root ?? 'input'),
      message: issue.message,
    })),
  );
}

export function invalidInput(fields: FieldProblem[]) {
  const detail = fields.map((f) => `${f.field}: ${f.message}`).join('; ');
  return domainError('BAD_USER_INPUT', `Invalid input: ${detail}`, fields);
}
