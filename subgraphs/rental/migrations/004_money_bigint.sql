-- Money is kept in integer cents. An int4 column holds at most EUR 21,474,836.47, which the bill of a
-- booking completed very late (overtime) can exceed; bigint holds any amount the pricing can produce.
-- The database layer reads int8 as a JS number and refuses values beyond 2^53 (platform/db.ts).
ALTER TABLE rental_machines ALTER COLUMN hourly_rate_cents TYPE bigint;
ALTER TABLE rental_quotes
  ALTER COLUMN subtotal_cents TYPE bigint,
  ALTER COLUMN delivery_cents TYPE bigint,
  ALTER COLUMN total_cents TYPE bigint;
ALTER TABLE rental_bookings
  ALTER COLUMN quoted_cents TYPE bigint,
  ALTER COLUMN overtime_cents TYPE bigint,
  ALTER COLUMN final_cents TYPE bigint;
