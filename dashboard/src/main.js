// The dashboard page: server tabs, navigation, control bar, and the render loop.
import {h, $, setChildren} from './dom.js';
import {ServerConnection, ApiError, normalizeAddress} from './api.js';
import {ServerState} from './state.js';
import {TIME_RANGES} from './buffers.js';
import {loadPrefs, savePrefs, loadToken, saveToken} from './prefs.js';
import {SoundPlayer} from './sound.js';
import {showToast} from './toast.js';
import {registry as chartRegistry, pointsForWidth} from './charts.js';
import {ConsoleView} from './view_console.js';
import {QueriesView} from './view_queries.js';
import {RulesView} from './view_rules.js';
import {AlertsView} from './view_alerts.js';
import {PipelineView} from './view_pipeline.js';
import {ClusterView} from './view_cluster.js';

const VIEWS = [
  {id: 'console', label: 'Metrics Console'},
  {id: 'pipeline', label: 'Pipeline'},
  {id: 'cluster', label: 'Cluster'},
  {id: 'queries', label: 'Custom Queries'},
  {id: 'rules', label: 'Alert Rules & Settings'},
  {id: 'alerts', label: 'Alert Logs'},
];
const RENDER_INTERVAL_MS = 1000;
const TABLES_REFRESH_MS = 5000;

class App {
  constructor() {
    this.prefs = loadPrefs();
    this.sound = new SoundPlayer(this.prefs.sound);
    this.servers = [];          // [{id, baseUrl, conn, state, tab}]
    this.activeId = null;
    this.view = 'console';
    this.paused = false;
    this.dirty = true;
    this.nextId = 1;
  }

  /** History points to load: about twice the widest chart's pixel width (server-side down-sampling). */
  historyPoints() {
    let widest = 0;
    for (const c of chartRegistry.values()) if (c.u && c.u.width > widest) widest = c.u.width;
    // Charts created while hidden report a default width: the page's width bounds it too.
    return pointsForWidth(Math.max(widest, document.documentElement.clientWidth - 80));
  }

  active() { return this.servers.find((s) => s.id === this.activeId)?.state || null; }
  savePrefs() {
    this.prefs.servers = this.servers.slice(1).map((s) => ({baseUrl: s.baseUrl}));
    savePrefs(this.prefs);
  }

  start() {
    this.buildShell();
    const own = location.origin;
    const params = new URLSearchParams(location.search);
    const urlToken = params.get('token');
    if (urlToken !== null) {
      saveToken(own, urlToken);
      params.delete('token');
      const rest = params.toString();
      history.replaceState(null, '', location.pathname + (rest ? '?' + rest : '') + location.hash);
    }
    this.tryConnect(own, loadToken(own), {primary: true});
    document.addEventListener('visibilitychange', () => this.onVisibility());
    setInterval(() => this.tick(), RENDER_INTERVAL_MS);
    setInterval(() => { if (!this.paused && !document.hidden) this.active()?.refreshTables().catch(() => {}); }, TABLES_REFRESH_MS);
  }

