import type { z } from 'zod';
import { domainError, type FieldProblem } from './errors.js';

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
