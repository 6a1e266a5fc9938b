import { z } from 'zod';
import { text } from '../../platform/validate.js';

/**
 * Inputs of the rental subgraph. GraphQL has already checked the types; these are the domain rules.
 * Every string goes through `text()` (no control characters), and ids are brought to their canonical
 * case here, at the edge, so that loaders, idempotency and comparisons see one spelling of each id.
 */
const MACHINE_ID = /^EQ-\d{3}$/;
const LOCATION_ID = /^LOC-\d{3}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const BOOKING_ID = /^BK-[0-9A-F]{12}$/i;
/** The shortest rental: a quarter hour, the billing unit (anything shorter would price at nothing). */
const MIN_DURATION_HOURS = 0.25;
const MAX_DURATION_HOURS = 2160;
const MAX_CUSTOMER_NAME = 200;
const MAX_ID = 64;

/** Any id argument (machine, location): no control characters, bounded. */
export const idArg = text().trim().min(1, 'must not be empty').max(MAX_ID, `must be at most ${MAX_ID} characters`);

/*
 * Ids a caller names are checked for their form: a malformed id is 400 BAD_USER_INPUT like any other
 * malformed input, and only a well-formed id that names nothing is 404 (or null). Entity references
 * from other subgraphs (`__resolveReference`) use the lenient `*Ref` forms: whatever they name that does
 * not exist resolves to null.
 */
const canonicalQuoteId = (id: string) => (UUID.test(id) ? id.toLowerCase() : id);
const canonicalBookingId = (id: string) => (BOOKING_ID.test(id) ? id.toUpperCase() : id);

const MACHINE_ID_FORMAT = 'must look like EQ-001';
const LOCATION_ID_FORMAT = 'must look like LOC-001';
const QUOTE_ID_FORMAT = 'must be a UUID';
const BOOKING_ID_FORMAT = 'must look like BK-0123456789AB (BK- and 12 hex digits)';

/** A machine id (EQ- and three digits). */
export const machineIdArg = idArg.refine((id) => MACHINE_ID.test(id), MACHINE_ID_FORMAT);
/** A delivery site id (LOC- and three digits). */
const locationIdArg = idArg.refine((id) => LOCATION_ID.test(id), LOCATION_ID_FORMAT);
/** A quote id: a UUID, in lower case (UUIDs are case-insensitive). */
export const quoteIdArg = idArg.refine((id) => UUID.test(id), QUOTE_ID_FORMAT).transform(canonicalQuoteId);
/** A booking id (BK- and 12 hex digits) in its canonical upper case. */
export const bookingIdArg = idArg.refine((id) => BOOKING_ID.test(id), BOOKING_ID_FORMAT).transform(canonicalBookingId);

export const quoteIdRef = idArg.transform(canonicalQuoteId);
export const bookingIdRef = idArg.transform(canonicalBookingId);

export const createQuoteInput = z.object({
  machineIds: z
    .array(text().regex(MACHINE_ID, MACHINE_ID_FORMAT))
    .min(1, 'must not be empty')
    .max(15, 'at most 15 machines per quote')
    .refine((ids) => new Set(ids).size === ids.length, 'must not list a machine twice'),
  locationId: locationIdArg,
  startTime: z.date(),
  durationHours: z
    .number()
    .finite()
    .min(MIN_DURATION_HOURS, `must be at least ${MIN_DURATION_HOURS} (15 minutes)`)
    .max(MAX_DURATION_HOURS, `must be at most ${MAX_DURATION_HOURS} (90 days)`),
});

export const confirmBookingInput = z.object({
  quoteId: quoteIdArg,
  customerName: text().trim().min(1, 'must not be empty').max(MAX_CUSTOMER_NAME, `must be at most ${MAX_CUSTOMER_NAME} characters`),
});

/** Machine ids a subscription filters on (omitted or null: every machine; an empty list is refused). */
export const machineIdsFilter = z.array(machineIdArg).min(1, 'must name at least one machine; omit it for every machine').nullish();

export const bookingsPageArgs = z.object({
  first: z.number().int().min(1, 'must be at least 1').max(100, 'must be at most 100'),
  after: text().nullish(),
});

/**
 * How far ahead a rental may start, from the pricing instant. The earliest start is not a fixed window:
 * it is when the quote's machines can be on site (tracking.ts `earliestStart`).
 */
export const START_TIME_WINDOW = { futureDays: 365 } as const;

/** The Idempotency-Key header: printable, bounded. */
export const idempotencyKey = z
  .string()
  .trim()
  .min(1)
  .max(200)
  .regex(/^[\x21-\x7e]+$/, 'must be printable ASCII');