  buildShell() {
    const root = $('#app');
    this.connectError = h('div.connect-error#connect-error', {role: 'alert'});
    this.connectAddress = h('input#connect-address', {value: location.origin, 'aria-label': 'Server address'});
    this.connectToken = h('input#connect-token', {type: 'password', placeholder: 'token', 'aria-label': 'Token', autocomplete: 'off'});
    const connectBtn = h('button.primary#connect-button', {text: 'Connect Console', type: 'submit'});
    this.connectScreen = h('form.connect#connect-screen', {hidden: true},
      h('h1', {}, h('span.logo', {text: '◆'}), ' Rill'),
      h('p', {text: 'Enter the address and token the server printed at start.'}),
      h('label.field', {}, h('span', {text: 'Server'}), this.connectAddress),
      h('label.field', {}, h('span', {text: 'Token'}), this.connectToken),
      connectBtn, this.connectError);
    this.connectScreen.addEventListener('submit', (e) => {
      e.preventDefault();
      let base;
      try { base = normalizeAddress(this.connectAddress.value, location.protocol); } catch (err) { this.connectError.textContent = err.message; return; }
      this.tryConnect(base, this.connectToken.value.trim(), {primary: this.servers.length === 0});
    });
    // The accessible name stays the view's name; the unseen count describes it.
    this.navButtons = VIEWS.map((v) => h(`button.nav#nav-${v.id}`, {text: v.label, dataset: {view: v.id}, 'aria-label': v.label,
      'aria-current': v.id === this.view ? 'page' : 'false', onclick: () => this.show(v.id)}));
    this.alertBadge = h('span.unseen#unseen-count', {hidden: true});
    const alertsNav = this.navButtons.find((b) => b.dataset.view === 'alerts');
    alertsNav.append(this.alertBadge);
    alertsNav.setAttribute('aria-describedby', 'unseen-count');
    this.tabs = h('div.tabs#server-tabs', {role: 'tablist'});
    this.addForm = h('form.add-server#add-server', {hidden: true},
      h('input#add-address', {placeholder: 'quack:127.0.0.1:9494', 'aria-label': 'New server address'}),
      h('input#add-token', {type: 'password', placeholder: 'token', 'aria-label': 'New server token'}),
      h('button#add-connect', {text: 'Add', type: 'submit'}), h('span.status#add-error'));
    this.addForm.addEventListener('submit', (e) => {
      e.preventDefault();
      let base;
      try { base = normalizeAddress($('#add-address').value, location.protocol); } catch (err) { $('#add-error').textContent = err.message; return; }
      this.tryConnect(base, $('#add-token').value.trim(), {primary: false});
    });
    this.addressLabel = h('span.address#server-address');
    this.range = h('select#time-range', {'aria-label': 'Time range'}, TIME_RANGES.map((r) => h('option', {value: String(r.seconds), text: r.label})));
    this.range.value = String(this.prefs.rangeSeconds ?? 90);
    this.range.addEventListener('change', () => {
      this.prefs.rangeSeconds = Number(this.range.value);
      this.savePrefs();
      for (const c of chartRegistry.values()) c.zoomed = false;
      // A longer range needs older history: reload it, down-sampled by the server.
      for (const s of this.servers) {
        s.state.load(Number(this.range.value), this.historyPoints()).then(() => { this.dirty = true; this.render(); }).catch(() => {});
      }
      this.dirty = true;
      this.render();
    });
    this.pauseBtn = h('button#pause', {text: 'Pause', onclick: () => this.togglePause()});
    this.shell = h('div.shell#shell', {hidden: true},
      h('header.topbar', {}, h('div.brand', {}, h('span.logo', {text: '◆'}), ' Rill'), h('nav', {'aria-label': 'Views'}, this.navButtons)),
      h('div.serverbar', {}, this.tabs,
        h('button.add-tab#add-tab', {text: '+', title: 'Add a server', 'aria-label': 'Add a server',
          onclick: () => { this.addForm.hidden = !this.addForm.hidden; }}), this.addForm),
      h('div.controlbar', {}, this.addressLabel, h('label', {}, 'Range ', this.range), this.pauseBtn,
        h('button#disconnect', {text: 'Disconnect', onclick: () => this.disconnect()})),
      this.views = h('main'));
    this.viewRoots = {};
    for (const v of VIEWS) {
      this.viewRoots[v.id] = h(`div.view#view-${v.id}`, {hidden: v.id !== this.view});
      this.views.append(this.viewRoots[v.id]);
    }
    this.toasts = h('div.toasts#toasts', {'aria-live': 'polite'});
    root.append(this.connectScreen, this.shell, this.toasts);
    this.consoleView = new ConsoleView(this.viewRoots.console, this);
    this.queriesView = new QueriesView(this.viewRoots.queries, this);
    this.rulesView = new RulesView(this.viewRoots.rules, this);
    this.alertsView = new AlertsView(this.viewRoots.alerts, this);
    this.pipelineView = new PipelineView(this.viewRoots.pipeline, this);
    this.clusterView = new ClusterView(this.viewRoots.cluster, this);
  }

