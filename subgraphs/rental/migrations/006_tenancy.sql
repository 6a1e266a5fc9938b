-- Quotes and bookings belong to the tenant whose principal made them (docs: Authorization). Rows from
-- before tenancy belong to the demo tenant, the one principal demo mode has. An Idempotency-Key is a
-- tenant's own: two tenants choosing the same key never meet.
ALTER TABLE rental_quotes ADD COLUMN tenant text NOT NULL DEFAULT 'demo';
ALTER TABLE rental_bookings ADD COLUMN tenant text NOT NULL DEFAULT 'demo';
ALTER TABLE rental_quotes ALTER COLUMN tenant DROP DEFAULT;
ALTER TABLE rental_bookings ALTER COLUMN tenant DROP DEFAULT;
ALTER TABLE rental_bookings DROP CONSTRAINT rental_bookings_idempotency_key_key;
CREATE UNIQUE INDEX rental_bookings_tenant_idempotency_key ON rental_bookings (tenant, idempotency_key);
CREATE INDEX rental_bookings_tenant_seq ON rental_bookings (tenant, seq DESC);
