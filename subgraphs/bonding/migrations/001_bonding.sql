-- Bonding sessions: the state machine, the link model's whole state (paths, outages, PRNG) and the
-- four planes, in one row, so a session resumes exactly after a restart and on any instance.
CREATE TABLE bonding_sessions (
  id text PRIMARY KEY CHECK (id ~ '^BS-[0-9a-f]{12}$'),
  user_id text NOT NULL CHECK (user_id ~ '^[A-Za-z0-9_.-]{1,64}$'),
  state text NOT NULL CHECK (state IN ('negotiating', 'bonded', 'degraded', 'down', 'closed')),
  state_reason text NOT NULL,
  seed integer NOT NULL,
  tick integer NOT NULL DEFAULT 0,
  model jsonb NOT NULL,
  planes jsonb NOT NULL,
  last_key jsonb,
  -- The instance running the link model and until when (a lease); a step also needs tick = expected.
  lease_owner text,
  lease_until timestamptz,
  next_tick_at timestamptz NOT NULL,
  last_activity_at timestamptz NOT NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  closed_at timestamptz,
  CHECK ((state = 'closed') = (closed_at IS NOT NULL))
);
CREATE INDEX bonding_sessions_user ON bonding_sessions (user_id, created_at DESC);
CREATE INDEX bonding_sessions_open ON bonding_sessions (id) WHERE state <> 'closed';

-- Key generations: figures and fingerprint only; key material is never stored.
CREATE TABLE bonding_keys (
  id text PRIMARY KEY,
  session_id text NOT NULL REFERENCES bonding_sessions (id),
  status text NOT NULL CHECK (status IN ('completed', 'aborted')),
  key_id text UNIQUE,
  fingerprint text,
  bits integer NOT NULL,
  qber double precision NOT NULL,
  eavesdropper_detected boolean NOT NULL,
  figures jsonb NOT NULL,
  created_at timestamptz NOT NULL
);
CREATE INDEX bonding_keys_session ON bonding_keys (session_id, created_at DESC);
