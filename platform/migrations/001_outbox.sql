-- Every state change writes its event here in the same transaction; the id is the event cursor.
CREATE TABLE outbox (
  id bigserial PRIMARY KEY,
  topic text NOT NULL,
  payload jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX outbox_topic_id ON outbox (topic, id);