  /** Check address + token; on success add (or replace) the server's tab. */
  async tryConnect(baseUrl, token, {primary}) {
    const conn = new ServerConnection({baseUrl, token});
    const err = primary ? this.connectError : $('#add-error');
    if (err) err.textContent = 'Connecting…';
    // History loads while the token is checked (one round trip less before the
    // first render); it is dropped if the check fails. Only this server's token.
    const state = new ServerState(conn);
    const loading = state.load(Number(this.range.value), this.historyPoints());
    loading.catch(() => {});
    try {
      await conn.check();
    } catch (e) {
      const msg = e instanceof ApiError && e.status === 401
        ? (token ? 'Wrong token' : 'This server needs a token')
        : e.message;
      if (primary && !this.servers.length) {
        this.connectScreen.hidden = false;
        this.shell.hidden = true;
        this.connectAddress.value = baseUrl;
        this.connectError.textContent = msg;
      } else if (err) {
        err.textContent = msg;
      }
      return false;
    }
    if (err) err.textContent = '';
    saveToken(baseUrl, token);
    const existing = this.servers.find((s) => s.baseUrl === baseUrl);
    if (existing) this.removeServer(existing.id);
    this.addServer(baseUrl, conn, state, loading);
    this.connectScreen.hidden = true;
    this.shell.hidden = false;
    this.addForm.hidden = true;
    if (primary) {
      for (const s of this.prefs.servers || []) {
        const t = loadToken(s.baseUrl);
        if (s.baseUrl !== baseUrl && t) this.tryConnect(s.baseUrl, t, {primary: false});
      }
    }
    return true;
  }

