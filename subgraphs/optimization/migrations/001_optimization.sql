-- The simulated AIS fleet: one clock row, the vessels (with their track parameters) and their positions.
CREATE TABLE optimization_fleet (
  id          int PRIMARY KEY CHECK (id = 1),
  seed        int NOT NULL,
  size        int NOT NULL,
  tick        int NOT NULL,
  updated_at  timestamptz NOT NULL
);

CREATE TABLE optimization_vessels (
  mmsi        text PRIMARY KEY CHECK (mmsi ~ '^[0-9]{9}$'),
  name        text NOT NULL,
  type        text NOT NULL,
  lane        int NOT NULL,
  track       jsonb NOT NULL
);

CREATE TABLE optimization_positions (
  mmsi        text NOT NULL REFERENCES optimization_vessels (mmsi),
  tick        int NOT NULL,
  latitude    double precision NOT NULL,
  longitude   double precision NOT NULL,
  sog         double precision NOT NULL,
  cog         double precision NOT NULL,
  heading     int NOT NULL,
  at          timestamptz NOT NULL,
  PRIMARY KEY (mmsi, tick)
);
CREATE INDEX optimization_positions_tick ON optimization_positions (tick);

-- Quantum runs: the request, the instance it solved, and what it measured.
CREATE TABLE optimization_runs (
  id              uuid PRIMARY KEY,
  seq             bigserial UNIQUE,
  status          text NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
  problem         text NOT NULL,
  size            int NOT NULL,
  qubits          int NOT NULL,
  depth           int NOT NULL,
  shots           int NOT NULL,
  seed            int NOT NULL,
  max_evaluations int NOT NULL,
  refine_top      int NOT NULL,
  fleet_tick      int,
  instance        jsonb NOT NULL,
  backend         text NOT NULL,
  energy          double precision,
  optimality_ratio double precision,
  refined_ratio   double precision,
  baseline_ratio  double precision,
  result          jsonb,
  error           text,
  duration_ms     int,
  created_at      timestamptz NOT NULL,
  completed_at    timestamptz
);
CREATE INDEX optimization_runs_running ON optimization_runs (status) WHERE status = 'running';
