-- Which client used which schema coordinate, per time bucket (gateway/governance/usage.ts). One row per
-- coordinate, bucket, client (name, version, principal) and operation; `requests` adds up across flushes
-- and gateway processes.
CREATE TABLE IF NOT EXISTS gateway_schema_usage (
  coordinate text NOT NULL,
  bucket timestamptz NOT NULL,
  client_name text NOT NULL,
  client_version text NOT NULL,
  tenant text NOT NULL,
  principal text NOT NULL,
  operation_name text NOT NULL,
  operation_id text NOT NULL,
  requests bigint NOT NULL,
  PRIMARY KEY (coordinate, bucket, client_name, client_version, tenant, principal, operation_name, operation_id)
);
CREATE INDEX IF NOT EXISTS gateway_schema_usage_bucket ON gateway_schema_usage (bucket);
