import { clock, fill, fixed, h, percent, s, time } from '../dom.js';
import type { FleetEvent, FleetSummary } from '../schemas.js';
import { serverNow } from '../server-time.js';

interface Point {
  t: number;
  utilization: number;
  surge: number;
}

const WIDTH = 560;
/** The drawing's height follows its box's shape (the panel stretches with the row), within these bounds. */
const MIN_HEIGHT = 180;
const MAX_HEIGHT = 420;
const PAD = { left: 40, right: 40, top: 12, bottom: 24 };
/** The surge multiplier's range: 1.0 up to 60% utilization, 2.5 at 100% (docs/rental.md, Pricing). */
const SURGE_MIN = 1;
const SURGE_MAX = 2.5;
/** The longest span shown; a shorter history is shown over its own span (at least a minute), so its steps stay readable. */
const WINDOW_MS = 15 * 60_000;
const MIN_SPAN_MS = 60_000;
const KEEP = 2000;

/**
 * Fleet utilization and the surge multiplier over time (the server's clock, from each event's `at`), as step
 * lines: each value holds until the next fleetSummaryChanged event. The span is the last 15 minutes, or the
 * history since the page opened when that is shorter. Above the chart, the current counts.
 */
export class ChartPanel {
  private points: Point[] = [];
  private current: FleetSummary | null = null;
  private readonly numbers: HTMLElement;
  private readonly chart: HTMLElement;
  private readonly caption: HTMLElement;

  constructor(root: HTMLElement, caption: HTMLElement) {
    this.numbers = h('div', { class: 'numbers' });
    this.chart = h('div', { class: 'chart' });
    this.caption = caption;
    fill(root, this.numbers, this.chart);
    new ResizeObserver(() => this.render()).observe(this.chart);
  }

  /** The snapshot's summary, as of now. */
  load(summary: FleetSummary): void {
    this.current = summary;
    this.points.push({ t: serverNow(), utilization: summary.utilization, surge: summary.surgeMultiplier });
    this.render();
  }

  apply(event: FleetEvent): void {
    this.current = event;
    this.points.push({ t: Date.parse(event.at), utilization: event.utilization, surge: event.surgeMultiplier });
    this.points.sort((a, b) => a.t - b.t);
    if (this.points.length > KEEP) this.points = this.points.slice(-KEEP);
    this.render();
  }

  render(): void {
    const c = this.current;
    if (c) {
      fill(
        this.numbers,
        stat('utilization', percent(c.utilization), 'utilization'),
        stat('surge', `×${fixed(c.surgeMultiplier, 3)}`, 'surge'),
        stat('available', String(c.available), 'available'),
        stat('reserved', String(c.reserved), 'reserved'),
        stat('in use', String(c.inUse), 'in_use'),
      );
    }
    fill(this.chart, this.svg());
  }

  private svg(): SVGSVGElement {
    const box = this.chart.getBoundingClientRect();
    const HEIGHT = box.width > 0 ? Math.round(Math.min(MAX_HEIGHT, Math.max(MIN_HEIGHT, (WIDTH * box.height) / box.width))) : MIN_HEIGHT;
    const now = serverNow();
    const recent = this.points.filter((p) => p.t > now - WINDOW_MS);
    const earliest = recent.length > 0 ? Math.min(...recent.map((p) => p.t)) : now - WINDOW_MS;
    const span = Math.min(WINDOW_MS, Math.max(MIN_SPAN_MS, (now - earliest) * 1.1));
    const from = now - span;
    fill(this.caption, span >= 120_000 ? `last ${Math.round(span / 60_000)} min` : `last ${Math.round(span / 1000)} s`);
    const plotW = WIDTH - PAD.left - PAD.right;
    const plotH = HEIGHT - PAD.top - PAD.bottom;
    const x = (t: number) => PAD.left + ((Math.max(from, Math.min(now, t)) - from) / span) * plotW;
    const yU = (u: number) => PAD.top + (1 - u) * plotH;
    const yS = (m: number) => PAD.top + (1 - (m - SURGE_MIN) / (SURGE_MAX - SURGE_MIN)) * plotH;

    // The value in force at the window's start, then every change inside it, held until now.
    const before = this.points.filter((p) => p.t <= from).at(-1);
    const inside = this.points.filter((p) => p.t > from);
    const series = before ? [{ ...before, t: from }, ...inside] : inside;
    const step = (value: (p: Point) => number) => {
      if (series.length === 0) return '';
      let d = `M${x(series[0]!.t).toFixed(1)},${value(series[0]!).toFixed(1)}`;
      for (let i = 1; i < series.length; i++) d += ` H${x(series[i]!.t).toFixed(1)} V${value(series[i]!).toFixed(1)}`;
      return `${d} H${x(now).toFixed(1)}`;
    };
    const utilLine = step((p) => yU(p.utilization));
    const area = utilLine ? `${utilLine} V${yU(0).toFixed(1)} H${x(series[0]!.t).toFixed(1)} Z` : '';

    const grid = [0, 0.25, 0.5, 0.75, 1].map((u) => s('line', { class: 'grid-line', x1: PAD.left, x2: WIDTH - PAD.right, y1: yU(u), y2: yU(u) }));
    const leftTicks = [0, 0.5, 1].map((u) => s('text', { class: 'axis util', x: PAD.left - 6, y: yU(u) + 4, 'text-anchor': 'end' }, percent(u, 0)));
    const rightTicks = [1, 1.75, 2.5].map((m) => s('text', { class: 'axis surge', x: WIDTH - PAD.right + 6, y: yS(m) + 4 }, `×${m}`));
    const timeTicks = [0, 1, 2, 3].map((i) => {
      const t = now - (span * i) / 3;
      const label = i === 0 ? 'now' : span < 5 * 60_000 ? time(t) : clock(t);
      return s('text', { class: 'axis', x: x(t), y: HEIGHT - 6, 'text-anchor': i === 0 ? 'end' : i === 3 ? 'start' : 'middle' }, label);
    });
    const marks = inside.map((p) => s('circle', { class: 'surge-point', cx: x(p.t), cy: yS(p.surge), r: 2.5 }));
    return s(
      'svg',
      { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, class: 'chart-svg', role: 'img', 'aria-label': 'Utilization and surge multiplier over time' },
      ...grid,
      area ? s('path', { class: 'util-area', d: area }) : null,
      utilLine ? s('path', { class: 'util-line', d: utilLine }) : null,
      series.length > 0 ? s('path', { class: 'surge-line', d: step((p) => yS(p.surge)) }) : null,
      ...marks,
      ...leftTicks,
      ...rightTicks,
      ...timeTicks,
    );
  }
}

function stat(name: string, value: string, kind: string): HTMLElement {
  return h('div', { class: `stat ${kind}`, 'data-stat': kind }, h('span', { class: 'stat-value' }, value), h('span', { class: 'stat-name' }, name));
}
