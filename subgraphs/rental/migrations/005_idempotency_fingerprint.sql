-- The fingerprint (SHA-256 of the normalized request) an Idempotency-Key was first used with, stored
-- with the booking it made in the same insert. The same key with the same request answers that booking;
-- with another request it is refused (IETF draft "The Idempotency-Key HTTP Header Field": 422).
-- Bookings made before this column existed have none: for them the quote id alone decides, as before.
ALTER TABLE rental_bookings ADD COLUMN idempotency_fingerprint text;
