-- Who may receive an event (platform/outbox.ts, Audience): NULL for fleet-wide state every subscriber
-- sees; otherwise its owner, how far ownership reaches, and which payload fields are the owner's alone
-- (an event seen by every subscriber, those fields null for the others), or none (the owner's event).
-- Events from before owners were recorded are given one by their subgraphs' migrations.
ALTER TABLE outbox ADD COLUMN audience jsonb;
