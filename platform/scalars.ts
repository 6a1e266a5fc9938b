import { GraphQLError, GraphQLScalarType, Kind, isScalarType, print, type GraphQLSchema } from 'graphql';

// ISO 8601 with a date, a time and an explicit offset (Z or +hh:mm): a UTC instant, never a local time.
const ISO_INSTANT = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:Z|[+-](\d{2}):(\d{2}))$/;

const INSTANT_FORMAT = 'must be an ISO 8601 timestamp with an offset, e.g. 2026-11-22T08:00:00Z';

/** Why `value` is not an instant (a phrase to follow the field's name), or null when it is one. */
export function instantProblem(value: unknown): string | null {
  const match = typeof value === 'string' ? ISO_INSTANT.exec(value) : null;
  if (!match) return INSTANT_FORMAT;
  const [year, month, day, hour, minute, second, offsetHours, offsetMinutes] = match.slice(1).map((f) => Number(f ?? 0)) as [
    number,
    number,
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  // JS Date rolls impossible fields over (2027-02-30 becomes March 2, 24:00 the next day): every field
  // must come back unchanged from a UTC date built from them.
  const built = new Date(0);
  built.setUTCFullYear(year, month - 1, day);
  built.setUTCHours(hour, minute, second);
  const roundTrips =
    built.getUTCFullYear() === year &&
    built.getUTCMonth() === month - 1 &&
    built.getUTCDate() === day &&
    built.getUTCHours() === hour &&
    built.getUTCMinutes() === minute &&
    built.getUTCSeconds() === second;
  if (!roundTrips) return `is not a real date and time: ${whatDoesNotExist(year, month, day, hour, minute)}`;
  if (offsetHours > 23 || offsetMinutes > 59) return 'is not a real date and time: the offset must be at most +/-23:59';
  return Number.isNaN(new Date(value as string).getTime()) ? INSTANT_FORMAT : null;
}

function whatDoesNotExist(year: number, month: number, day: number, hour: number, minute: number): string {
  const pad = (n: number, width = 2) => String(n).padStart(width, '0');
  if (month < 1 || month > 12) return `there is no month ${pad(month)}`;
  const days = new Date(Date.UTC(2000, month, 0)).getUTCDate() - (month === 2 && !isLeapYear(year) ? 1 : 0);
  if (day < 1 || day > days) return `${pad(year, 4)}-${pad(month)} has ${days} days`;
  if (hour > 23) return 'hours run from 00 to 23';
  if (minute > 59) return 'minutes run from 00 to 59';
  return 'seconds run from 00 to 59';
}

const isLeapYear = (y: number) => (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;

export function parseInstant(value: unknown): Date | null {
  return instantProblem(value) === null ? new Date(value as string) : null;
}

const invalid = (value: unknown, problem: string) => new GraphQLError(`DateTime ${JSON.stringify(value)} ${problem}`);

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
    if (!date) throw invalid(value, instantProblem(value) ?? INSTANT_FORMAT);
    return date;
  },
  parseLiteral(ast) {
    const date = ast.kind === Kind.STRING ? parseInstant(ast.value) : null;
    if (!date) {
      if (ast.kind === Kind.STRING) throw invalid(ast.value, instantProblem(ast.value) ?? INSTANT_FORMAT);
      throw new GraphQLError(`DateTime cannot be ${print(ast)}: it must be a string, an ISO 8601 timestamp with an offset`);
    }
    return date;
  },
});

/** The custom scalars the subgraphs implement, by name. */
const SCALARS: readonly GraphQLScalarType[] = [DateTimeScalar];

/**
 * Gives the gateway's schema the subgraphs' input checks for custom scalars. A schema built from the
 * supergraph SDL knows a custom scalar only by name and accepts any value; with these checks a bad
 * literal fails validation and a bad variable fails coercion at the gateway (400), before any subgraph
 * is called. The values themselves pass through unchanged: the subgraph parses them again.
 */
export function checkCustomScalars(schema: GraphQLSchema): void {
  for (const scalar of SCALARS) {
    const type = schema.getType(scalar.name);
    if (!isScalarType(type)) continue;
    type.parseValue = (value) => {
      scalar.parseValue(value);
      return value;
    };
    type.parseLiteral = (ast, variables) => {
      scalar.parseLiteral(ast, variables);
      return ast.kind === Kind.STRING ? ast.value : undefined;
    };
  }
}
