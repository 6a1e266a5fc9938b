-- A quantum run is owned by the tenant and the principal of that tenant that started it
-- (platform/ownership.ts); `owner` stays the process that computes it (its lease). Runs from before owners
-- were kept are the demo tenant's, as demo mode's were.
ALTER TABLE optimization_runs ADD COLUMN tenant text NOT NULL DEFAULT 'demo';
ALTER TABLE optimization_runs ADD COLUMN principal text NOT NULL DEFAULT 'demo';
ALTER TABLE optimization_runs ALTER COLUMN tenant DROP DEFAULT;
ALTER TABLE optimization_runs ALTER COLUMN principal DROP DEFAULT;
CREATE INDEX optimization_runs_tenant_seq ON optimization_runs (tenant, seq DESC);
-- Run events written before events carried their owner are their run's tenant's.
UPDATE outbox o SET audience = jsonb_build_object(
    'owner', jsonb_build_object('tenant', coalesce(r.tenant, 'operators'), 'principal', coalesce(r.principal, 'system')), 'grain', 'tenant')
  FROM outbox x LEFT JOIN optimization_runs r ON r.id::text = x.key
  WHERE o.id = x.id AND o.topic = 'optimization.run' AND o.audience IS NULL;
