import { GraphQLError, GraphQLScalarType, Kind } from 'graphql';

// ISO 8601 with a date, a time and an explicit offset (Z or +hh:mm): a UTC instant, never a local time.
const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/;

export function parseInstant(value: unknown): Date | null {
  if (typeof value !== 'string' || !ISO_INSTANT.test(value)) return null;
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? null : date;
}

const invalid = (value: unknown) =>
  new GraphQLError(`DateTime must be an ISO 8601 timestamp with an offset (e.g. 2026-11-22T08:00:00Z), got ${JSON.stringify(value)}`);

export const DateTimeScalar = new GraphQLScalarType<Date, string>({
  name: 'DateTime',
  description: 'An ISO 8601 UTC timestamp.',
  serialize(value) {
    const date = value instanceof Date ? value : typeof value === 'string' ? new Date(value) : null;
    if (!date || Number.isNaN(date.getTime())) throw new GraphQLError(`DateTime cannot represent ${String(value)}`);
    return date.toISOString();
  },
  parseValue(value) {
    const date = parseInstant(value);
    if (!date) throw invalid(value);
    return date;
  },
  parseLiteral(ast) {
    const date = ast.kind === Kind.STRING ? parseInstant(ast.value) : null;
    if (!date) throw invalid(ast.kind === Kind.STRING ? ast.value : ast.kind);
    return date;
  },
});
