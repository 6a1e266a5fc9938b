import { fill, h, label, probability, token } from '../dom.js';
import type { BondPath, BondingEvent, BondingSession, BondingSnapshot } from '../schemas.js';

const SESSIONS_SHOWN = 4;

/**
 * Bonding sessions and their paths: the overview counts, then each recent session with its state, the
 * recommended redundant pair and every path (up or down, latency, loss, capacity), live from the
 * session's stream.
 */
export class BondingPanel {
  private overview: BondingSnapshot['bondingOverview'] | null = null;
  private sessions: BondingSession[] = [];
  private frame = 0;

  constructor(private readonly root: HTMLElement) {}

  load(snapshot: BondingSnapshot): void {
    this.overview = snapshot.bondingOverview;
    const known = new Map(this.sessions.map((x) => [x.id, x]));
    // A stream event may have moved a session past this snapshot: keep the newer of the two.
    this.sessions = snapshot.bondingSessions.map((fresh) => {
      const seen = known.get(fresh.id);
      return seen && seen.tick > fresh.tick ? { ...fresh, tick: seen.tick, state: seen.state, paths: seen.paths, stateReason: seen.stateReason } : fresh;
    });
    this.schedule();
  }

  apply(event: BondingEvent): void {
    const session = this.sessions.find((x) => x.id === event.sessionId);
    if (!session || event.tick < session.tick) return;
    session.tick = event.tick;
    session.state = event.state;
    session.paths = event.paths;
    if (event.kind !== 'METRICS') session.stateReason = event.reason;
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
    const o = this.overview;
    const counts = o
      ? h(
          'div',
          { class: 'counts' },
          count('open', o.openSessions),
          count('bonded', o.bonded, 'bonded'),
          count('degraded', o.degraded, 'degraded'),
          count('down', o.down, 'down'),
          count('negotiating', o.negotiating, 'negotiating'),
        )
      : null;
    const sessions = this.sessions.slice(0, SESSIONS_SHOWN);
    fill(
      this.root,
      counts,
      sessions.length === 0 ? h('p', { class: 'muted' }, 'No bonding sessions yet (POST /bonding/api/bonding/start).') : null,
      ...sessions.map((x) => sessionView(x)),
      o ? h('p', { class: 'footnote' }, o.keySource) : null,
    );
  }
}

function count(name: string, value: number, tone = 'neutral'): HTMLElement {
  return h('div', { class: 'count', 'data-tone': tone }, h('strong', {}, String(value)), h('span', {}, name));
}

function sessionView(x: BondingSession): HTMLElement {
  const pair = x.recommendation.pair;
  const maxCapacity = Math.max(1, ...x.paths.map((p) => p.capacityMbps));
  return h(
    'div',
    { class: 'session', 'data-session': x.id, 'data-state': token(x.state) },
    h(
      'div',
      { class: 'session-head' },
      h('strong', {}, x.id),
      h('span', { class: 'pill', 'data-status': token(x.state) }, label(x.state)),
      h('span', { class: 'muted' }, `${x.userId} · tick ${x.tick}`),
    ),
    h('div', { class: 'session-reason muted' }, x.stateReason),
    pair
      ? h(
          'div',
          { class: 'session-pair' },
          'pair ',
          h('strong', {}, `${pair.a} + ${pair.b}`),
          ` · joint outage ${probability(pair.jointOutage)} · ${x.recommendation.expectedGoodputMbps.toFixed(0)} Mbps expected`,
        )
      : null,
    x.state === 'CLOSED'
      ? null
      : h('div', { class: 'paths' }, ...x.paths.map((p) => pathRow(p, maxCapacity, pair !== null && (p.id === pair.a || p.id === pair.b)))),
  );
}

function pathRow(p: BondPath, maxCapacity: number, inPair: boolean): HTMLElement {
  const bar = h('span', { class: 'capacity-bar' }, h('span', { class: 'capacity-fill', 'data-up': String(p.up) }));
  (bar.firstElementChild as HTMLElement).style.width = `${Math.max(2, (p.capacityMbps / maxCapacity) * 100).toFixed(0)}%`;
  return h(
    'div',
    { class: `path${inPair ? ' in-pair' : ''}`, 'data-path': p.id, 'data-up': String(p.up) },
    h('span', { class: 'dot' }),
    h('span', { class: 'path-id' }, p.id),
    bar,
    h('span', { class: 'path-metric' }, `${p.latencyMs.toFixed(0)} ms`),
    h('span', { class: 'path-metric' }, `${p.lossPct.toFixed(2)}% loss`),
    h('span', { class: 'path-metric' }, `${p.capacityMbps.toFixed(0)} Mbps`),
  );
}
