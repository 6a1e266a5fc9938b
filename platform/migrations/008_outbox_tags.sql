-- What each event changed, as the gateways' state caches read it (platform/state-trace.ts): a collection
-- (`Machine`), one row (`Machine:M-1`) or one owner's rows (`Booking@tenant-a`); empty for an event about no
-- state. NULL: written by a process that predates tags (a server not yet upgraded), read as `*` (anything
-- may have changed), so a cache never keeps what such a write changed.
ALTER TABLE outbox ADD COLUMN tags text[];
