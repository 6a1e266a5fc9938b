-- What each event changed, as the gateways' state caches read it (platform/state-trace.ts): a collection
-- (`Machine`), one row (`Machine:M-1`) or one owner's rows (`Booking@tenant-a`). Events written before
-- this have none: no cache was filled before them.
ALTER TABLE outbox ADD COLUMN tags text[] NOT NULL DEFAULT '{}';
