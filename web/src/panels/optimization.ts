import { clock, fill, fixed, h, label, s, token } from '../dom.js';
import type { OptimizationSnapshot, Run, SpeedZone, Vessel, VesselEvent } from '../schemas.js';

const RUNS_SHOWN = 5;
const MAP_WIDTH = 320;
const MAP_HEIGHT = 170;

/**
 * Optimization runs and the fleet: the simulator's limits and run counts, the newest quantum runs with
 * their optimality ratios (QAOA, refined, random-start baseline), and the simulated AIS fleet on a small
 * map, moved by every vesselPositionsChanged tick.
 */
export class OptimizationPanel {
  private status: OptimizationSnapshot['optimizationStatus'] = null;
  private runs: Run[] = [];
  private totalRuns = 0;
  private vessels = new Map<string, Vessel>();
  private zones: SpeedZone[] = [];
  private tick: number | null = null;
  private frame = 0;

  constructor(private readonly root: HTMLElement) {}

  load(snapshot: OptimizationSnapshot): void {
    this.status = snapshot.optimizationStatus;
    if (snapshot.quantumRuns) {
      this.runs = snapshot.quantumRuns.edges.map((e) => e.node);
      this.totalRuns = snapshot.quantumRuns.totalCount;
    }
    this.schedule();
  }

  fleet(tick: number, vessels: readonly Vessel[], zones: readonly SpeedZone[]): void {
    this.tick = tick;
    this.vessels = new Map(vessels.map((v) => [v.mmsi, v]));
    this.zones = [...zones];
    this.schedule();
  }

  positions(event: VesselEvent): void {
    this.tick = event.tick;
    for (const v of event.vessels) this.vessels.set(v.mmsi, v);
    this.schedule();
  }

  /** A run that ended (quantumRunCompleted). */
  run(run: Run): void {
    const i = this.runs.findIndex((r) => r.id === run.id);
    if (i >= 0) this.runs[i] = run;
    else {
      this.runs.unshift(run);
      this.totalRuns++;
    }
    this.schedule();
  }

