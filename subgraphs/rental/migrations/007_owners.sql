-- A quote is owned by the tenant and the principal of that tenant that made it; a booking by its quote's
-- tenant and the principal that confirmed it (platform/ownership.ts). Rows from before owners were kept
-- are the demo tenant's demo principal, as they were the demo tenant's before.
ALTER TABLE rental_quotes ADD COLUMN principal text NOT NULL DEFAULT 'demo';
ALTER TABLE rental_bookings ADD COLUMN principal text NOT NULL DEFAULT 'demo';
ALTER TABLE rental_quotes ALTER COLUMN principal DROP DEFAULT;
ALTER TABLE rental_bookings ALTER COLUMN principal DROP DEFAULT;
-- Events written before events carried their owner get one from the rows they name: a machine's status
-- names its quote or booking (its tenant's alone to see), a booking's and its tracking's events are its
-- tenant's. An event whose row is gone is the operators' alone.
UPDATE outbox o SET audience = jsonb_build_object(
    'owner', jsonb_build_object('tenant', coalesce(b.tenant, q.tenant, 'operators'), 'principal', coalesce(b.principal, q.principal, 'system')),
    'grain', 'tenant', 'private', jsonb_build_array('quoteId', 'bookingId'))
  FROM outbox x
  LEFT JOIN rental_bookings b ON b.id = x.payload->>'bookingId'
  LEFT JOIN rental_quotes q ON q.id::text = x.payload->>'quoteId'
  WHERE o.id = x.id AND o.topic = 'rental.machine_status' AND o.audience IS NULL
    AND (x.payload->>'bookingId' IS NOT NULL OR x.payload->>'quoteId' IS NOT NULL);
UPDATE outbox o SET audience = jsonb_build_object(
    'owner', jsonb_build_object('tenant', coalesce(b.tenant, 'operators'), 'principal', coalesce(b.principal, 'system')), 'grain', 'tenant')
  FROM outbox x LEFT JOIN rental_bookings b ON b.id = x.key
  WHERE o.id = x.id AND o.topic IN ('rental.booking', 'rental.tracking') AND o.audience IS NULL;
