-- The ledger's totalCount is kept as bookings are written instead of counted on every page: count(*) read
-- every booking of the tenant for each page, so a partner walking its ledger page by page read it whole once
-- per page. Triggers keep the count, in the writer's transaction, so every way a booking row is written (the
-- store, a bulk load, a seed) keeps it right. A tenant's count is spread over 16 rows by the booking's seq:
-- bookings confirmed at the same time (consecutive seqs) update different rows and do not wait for each
-- other's commit.
CREATE TABLE rental_booking_counts (
  tenant text NOT NULL,
  slot smallint NOT NULL,
  bookings bigint NOT NULL,
  PRIMARY KEY (tenant, slot)
);

INSERT INTO rental_booking_counts (tenant, slot, bookings)
  SELECT tenant, (seq % 16)::smallint, count(*) FROM rental_bookings GROUP BY 1, 2;

CREATE FUNCTION rental_booking_counts_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO rental_booking_counts AS c (tenant, slot, bookings)
    SELECT tenant, (seq % 16)::smallint, count(*) FROM added GROUP BY 1, 2
    ON CONFLICT (tenant, slot) DO UPDATE SET bookings = c.bookings + excluded.bookings;
  RETURN NULL;
END
$$;

CREATE FUNCTION rental_booking_counts_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE rental_booking_counts c SET bookings = c.bookings - r.n
    FROM (SELECT tenant, (seq % 16)::smallint AS slot, count(*) AS n FROM removed GROUP BY 1, 2) r
    WHERE c.tenant = r.tenant AND c.slot = r.slot;
  RETURN NULL;
END
$$;

CREATE FUNCTION rental_booking_counts_emptied() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM rental_booking_counts;
  RETURN NULL;
END
$$;

-- A booking's owner and its place in the ledger never change (platform/ownership.ts); the count relies on it.
CREATE FUNCTION rental_bookings_keep_owner() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'a booking''s tenant and seq never change (booking %)', OLD.id;
END
$$;

CREATE TRIGGER rental_booking_counts_added AFTER INSERT ON rental_bookings
  REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION rental_booking_counts_added();
CREATE TRIGGER rental_booking_counts_removed AFTER DELETE ON rental_bookings
  REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION rental_booking_counts_removed();
CREATE TRIGGER rental_booking_counts_emptied AFTER TRUNCATE ON rental_bookings
  FOR EACH STATEMENT EXECUTE FUNCTION rental_booking_counts_emptied();
CREATE TRIGGER rental_bookings_keep_owner BEFORE UPDATE OF tenant, seq ON rental_bookings
  FOR EACH ROW WHEN (OLD.tenant IS DISTINCT FROM NEW.tenant OR OLD.seq IS DISTINCT FROM NEW.seq)
  EXECUTE FUNCTION rental_bookings_keep_owner();