  private schedule(): void {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.render();
    });
  }

  private render(): void {
    const st = this.status;
    fill(
      this.root,
      st
        ? h(
            'div',
            { class: 'counts' },
            h('div', { class: 'count' }, h('strong', {}, String(st.runs.total)), h('span', {}, 'runs')),
            h('div', { class: 'count', 'data-tone': 'reserved' }, h('strong', {}, String(st.runs.running)), h('span', {}, 'running')),
            h('div', { class: 'count', 'data-tone': 'bonded' }, h('strong', {}, String(st.runs.completed)), h('span', {}, 'completed')),
            h('div', { class: 'count', 'data-tone': 'down' }, h('strong', {}, String(st.runs.failed)), h('span', {}, 'failed')),
            h('div', { class: 'count' }, h('strong', {}, String(st.backend.maxQubits)), h('span', {}, 'max qubits')),
          )
        : null,
      this.runs.length === 0
        ? h('p', { class: 'muted' }, 'No quantum runs yet.')
        : h(
            'table',
            { class: 'runs' },
            h(
              'thead',
              {},
              h(
                'tr',
                {},
                h('th', {}, 'run'),
                h('th', {}, 'problem'),
                h('th', {}, 'qubits · p'),
                h('th', {}, 'status'),
                h('th', { title: 'optimality ratio: QAOA / refined / random-start baseline' }, 'ratio q / ref / base'),
              ),
            ),
            h('tbody', {}, ...this.runs.slice(0, RUNS_SHOWN).map(runRow)),
          ),
      h(
        'div',
        { class: 'vessel-map-wrap' },
        this.vesselMap(),
        h(
          'div',
          { class: 'vessel-caption muted' },
          `${this.vessels.size} vessels${this.tick === null ? '' : ` · tick ${this.tick}`}${st ? ` · every ${(st.fleet.tickIntervalMs / 1000).toFixed(0)} s` : ''}`,
          st ? h('br') : null,
          st ? `${st.backend.name} (simulated, no quantum hardware)` : null,
        ),
      ),
    );
  }

  private vesselMap(): SVGSVGElement {
    const points = [...this.vessels.values()].map((v) => v.position);
    // Each speed zone whole: its centre +- its radius.
    for (const z of this.zones) {
      const dLat = z.radiusMeters / 111_320;
      const dLon = dLat / Math.cos((z.center.latitude * Math.PI) / 180);
      points.push(
        { latitude: z.center.latitude - dLat, longitude: z.center.longitude - dLon },
        { latitude: z.center.latitude + dLat, longitude: z.center.longitude + dLon },
      );
    }
    if (points.length === 0) return s('svg', { class: 'vessel-map', viewBox: `0 0 ${MAP_WIDTH} ${MAP_HEIGHT}` });
    const lats = points.map((p) => p.latitude);
    const lons = points.map((p) => p.longitude);
    const [minLat, maxLat] = [Math.min(...lats), Math.max(...lats)];
    const [minLon, maxLon] = [Math.min(...lons), Math.max(...lons)];
    const kx = Math.cos((((minLat + maxLat) / 2) * Math.PI) / 180);
    const pad = 10;
    const scale = Math.min((MAP_WIDTH - 2 * pad) / Math.max(1e-6, (maxLon - minLon) * kx), (MAP_HEIGHT - 2 * pad) / Math.max(1e-6, maxLat - minLat));
    const offX = (MAP_WIDTH - (maxLon - minLon) * kx * scale) / 2;
    const offY = (MAP_HEIGHT - (maxLat - minLat) * scale) / 2;
    const px = (lon: number) => offX + (lon - minLon) * kx * scale;
    const py = (lat: number) => offY + (maxLat - lat) * scale;
    // Metres per degree of latitude, for the zones' radii.
    const metresToPx = (m: number) => (m / 111_320) * scale;
    return s(
      'svg',
      { class: 'vessel-map', viewBox: `0 0 ${MAP_WIDTH} ${MAP_HEIGHT}`, role: 'img', 'aria-label': 'Simulated AIS fleet' },
      s('rect', { class: 'map-bg sea', x: 0, y: 0, width: MAP_WIDTH, height: MAP_HEIGHT }),
      ...this.zones.map((z) =>
        s(
          'circle',
          { class: 'zone', cx: px(z.center.longitude), cy: py(z.center.latitude), r: Math.max(3, metresToPx(z.radiusMeters)) },
          s('title', {}, `${z.name}: ${z.limitKnots} kn`),
        ),
      ),
      ...[...this.vessels.values()].map((v) =>
        s(
          'circle',
          {
            class: 'vessel',
            'data-type': token(v.type),
            'data-mmsi': v.mmsi,
            cx: px(v.position.longitude).toFixed(1),
            cy: py(v.position.latitude).toFixed(1),
            r: 3.2,
          },
          s('title', {}, `${v.name} (${label(v.type)}) ${v.speedOverGround.toFixed(1)} kn`),
        ),
      ),
    );
  }
}

function runRow(run: Run): HTMLTableRowElement {
  const r = run.result;
  return h(
    'tr',
    { 'data-run': run.id, 'data-status': token(run.status) },
    h('td', { title: run.id }, run.id.slice(0, 8)),
    h('td', {}, label(run.problem), h('span', { class: 'muted' }, ` n=${run.size}`)),
    h('td', {}, `${run.qubits} · ${run.depth}`),
    h('td', {}, h('span', { class: 'pill', 'data-status': token(run.status) }, label(run.status)), h('span', { class: 'muted' }, ` ${clock(run.createdAt)}`)),
    h('td', { class: 'ratios' }, r ? `${fixed(r.optimalityRatio, 3)} / ${fixed(r.refined.ratio, 3)} / ${fixed(r.baseline.ratio, 3)}` : '—'),
  );
}
