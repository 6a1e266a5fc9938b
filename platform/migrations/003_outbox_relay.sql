-- Where the relay to the event bus (platform/event-relay.ts) stands in the outbox: every event with an id
-- at or below `position` is in the stream `name`. One relay leads at a time (the lease); the position
-- only moves forward, by conditional update.
CREATE TABLE outbox_relay (
  name text PRIMARY KEY,
  position bigint NOT NULL DEFAULT 0,
  leader text,
  lease_until timestamptz
);
