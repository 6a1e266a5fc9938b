-- Every state change writes its events here in the same transaction; the id is the event cursor.
-- Writers take a transaction-scoped advisory lock before inserting (platform/outbox.ts), so ids become
-- visible in id order and a reader that has seen id N never meets a smaller id later.
CREATE TABLE outbox (
  id bigserial PRIMARY KEY,
  topic text NOT NULL,
  -- What subscribers filter on (a machine id, a booking id); NULL when the event concerns everything.
  key text,
  payload jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX outbox_topic_key_id ON outbox (topic, key, id);
CREATE INDEX outbox_topic_id ON outbox (topic, id);
