import { Readable } from 'node:stream';
import { parse } from 'csv-parse/sync';
import type { FieldProblem } from '../../platform/errors.js';
import { instantProblem } from '../../platform/scalars.js';
import { MAX_ENTITY_ROWS } from './inputs.js';

/**
 * CSV entity rows for POST /features/pit-training (`Content-Type: text/csv`): a header row naming
 * `event_timestamp` and at least one of `policy_id`, `claim_id`, `machine_id`, optionally `label`; one entity
 * row per line. Parsed to the JSON body shape (`{ entities: [...] }`), so the JSON checks apply too. Problems
 * name the CSV line (`line 3: event_timestamp`).
 */
const CSV_COLUMNS = ['policy_id', 'claim_id', 'machine_id', 'event_timestamp', 'label'] as const;

export function parseEntityCsv(text: string): { value: unknown } | { errors: FieldProblem[] } {
  let records: string[][];
  try {
    // Without `columns`, csv-parse's overloads type a record as unknown: each is an array of strings.
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion
    records = parse(text, { bom: true, skip_empty_lines: true, trim: true, relax_column_count: false }) as string[][];
  } catch (error) {
    const e = error as { message?: string; lines?: number };
    return {
      errors: [
        { field: e.lines ? `line ${e.lines}` : 'body', message: `is not valid CSV: ${String(e.message ?? error).replace(/^Invalid Record Length: /, '')}` },
      ],
    };
  }
  const [header, ...body] = records;
  if (!header) return { errors: [{ field: 'body', message: 'is empty: send a header row and at least one entity row' }] };
  const columns = header.map((h) => h.toLowerCase());
  const errors: FieldProblem[] = [];
  columns.forEach((c, i) => {
    if (!(CSV_COLUMNS as readonly string[]).includes(c))
      errors.push({ field: `header.${i}`, message: `unknown column "${header[i]}" (known: ${CSV_COLUMNS.join(', ')})` });
    if (columns.indexOf(c) !== i) errors.push({ field: `header.${i}`, message: `column "${header[i]}" appears twice` });
  });
  if (!columns.includes('event_timestamp')) errors.push({ field: 'header', message: 'missing column event_timestamp' });
  if (!columns.some((c) => c === 'policy_id' || c === 'claim_id' || c === 'machine_id')) {
    errors.push({ field: 'header', message: 'needs at least one entity key column (policy_id, claim_id or machine_id)' });
  }
  if (body.length === 0 && errors.length === 0) errors.push({ field: 'body', message: 'holds no entity rows' });
  if (body.length > MAX_ENTITY_ROWS) errors.push({ field: 'body', message: `holds ${body.length} entity rows; at most ${MAX_ENTITY_ROWS}` });
  if (errors.length > 0) return { errors };
  const entities = body.map((cells, r) => {
    const line = r + 2;
    const row: Record<string, unknown> = {};
    columns.forEach((c, i) => {
      const cell = cells[i] ?? '';
      if (cell === '') return;
      if (c === 'event_timestamp') {
        const problem = instantProblem(cell);
        if (problem) errors.push({ field: `line ${line}: event_timestamp`, message: problem });
        row[c] = cell;
      } else if (c === 'label') {
        const n = Number(cell);
        if (!Number.isFinite(n)) errors.push({ field: `line ${line}: label`, message: 'must be a number' });
        row[c] = n;
      } else {
        row[c] = cell;
      }
    });
    if (row['event_timestamp'] === undefined) errors.push({ field: `line ${line}: event_timestamp`, message: 'is required' });
    return row;
  });
  if (errors.length > 0) return { errors: errors.slice(0, 50) };
  return { value: { entities } };
}

/** A CSV cell: quoted when it holds a comma, a quote or a line break. */
export function csvCell(value: string | number | null): string {
  if (value === null) return '';
  const text = String(value);
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/** A readable stream of text chunks made lazily (a large frame is never one string). */
export function chunked(chunks: () => Generator<string>): Readable {
  return Readable.from(chunks(), { objectMode: false });
}
