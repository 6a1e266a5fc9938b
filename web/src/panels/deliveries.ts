import { clock, fill, h, label, minutes, s, token } from '../dom.js';
import type { Coordinates, Delivery, Leg, Place, TrackingEvent } from '../schemas.js';
import { serverNow } from '../server-time.js';

interface DeliveryView {
  id: string;
  customerName: string;
  siteId: string;
  machineIds: string[];
  status: string;
  coordinates: Coordinates;
  /** The last-arriving run's median arrival, with its q10-q90 band and where it comes from. */
  eta: string;
  etaQ10: string;
  etaQ90: string;
  etaSource: string;
  minutesRemaining: number;
  distanceRemainingKm: number;
  legs: Leg[];
}

const ACTIVE = new Set(['SCHEDULED', 'DISPATCHED', 'IN_TRANSIT']);
/** Deliveries already on site that stay listed (dimmed) below the active ones. */
const ARRIVED_SHOWN = 3;
const MAP_WIDTH = 600;

/** Whether a booking's delivery is still on its way (the dashboard follows its tracking stream). */
export function isActive(delivery: Delivery): boolean {
  return delivery.status === 'CONFIRMED' && ACTIVE.has(delivery.tracking.status);
}

/**
 * Active deliveries on a map (depots, sites, each truck run as a route with its moving marker) and as a
 * list with the tracking's ETA and q10-q90 arrival band for the last-arriving run: the prediction
 * subgraph's travel model for the road left (the same numbers as the booking's delivery forecast), or the
 * 45 km/h rule while prediction cannot answer, which the band says.
 */
export class DeliveriesPanel {
  private depots = new Map<string, Place>();
  private sites = new Map<string, Place>();
  private readonly deliveries = new Map<string, DeliveryView>();
  private readonly map: HTMLElement;
  private readonly list: HTMLUListElement;
  private readonly note: HTMLElement;
  private frame = 0;

  constructor(root: HTMLElement) {
    this.map = h('div', { class: 'map', id: 'map' });
    this.list = h('ul', { class: 'deliveries', id: 'deliveries' });
    this.note = h('p', { class: 'muted' }, 'No deliveries on the way.');
    fill(root, this.map, this.note, this.list);
  }

  places(depots: readonly Place[], sites: readonly Place[]): void {
    this.depots = new Map(depots.map((d) => [d.id, d]));
    this.sites = new Map(sites.map((l) => [l.id, l]));
    this.schedule();
  }

  upsert(delivery: Delivery): void {
    if (delivery.status !== 'CONFIRMED' || delivery.tracking.status === 'COMPLETED') {
      this.remove(delivery.id);
      return;
    }
    this.deliveries.set(delivery.id, {
      id: delivery.id,
      customerName: delivery.customerName,
      siteId: delivery.location.id,
      machineIds: delivery.machines.map((m) => m.id),
      status: delivery.tracking.status,
      coordinates: delivery.tracking.coordinates,
      eta: delivery.tracking.eta,
      etaQ10: delivery.tracking.etaQ10,
      etaQ90: delivery.tracking.etaQ90,
      etaSource: delivery.tracking.etaSource,
      minutesRemaining: delivery.tracking.minutesRemaining,
      distanceRemainingKm: delivery.tracking.distanceRemainingKm,
      legs: delivery.tracking.legs,
    });
    this.schedule();
  }

  track(event: TrackingEvent): void {
    const view = this.deliveries.get(event.bookingId);
    if (!view) return;
    if (event.status === 'COMPLETED') {
      this.remove(event.bookingId);
      return;
    }
    Object.assign(view, {
      status: event.status,
      coordinates: event.coordinates,
      eta: event.eta,
      etaQ10: event.etaQ10,
      etaQ90: event.etaQ90,
      etaSource: event.etaSource,
      minutesRemaining: event.minutesRemaining,
      distanceRemainingKm: event.distanceRemainingKm,
      legs: event.booking.tracking.legs,
    });
    this.schedule();
  }

  has(bookingId: string): boolean {
    return this.deliveries.has(bookingId);
  }

  remove(bookingId: string): void {
    if (this.deliveries.delete(bookingId)) this.schedule();
  }

