-- Fleet-wide events stored while NULL meant "everyone" (platform/migrations/007) say so explicitly: the
-- fleet's summary, and machine statuses that name no quote or booking (007_owners gave the others their
-- owners). Every other event without an audience stays withheld from tenants.
UPDATE outbox SET audience = '"everyone"'::jsonb
  WHERE audience IS NULL AND topic IN ('rental.fleet_summary', 'rental.machine_status');
