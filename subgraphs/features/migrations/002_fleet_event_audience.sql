-- Fleet-wide events stored while NULL meant "everyone" (platform/migrations/007) say so explicitly:
-- materializations of the feature views. Every other event without an audience stays withheld from tenants.
UPDATE outbox SET audience = '"everyone"'::jsonb WHERE audience IS NULL AND topic = 'features.materialized';