  /** Renders at the next frame (many events in one frame draw once). */
  schedule(): void {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.render();
    });
  }

  private shown(): DeliveryView[] {
    const all = [...this.deliveries.values()];
    const active = all.filter((d) => ACTIVE.has(d.status)).sort((a, b) => Date.parse(a.eta) - Date.parse(b.eta));
    const arrived = all
      .filter((d) => !ACTIVE.has(d.status))
      .sort((a, b) => Date.parse(b.eta) - Date.parse(a.eta))
      .slice(0, ARRIVED_SHOWN);
    return [...active, ...arrived];
  }

  private render(): void {
    const shown = this.shown();
    this.note.hidden = shown.some((d) => ACTIVE.has(d.status));
    fill(this.map, this.mapSvg(shown));
    fill(this.list, ...shown.map((d) => this.item(d)));
  }

  private mapSvg(shown: readonly DeliveryView[]): SVGSVGElement {
    const places = [...this.depots.values(), ...this.sites.values()].map((p) => p.coordinates);
    if (places.length === 0) return s('svg', { class: 'map-svg', viewBox: `0 0 ${MAP_WIDTH} 300` });
    const map = projection(places);
    const { routes, markers } = this.runs(shown, map);
    return s(
      'svg',
      { class: 'map-svg', viewBox: `0 0 ${MAP_WIDTH} ${map.height}`, role: 'img', 'aria-label': 'Deliveries between depots and sites' },
      s('rect', { class: 'map-bg', x: 0, y: 0, width: MAP_WIDTH, height: map.height }),
      ...graticule(map),
      ...routes,
      ...this.siteMarks(map),
      ...this.depotMarks(map),
      ...markers,
    );
  }

  /** Each run of the deliveries shown as a route from its depot to the site, with its truck's marker on it. */
  private runs(shown: readonly DeliveryView[], { px, py }: Projection): { routes: SVGElement[]; markers: SVGElement[] } {
    const routes: SVGElement[] = [];
    const markers: SVGElement[] = [];
    for (const d of shown) {
      const site = this.sites.get(d.siteId);
      if (!site) continue;
      for (const leg of d.legs) {
        const depot = this.depots.get(leg.depot.id);
        if (!depot) continue;
        routes.push(
          s('line', {
            class: 'route',
            'data-status': token(leg.status),
            x1: px(depot.coordinates),
            y1: py(depot.coordinates),
            x2: px(site.coordinates),
            y2: py(site.coordinates),
          }),
        );
        markers.push(
          s(
            'g',
            {
              class: 'marker',
              'data-booking': d.id,
              'data-depot': leg.depot.id,
              'data-status': token(leg.status),
              transform: `translate(${px(leg.coordinates)},${py(leg.coordinates)})`,
            },
            s('title', {}, `${d.id} from ${leg.depot.id}: ${label(leg.status)}`),
            s('circle', { class: 'marker-halo', r: 11 }),
            s('circle', { class: 'marker-dot', r: 6 }),
          ),
        );
      }
      // A truck still at its depot would cover the depot's name.
      if (d.status !== 'SCHEDULED')
        markers.push(s('text', { class: 'marker-label', x: Number(px(d.coordinates)) + 10, y: Number(py(d.coordinates)) - 10 }, d.id));
    }
    return { routes, markers };
  }

  private depotMarks({ px, py }: Projection): SVGElement[] {
    return [...this.depots.values()].map((depot) =>
      s(
        'g',
        { class: 'depot', transform: `translate(${px(depot.coordinates)},${py(depot.coordinates)})` },
        s('title', {}, depot.name),
        s('rect', { x: -6, y: -6, width: 12, height: 12, rx: 2 }),
        s('text', { x: 10, y: 4 }, depot.id.replace('DEP-', '')),
      ),
    );
  }

  private siteMarks({ px, py }: Projection): SVGElement[] {
    return [...this.sites.values()].map((site) =>
      s(
        'g',
        { class: 'site', 'data-site': site.id, transform: `translate(${px(site.coordinates)},${py(site.coordinates)})` },
        s('title', {}, site.name),
        s('circle', { r: 4.5 }),
        s('text', { x: 8, y: 14 }, shortName(site.name)),
      ),
    );
  }

  private item(d: DeliveryView): HTMLLIElement {
    const site = this.sites.get(d.siteId);
    const depots = [...new Set(d.legs.map((l) => l.depot.id))].join(' + ');
    const active = ACTIVE.has(d.status);
    const model = d.etaSource === 'MODEL';
    return h(
      'li',
      { class: `delivery${active ? '' : ' arrived'}`, 'data-booking': d.id, 'data-status': token(d.status) },
      h(
        'div',
        { class: 'delivery-head' },
        h('strong', {}, d.id),
        h('span', { class: 'pill', 'data-status': token(d.status) }, label(d.status)),
        h('span', { class: 'muted' }, d.customerName),
      ),
      h('div', { class: 'delivery-route' }, `${depots} → ${site?.name ?? d.siteId}`, h('span', { class: 'muted' }, ` · ${d.machineIds.join(', ')}`)),
      h(
        'div',
        { class: 'delivery-eta' },
        h('span', { 'data-field': 'eta' }, 'ETA ', h('strong', {}, clock(d.eta))),
        active ? h('span', { 'data-field': 'remaining' }, `${minutes(d.minutesRemaining)} · ${d.distanceRemainingKm.toFixed(1)} km`) : h('span', {}, 'on site'),
      ),
      active
        ? model
          ? h(
              'div',
              { class: 'band-text', 'data-field': 'band', 'data-source': 'model', 'data-q10': d.etaQ10, 'data-q90': d.etaQ90 },
              'q10–q90 ',
              h('strong', {}, `${clock(d.etaQ10)}–${clock(d.etaQ90)}`),
              ' · travel model',
            )
          : h('div', { class: 'band-text muted', 'data-field': 'band', 'data-source': 'rule' }, 'no band: 45 km/h rule while prediction cannot answer')
        : null,
      active && model ? bandSvg(d) : null,
    );
  }
}

