-- Subscribers filter by key (a machine id, a booking id); NULL when an event concerns everything.
-- Writers take a transaction-scoped advisory lock before inserting (platform/outbox.ts), so ids become
-- visible in id order and a reader that has seen id N never meets a smaller id later.
ALTER TABLE outbox ADD COLUMN key text;
CREATE INDEX outbox_topic_key_id ON outbox (topic, key, id);
