// Alert Logs: engine, user and rule alerts from rill_alerts, with badges,
// filters, expandable detail and Clear (hides entries in this browser only).
import {h, setChildren} from './dom.js';
import {FILTERS, SEVERITY_BADGE, visibleAlerts} from './alerts.js';
import {formatTime} from './format.js';
import {loadClearedAt, saveClearedAt} from './prefs.js';

const MAX_SHOWN = 200;   // newest first; the DOM holds no more than this

export class AlertsView {
  constructor(root, app) {
    this.root = root;
    this.app = app;
    this.filter = 'All';
    this.build();
  }

  build() {
    this.buttons = FILTERS.map((f) => h('button.filter', {text: f, dataset: {filter: f},
      'aria-pressed': f === this.filter ? 'true' : 'false', onclick: () => this.setFilter(f)}));
    this.list = h('ul.alert-list#alert-list');
    // One listener for every entry (no per-entry closures): expand the detail.
    const toggle = (e) => {
      const item = e.target.closest('li.alert');
      const detail = item && item.querySelector('pre.alert-detail');
      if (detail) detail.hidden = !detail.hidden;
    };
    this.list.addEventListener('click', toggle);
    this.list.addEventListener('keydown', (e) => {
      if ((e.key === 'Enter' || e.key === ' ') && e.target.matches('li.alert')) { e.preventDefault(); toggle(e); }
    });
    this.count = h('span.status#alert-count');
    this.root.append(h('section.panel', {},
      h('h2', {text: 'Alert Logs'}),
      h('div.row', {}, h('div.filters', {role: 'group', 'aria-label': 'Filters'}, this.buttons),
        h('button#alerts-clear', {text: 'Clear', onclick: () => this.clear()}), this.count),
      this.list));
  }

  setFilter(f) {
    this.filter = f;
    for (const b of this.buttons) b.setAttribute('aria-pressed', b.dataset.filter === f ? 'true' : 'false');
    this.render(this.app.active());
  }

  clear() {
    const s = this.app.active();
    if (!s) return;
    const latest = s.alerts.items.reduce((m, a) => Math.max(m, a.ts), 0);
    saveClearedAt(s.conn.baseUrl, latest);
    this.render(s);
  }

  render(state) {
    if (!state) return;
    // Redraw only when the list, the filter, the clear mark or the server changed.
    const key = [state.conn.baseUrl, state.alertsVersion, this.filter, loadClearedAt(state.conn.baseUrl)].join('|');
    if (key === this.renderedKey) return;
    this.renderedKey = key;
    const all = visibleAlerts(state.alerts.items, this.filter, loadClearedAt(state.conn.baseUrl));
    const shown = all.slice(0, MAX_SHOWN);
    this.count.textContent = all.length > shown.length ? `newest ${shown.length} of ${all.length} shown` : `${shown.length} shown`;
    setChildren(this.list, shown.map((a) => {
      const detail = a.detail ? h('pre.alert-detail', {text: a.detail, hidden: true}) : null;
      const item = h(`li.alert.sev-${a.severity}`, {dataset: {severity: a.severity, kind: a.kind}, tabindex: '0'},
        h(`span.badge.sev.badge-${a.severity}`, {text: SEVERITY_BADGE[a.severity], 'aria-label': `Severity ${a.severity}`}),
        h(`span.badge.src.src-${a.kind.toLowerCase()}`, {text: a.kind}),
        h('span.alert-time', {text: formatTime(a.ts)}),
        h('span.alert-source', {text: a.source}),
        h('span.alert-message', {text: a.message}),
        detail ? h('span.expand', {text: '▸ detail'}) : null,
        detail);
      return item;
    }));
  }

  /** The view was left: drop its entries from the DOM (redrawn on return). */
  release() {
    setChildren(this.list);
    this.renderedKey = null;
  }
}