/** The map's frame around the places it shows, and where a point falls on it (SVG user units, as text). */
interface Projection {
  minLat: number;
  maxLat: number;
  minLon: number;
  maxLon: number;
  height: number;
  px: (c: Coordinates) => string;
  py: (c: Coordinates) => string;
}

function projection(places: readonly Coordinates[]): Projection {
  const lats = places.map((p) => p.latitude);
  const lons = places.map((p) => p.longitude);
  // Room for the labels, which sit right of and below their places.
  const [minLat, maxLat] = [Math.min(...lats) - 0.09, Math.max(...lats) + 0.06];
  const [minLon, maxLon] = [Math.min(...lons) - 0.12, Math.max(...lons) + 0.42];
  // Equirectangular, with longitude shortened by cos(latitude): true shape at this scale.
  const kx = Math.cos((((minLat + maxLat) / 2) * Math.PI) / 180);
  const scale = MAP_WIDTH / ((maxLon - minLon) * kx);
  return {
    minLat,
    maxLat,
    minLon,
    maxLon,
    height: Math.round((maxLat - minLat) * scale),
    px: (c) => ((c.longitude - minLon) * kx * scale).toFixed(1),
    py: (c) => ((maxLat - c.latitude) * scale).toFixed(1),
  };
}

/** Lines every quarter degree, the parallels labelled. */
function graticule({ minLat, maxLat, minLon, maxLon, height, px, py }: Projection): SVGElement[] {
  const lines: SVGElement[] = [];
  for (let lat = Math.ceil(minLat * 4) / 4; lat <= maxLat; lat += 0.25) {
    const y = py({ latitude: lat, longitude: minLon });
    lines.push(s('line', { class: 'graticule', x1: 0, x2: MAP_WIDTH, y1: y, y2: y }));
    lines.push(s('text', { class: 'graticule-label', x: 4, y: Number(y) - 3 }, `${lat.toFixed(2)}°N`));
  }
  for (let lon = Math.ceil(minLon * 4) / 4; lon <= maxLon; lon += 0.25) {
    const x = px({ latitude: minLat, longitude: lon });
    lines.push(s('line', { class: 'graticule', x1: x, x2: x, y1: 0, y2: height }));
  }
  return lines;
}

/** "Maasvlakte 2 terminal extension" -> "Maasvlakte 2". */
function shortName(name: string): string {
  return name.split(' ').slice(0, 2).join(' ');
}

/** A timeline of the last-arriving run: departure, the q10-q90 arrival band with its median (the ETA) and now. */
function bandSvg(d: DeliveryView): SVGSVGElement {
  const last = d.legs.reduce<Leg | null>((a, l) => (a === null || Date.parse(l.eta) > Date.parse(a.eta) ? l : a), null);
  const [q10, eta, q90] = [Date.parse(d.etaQ10), Date.parse(d.eta), Date.parse(d.etaQ90)];
  const depart = last ? Date.parse(last.departAt) : q10;
  const from = Math.min(depart, q10);
  const to = Math.max(q90, eta);
  const span = Math.max(to - from, 60_000) * 1.08;
  const W = 300;
  const x = (t: number) => (8 + ((t - from) / span) * (W - 16)).toFixed(1);
  const now = serverNow();
  return s(
    'svg',
    { class: 'band', viewBox: `0 0 ${W} 30`, role: 'img', 'aria-label': `arrival between ${clock(d.etaQ10)} and ${clock(d.etaQ90)}` },
    s('line', { class: 'band-axis', x1: x(depart), x2: W - 8, y1: 12, y2: 12 }),
    s('rect', { class: 'band-range', x: x(q10), y: 5, width: Math.max(2, Number(x(q90)) - Number(x(q10))), height: 14, rx: 3 }),
    s('circle', { class: 'band-depart', cx: x(depart), cy: 12, r: 3 }),
    s('path', { class: 'band-eta', d: `M${x(eta)},6 l5,6 l-5,6 l-5,-6 Z` }),
    now >= from && now <= from + span ? s('line', { class: 'band-now', x1: x(now), x2: x(now), y1: 0, y2: 24 }) : null,
    s('text', { class: 'band-label', x: x(depart), y: 29, 'text-anchor': 'start' }, `dep ${clock(depart)}`),
    s('text', { class: 'band-label', x: x(eta), y: 29, 'text-anchor': 'middle' }, `eta ${clock(d.eta)}`),
  );
}
