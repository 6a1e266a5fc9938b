-- How far back each topic's events are whole (platform/outbox-retention.ts): every event of `topic` with an
-- id above `pruned_through` is still in the outbox; at or below it some may have been pruned. Topic '*' is
-- the age limit every topic shares. A resume cursor below its topic's horizon is answered CURSOR_EXPIRED.
CREATE TABLE outbox_horizon (
  topic text PRIMARY KEY,
  pruned_through bigint NOT NULL
);
CREATE INDEX outbox_created_at ON outbox (created_at);
