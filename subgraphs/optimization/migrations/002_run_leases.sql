-- A running run is owned by the process computing it, which renews its lease; a run whose lease has
-- expired was lost with its process and is failed (by any instance's sweep, or at the start of an
-- embedded database's one writer). Runs left running by an earlier version hold no lease: they expire at
-- the first sweep.
ALTER TABLE optimization_runs ADD COLUMN owner text;
ALTER TABLE optimization_runs ADD COLUMN lease_until timestamptz;
UPDATE optimization_runs SET lease_until = created_at WHERE status = 'running';
CREATE INDEX optimization_runs_lease ON optimization_runs (lease_until) WHERE status = 'running';
