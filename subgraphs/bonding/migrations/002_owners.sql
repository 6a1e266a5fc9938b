-- A session is owned by its user in its user's tenant (platform/ownership.ts): two tenants' users of one
-- name are two users. Sessions from before tenants were kept are the demo tenant's, as demo mode's were.
ALTER TABLE bonding_sessions ADD COLUMN tenant text NOT NULL DEFAULT 'demo';
ALTER TABLE bonding_sessions ALTER COLUMN tenant DROP DEFAULT;
DROP INDEX bonding_sessions_user;
CREATE INDEX bonding_sessions_owner ON bonding_sessions (tenant, user_id, created_at DESC);
-- Session events written before events carried their owner are their session's user's.
UPDATE outbox o SET audience = jsonb_build_object(
    'owner', jsonb_build_object('tenant', coalesce(s.tenant, 'operators'), 'principal', coalesce(s.user_id, 'system')), 'grain', 'principal')
  FROM outbox x LEFT JOIN bonding_sessions s ON s.id = x.key
  WHERE o.id = x.id AND o.topic = 'bonding.session' AND o.audience IS NULL;
-- A distilled key is its session's user's, and says so in its own row.
ALTER TABLE bonding_keys ADD COLUMN tenant text;
ALTER TABLE bonding_keys ADD COLUMN principal text;
UPDATE bonding_keys k SET tenant = s.tenant, principal = s.user_id FROM bonding_sessions s WHERE s.id = k.session_id;
ALTER TABLE bonding_keys ALTER COLUMN tenant SET NOT NULL;
ALTER TABLE bonding_keys ALTER COLUMN principal SET NOT NULL;
