-- The demo fleet: three depots in the Randstad / Brabant region, 15 machines, six delivery sites.
INSERT INTO rental_depots (id, name, latitude, longitude) VALUES
  ('DEP-RTM', 'Rotterdam Waalhaven depot', 51.8932, 4.4262),
  ('DEP-UTR', 'Utrecht Lage Weide depot', 52.1046, 5.0629),
  ('DEP-EIN', 'Eindhoven Acht depot', 51.4851, 5.4172);

INSERT INTO rental_machines (id, name, category, hourly_rate_cents, depot_id) VALUES
  ('EQ-001', 'CAT 320 crawler excavator', 'EXCAVATOR', 9500, 'DEP-RTM'),
  ('EQ-002', 'Komatsu PC210 crawler excavator', 'EXCAVATOR', 9200, 'DEP-UTR'),
  ('EQ-003', 'Kubota KX057 mini excavator', 'MINI_EXCAVATOR', 4200, 'DEP-RTM'),
  ('EQ-004', 'Volvo ECR25 mini excavator', 'MINI_EXCAVATOR', 3800, 'DEP-EIN'),
  ('EQ-005', 'Volvo L90H wheel loader', 'WHEEL_LOADER', 8500, 'DEP-UTR'),
  ('EQ-006', 'JCB 540-180 telehandler', 'TELEHANDLER', 6500, 'DEP-RTM'),
  ('EQ-007', 'Manitou MT 1840 telehandler', 'TELEHANDLER', 6800, 'DEP-EIN'),
  ('EQ-008', 'Liebherr LTM 1060 mobile crane', 'CRANE', 18500, 'DEP-RTM'),
  ('EQ-009', 'Tadano AC 4.080 all-terrain crane', 'CRANE', 21000, 'DEP-UTR'),
  ('EQ-010', 'Genie Z-60/37 articulating boom lift', 'BOOM_LIFT', 5200, 'DEP-UTR'),
  ('EQ-011', 'JLG 860SJ telescopic boom lift', 'BOOM_LIFT', 5900, 'DEP-EIN'),
  ('EQ-012', 'Skyjack SJ4632 scissor lift', 'SCISSOR_LIFT', 2900, 'DEP-RTM'),
  ('EQ-013', 'Thwaites 9t site dumper', 'DUMPER', 3600, 'DEP-EIN'),
  ('EQ-014', 'Bomag BW 213 soil compactor', 'ROLLER', 5600, 'DEP-UTR'),
  ('EQ-015', 'Hamm HD 12 tandem roller', 'ROLLER', 3900, 'DEP-EIN');

INSERT INTO rental_locations (id, name, latitude, longitude) VALUES
  ('LOC-001', 'Rotterdam Kop van Zuid tower site', 51.9066, 4.4886),
  ('LOC-002', 'Maasvlakte 2 terminal extension', 51.9625, 4.0135),
  ('LOC-003', 'Amsterdam Zuidas station works', 52.3389, 4.8722),
  ('LOC-004', 'Utrecht Merwede district', 52.0786, 5.1045),
  ('LOC-005', 'Den Haag Binckhorst housing', 52.0700, 4.3400),
  ('LOC-006', 'Eindhoven Brainport Industries Campus', 51.4710, 5.3978);
