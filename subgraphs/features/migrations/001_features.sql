-- One row per materialization into the online store (whichever store holds the values).
CREATE TABLE features_materializations (
  id bigserial PRIMARY KEY,
  as_of timestamptz NOT NULL,
  watermark timestamptz,
  rows_written integer NOT NULL CHECK (rows_written >= 0),
  views jsonb NOT NULL,
  online_store text NOT NULL CHECK (online_store IN ('database', 'redis')),
  engine text NOT NULL,
  milliseconds double precision NOT NULL,
  materialized_at timestamptz NOT NULL DEFAULT now()
);

-- The online store when it is the database: one row per entity and view, replaced whole by each
-- materialization of the view in one transaction (readers see the old set or the new one).
CREATE TABLE features_online (
  entity_type text NOT NULL CHECK (entity_type IN ('policy', 'claim', 'machine')),
  entity_id text NOT NULL,
  view text NOT NULL,
  materialization_id bigint NOT NULL REFERENCES features_materializations (id),
  version text NOT NULL,
  feature_ts timestamptz NOT NULL,
  vals jsonb NOT NULL,
  PRIMARY KEY (entity_type, entity_id, view)
);
CREATE INDEX features_online_view ON features_online (view);
