import { z } from 'zod';

/** Inputs of the rental subgraph. GraphQL has already checked the types; these are the domain rules. */
export const MACHINE_ID = /^EQ-\d{3}$/;
/** The shortest rental: a quarter hour, the billing unit (anything shorter would price at nothing). */
export const MIN_DURATION_HOURS = 0.25;
export const MAX_DURATION_HOURS = 2160;
export const MAX_CUSTOMER_NAME = 200;

export const createQuoteInput = z.object({
  machineIds: z
    .array(z.string().regex(MACHINE_ID, 'must look like EQ-001'))
    .min(1, 'must not be empty')
    .max(15, 'at most 15 machines per quote')
    .refine((ids) => new Set(ids).size === ids.length, 'must not list a machine twice'),
  locationId: z.string().trim().min(1, 'must not be empty').max(64),
  startTime: z.date(),
  durationHours: z
    .number()
    .finite()
    .min(MIN_DURATION_HOURS, `must be at least ${MIN_DURATION_HOURS} (15 minutes)`)
    .max(MAX_DURATION_HOURS, `must be at most ${MAX_DURATION_HOURS} (90 days)`),
});
export type CreateQuoteInput = z.infer<typeof createQuoteInput>;

export const confirmBookingInput = z.object({
  quoteId: z.string().trim().min(1, 'must not be empty'),
  customerName: z.string().trim().min(1, 'must not be empty').max(MAX_CUSTOMER_NAME),
});

export const bookingIdArg = z.string().trim().min(1, 'must not be empty').max(64);

export const bookingsPageArgs = z.object({
  first: z.number().int().min(1, 'must be at least 1').max(100, 'must be at most 100'),
  after: z.string().nullish(),
});

/** Start-time window, relative to the pricing instant. */
export const START_TIME_WINDOW = { pastMinutes: 15, futureDays: 365 } as const;

/** The Idempotency-Key header: printable, bounded. */
export const idempotencyKey = z.string().trim().min(1).max(200).regex(/^[\x21-\x7e]+$/, 'must be printable ASCII');
