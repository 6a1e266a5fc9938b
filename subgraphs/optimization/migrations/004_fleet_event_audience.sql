-- Fleet-wide events stored while NULL meant "everyone" (platform/migrations/007) say so explicitly: the
-- vessels' positions (003_run_owners gave run events their owners). Every other event without an
-- audience stays withheld from tenants.
UPDATE outbox SET audience = '"everyone"'::jsonb WHERE audience IS NULL AND topic = 'optimization.positions';
