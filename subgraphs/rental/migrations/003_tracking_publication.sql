-- The tracking status last published to the outbox, and when: the tracker's conditional update on
-- these lets exactly one instance publish each tick. Bookings made before this column existed start
-- from their confirmation (the tracker then publishes whatever is due).
ALTER TABLE rental_bookings ADD COLUMN tracking_status text;
ALTER TABLE rental_bookings ADD COLUMN tracking_at timestamptz;
UPDATE rental_bookings
SET tracking_status = CASE WHEN status = 'completed' THEN 'completed' ELSE 'scheduled' END,
    tracking_at = coalesce(completed_at, confirmed_at);
ALTER TABLE rental_bookings ALTER COLUMN tracking_status SET NOT NULL;
ALTER TABLE rental_bookings ALTER COLUMN tracking_at SET NOT NULL;
CREATE INDEX rental_bookings_tracking ON rental_bookings (status, tracking_status);
