CREATE TABLE rental_depots (
  id text PRIMARY KEY,
  name text NOT NULL,
  latitude double precision NOT NULL,
  longitude double precision NOT NULL
);

CREATE TABLE rental_locations (
  id text PRIMARY KEY,
  name text NOT NULL,
  latitude double precision NOT NULL,
  longitude double precision NOT NULL
);

CREATE TABLE rental_machines (
  id text PRIMARY KEY CHECK (id ~ '^EQ-[0-9]{3}$'),
  name text NOT NULL,
  category text NOT NULL,
  hourly_rate_cents integer NOT NULL CHECK (hourly_rate_cents > 0),
  depot_id text NOT NULL REFERENCES rental_depots (id),
  status text NOT NULL DEFAULT 'available' CHECK (status IN ('available', 'reserved', 'in_use')),
  quote_id uuid,
  booking_id text,
  updated_at timestamptz NOT NULL DEFAULT now(),
  CHECK ((status = 'reserved') = (quote_id IS NOT NULL)),
  CHECK ((status = 'in_use') = (booking_id IS NOT NULL))
);

CREATE TABLE rental_quotes (
  id uuid PRIMARY KEY,
  status text NOT NULL CHECK (status IN ('active', 'confirmed', 'expired')),
  machine_ids text[] NOT NULL,
  location_id text NOT NULL REFERENCES rental_locations (id),
  start_time timestamptz NOT NULL,
  duration_hours double precision NOT NULL,
  utilization double precision NOT NULL,
  surge_multiplier double precision NOT NULL,
  lead_time_hours double precision NOT NULL,
  lead_time_factor double precision NOT NULL,
  line_items jsonb NOT NULL,
  deliveries jsonb NOT NULL,
  subtotal_cents integer NOT NULL,
  delivery_cents integer NOT NULL,
  total_cents integer NOT NULL,
  currency text NOT NULL,
  signature text NOT NULL,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  released_at timestamptz
);
CREATE INDEX rental_quotes_active_expiry ON rental_quotes (expires_at) WHERE status = 'active';

CREATE TABLE rental_bookings (
  seq bigserial UNIQUE,
  id text PRIMARY KEY,
  quote_id uuid NOT NULL UNIQUE REFERENCES rental_quotes (id),
  idempotency_key text UNIQUE,
  customer_name text NOT NULL,
  status text NOT NULL CHECK (status IN ('confirmed', 'completed')),
  machine_ids text[] NOT NULL,
  location_id text NOT NULL REFERENCES rental_locations (id),
  start_time timestamptz NOT NULL,
  duration_hours double precision NOT NULL,
  confirmed_at timestamptz NOT NULL,
  completed_at timestamptz,
  legs jsonb NOT NULL,
  quoted_cents integer NOT NULL,
  actual_hours double precision,
  billable_hours double precision,
  overtime_cents integer,
  final_cents integer
);

CREATE TABLE rental_signing_keys (
  kid text PRIMARY KEY,
  private_jwk jsonb NOT NULL,
  public_jwk jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
