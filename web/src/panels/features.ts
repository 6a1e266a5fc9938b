import { fill, h, time } from '../dom.js';
import type { FeaturesSnapshot } from '../schemas.js';

/** Feature store health: the dependency checks, the generated world and the newest materializations. */
export class FeaturesPanel {
  constructor(private readonly root: HTMLElement) {}

  load(snapshot: FeaturesSnapshot): void {
    const health = snapshot.featureStoreHealth;
    fill(
      this.root,
      h(
        'div',
        { class: 'health-head' },
        h('span', { class: 'pill', 'data-status': health.ok ? 'ok' : 'critical', 'data-field': 'health' }, health.ok ? 'healthy' : 'degraded'),
        h('span', { class: 'muted' }, `up ${uptime(health.uptimeSeconds)} · online store ${health.onlineStore}`),
      ),
      h(
        'div',
        { class: 'counts' },
        h('div', { class: 'count' }, h('strong', {}, health.policies.toLocaleString()), h('span', {}, 'policies')),
        h('div', { class: 'count' }, h('strong', {}, health.claims === null ? '—' : health.claims.toLocaleString()), h('span', {}, 'claims')),
        h('div', { class: 'count' }, h('strong', {}, String(health.seed)), h('span', {}, 'seed')),
      ),
      h(
        'ul',
        { class: 'checks' },
        ...health.checks.map((c) =>
          h(
            'li',
            { 'data-check': c.name, 'data-ok': String(c.ok) },
            h('span', { class: 'dot' }),
            h('strong', {}, c.name),
            h('span', { class: 'muted' }, ` ${c.detail}`),
            h('span', { class: 'check-ms' }, `${c.milliseconds.toFixed(1)} ms`),
          ),
        ),
      ),
      snapshot.materializations.length === 0
        ? h('p', { class: 'muted' }, 'Nothing materialized into the online store yet.')
        : h(
            'ul',
            { class: 'materializations' },
            ...snapshot.materializations.map((m) =>
              h(
                'li',
                {},
                h('strong', {}, `${m.rowsWritten.toLocaleString()} rows`),
                h('span', { class: 'muted' }, ` as of ${time(m.asOf)} → ${m.onlineStore}, ${time(m.materializedAt)}`),
              ),
            ),
          ),
    );
  }
}

function uptime(seconds: number): string {
  if (seconds < 120) return `${Math.round(seconds)} s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}