  addServer(baseUrl, conn, state = new ServerState(conn), loading = null) {
    const id = this.nextId++;
    const dot = h('span.dot');
    const label = h('span.tab-label', {text: new URL(baseUrl).host});
    const close = h('button.tab-close', {text: '×', title: 'Close', 'aria-label': `Close ${baseUrl}`});
    const tab = h('div.tab', {role: 'tab', tabindex: '0', dataset: {server: baseUrl}}, dot, label, close);
    tab.addEventListener('click', (e) => { if (e.target !== close) this.activate(id); });
    tab.addEventListener('keydown', (e) => {
      if (e.target !== tab) return;
      if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); this.activate(id); }
      if (e.key === 'Delete') this.removeServer(id);
    });
    close.addEventListener('click', () => this.removeServer(id));
    this.tabs.append(tab);
    const server = {id, baseUrl, conn, state, tab, label};
    this.servers.push(server);
    conn.addEventListener('status', (e) => this.onStatus(server, e.detail));
    state.on((kind, payload) => this.onState(server, kind, payload));
    this.onStatus(server, {status: 'connecting', reason: ''});
    conn.connect();
    (loading || state.load(Number(this.range.value), this.historyPoints()))
      .then(() => { if (state === this.active()) { this.dirty = true; this.render(); } })
      .catch((e) => this.onStatus(server, {status: 'offline', reason: e.message}));
    if (this.activeId === null) this.activate(id);
    this.savePrefs();
  }

  removeServer(id) {
    const i = this.servers.findIndex((s) => s.id === id);
    if (i < 0) return;
    const [s] = this.servers.splice(i, 1);
    if (this.pipelineView.server === s.state) this.pipelineView.detach();
    s.conn.close();
    s.tab.remove();
    if (this.activeId === id) {
      this.activeId = null;
      if (this.servers.length) this.activate(this.servers[0].id);
    }
    this.savePrefs();
    if (!this.servers.length) {
      this.shell.hidden = true;
      this.connectScreen.hidden = false;
    }
  }

  activate(id) {
    this.activeId = id;
    for (const s of this.servers) s.tab.setAttribute('aria-selected', s.id === id ? 'true' : 'false');
    const s = this.servers.find((x) => x.id === id);
    if (s) this.addressLabel.textContent = `quack:${new URL(s.baseUrl).host}`;
    for (const c of chartRegistry.values()) c.zoomed = false;
    if (this.view === 'pipeline') this.pipelineView.attach(this.active());
    if (this.view === 'cluster') this.clusterView.attach(this.active());
    this.dirty = true;
    this.updateBadge();
    this.render();
  }

  onStatus(server, {status, reason}) {
    const offline = status === 'offline' || status === 'unauthorized';
    server.tab.classList.toggle('offline', offline);
    server.tab.classList.toggle('online', status === 'online');
    server.tab.title = offline ? `${server.baseUrl} — ${reason}` : server.baseUrl;
    server.label.textContent = new URL(server.baseUrl).host + (offline ? ' (Offline)' : '');
    if (status === 'online' && server.wasOffline) {
      // Back after an outage: reload history so charts have no hole we could fill.
      server.state.load(Number(this.range.value), this.historyPoints()).catch(() => {});
    }
    server.wasOffline = offline;
  }

  onState(server, kind, payload) {
    if (kind === 'alert' && payload.live) {
      const a = payload.alert;
      showToast(this.toasts, {severity: a.severity, title: a.kind, message: a.message});
      this.sound.playFor(a.severity);
      if (server.state === this.active() && this.view === 'alerts') server.state.unseen = 0;
      this.updateBadge();
    }
    if (server.state === this.active()) {
      this.dirty = true;
      // History just arrived: draw it now rather than at the next 1 Hz tick.
      if (kind === 'loaded' && !document.hidden) requestAnimationFrame(() => this.render());
    }
  }

  updateBadge() {
    const s = this.active();
    const n = s ? s.unseen : 0;
    this.alertBadge.hidden = n === 0;
    this.alertBadge.textContent = String(n);
    this.alertBadge.title = `${n} unseen alert${n === 1 ? '' : 's'}`;
    this.alertBadge.classList.toggle('pulse', n > 0);
  }

  show(view) {
    if (this.view === 'alerts' && view !== 'alerts') this.alertsView.release();
    // The pipeline channel is followed only while its view is shown.
    if (view === 'pipeline') this.pipelineView.attach(this.active());
    else this.pipelineView.detach();
    if (view === 'cluster') this.clusterView.attach(this.active());
    else this.clusterView.detach();
    this.view = view;
    for (const b of this.navButtons) b.setAttribute('aria-current', b.dataset.view === view ? 'page' : 'false');
    for (const [id, el] of Object.entries(this.viewRoots)) el.hidden = id !== view;
    if (view === 'alerts' && this.active()) { this.active().unseen = 0; this.updateBadge(); }
    this.dirty = true;
    this.render();
  }

  togglePause() {
    this.paused = !this.paused;
    this.pauseBtn.textContent = this.paused ? 'Resume' : 'Pause';
    for (const s of this.servers) (this.paused ? s.conn.pause() : s.conn.resume());
    if (!this.paused) for (const s of this.servers) s.state.load(Number(this.range.value), this.historyPoints()).catch(() => {});
  }

  onVisibility() {
    if (this.paused) return;
    if (document.hidden) {
      for (const s of this.servers) s.conn.pause();
    } else {
      for (const s of this.servers) {
        s.conn.resume();
        s.state.load(Number(this.range.value), this.historyPoints()).catch(() => {});
      }
      this.dirty = true;
    }
  }

  disconnect() {
    const s = this.servers.find((x) => x.id === this.activeId);
    if (s) {
      saveToken(s.baseUrl, '');
      this.removeServer(s.id);
    }
  }

  tick() {
    if (document.hidden || this.paused) return;
    this.render();
  }

  render() {
    if (!this.dirty) return;
    const s = this.active();
    if (!s) return;
    this.dirty = false;
    const range = Number(this.range.value);
    if (this.view === 'console') this.consoleView.render(s, range);
    else if (this.view === 'rules') this.rulesView.render(s);
    else if (this.view === 'alerts') this.alertsView.render(s);
    else if (this.view === 'pipeline') this.pipelineView.render();
    this.renderedAt = Date.now();
  }
}

const app = new App();
// Read by the browser tests: the app, the charts and a render counter.
window.__rill = {app, charts: chartRegistry};
app.start();
