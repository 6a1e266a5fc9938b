-- A reserved machine carries its reservation's expiry (its quote's), so what the fleet shows and how long it
-- shows it are read from rental_machines alone: the machines, one machine and the fleet's summary depend on
-- the machines' rows, kept for everyone until a machine changes or a reservation expires
-- (platform/state-trace.ts), not on the quotes, which are each tenant's own. Triggers keep it, in the
-- writer's transaction, so every way a machine or quote row is written keeps it right: a quote stored sets
-- the expiry on the machines it reserved (which the same transaction reserved just before); a machine that
-- leaves `reserved` drops it.
ALTER TABLE rental_machines ADD COLUMN reserved_until timestamptz;

UPDATE rental_machines m SET reserved_until = q.expires_at
  FROM rental_quotes q WHERE m.status = 'reserved' AND q.id = m.quote_id;

CREATE FUNCTION rental_machines_reservation_ends() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.status <> 'reserved' THEN
    NEW.reserved_until := NULL;
  END IF;
  RETURN NEW;
END
$$;

CREATE FUNCTION rental_quotes_reserve_until() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE rental_machines SET reserved_until = NEW.expires_at WHERE quote_id = NEW.id AND status = 'reserved';
  RETURN NULL;
END
$$;

CREATE TRIGGER rental_machines_reservation_ends BEFORE INSERT OR UPDATE ON rental_machines
  FOR EACH ROW EXECUTE FUNCTION rental_machines_reservation_ends();
-- Only an active quote holds machines (a bulk load of past quotes does not look for any).
CREATE TRIGGER rental_quotes_reserve_until AFTER INSERT OR UPDATE OF expires_at ON rental_quotes
  FOR EACH ROW WHEN (NEW.status = 'active') EXECUTE FUNCTION rental_quotes_reserve_until();
