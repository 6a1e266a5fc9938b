-- The database's identity, made once when the database is first opened by the service (the runtime inserts
-- it after the migrations, platform/event-relay.ts): the event stream records it with every
-- event relayed, so a stream filled from another database (a new one, a second deployment) is told
-- apart from this one's own, restored or not (platform/event-relay.ts). A backup carries it along.
CREATE TABLE database_identity (
  id uuid PRIMARY KEY,
  created_at timestamptz NOT NULL DEFAULT now(),
  one boolean NOT NULL DEFAULT true UNIQUE CHECK (one)
);
