// One Rill server as the page sees it: REST calls with its own token and one
// WebSocket (/api/v1/stream) carrying every channel. A token is only ever sent
// to the server it belongs to.

/** REST routes of the server (docs/api.md). */
export const ROUTES = {
  health: '/healthz',
  info: '/api/v1/info',
  metricsNow: '/api/v1/telemetry',
  telemetry: '/api/v1/telemetry/history',
  tables: '/api/v1/tables',
  stats: '/api/v1/telemetry/connectors',
  sinks: '/api/v1/telemetry/sinks',
  alerts: '/api/v1/alerts',
  kpis: '/api/v1/kpis',
  rules: '/api/v1/rules',
  query: '/api/v1/query',
  metricsQuery: '/api/v1/metrics/query',
  webhookSend: '/api/webhook/send',
  pipeline: '/api/v1/pipeline',
  cluster: '/api/v1/telemetry/cluster',
  stream: '/api/v1/stream',
};

/** An HTTP error from the server, with its status and message. */
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** Normalize what a user typed: "quack:HOST:PORT", "HOST:PORT" or a URL -> base URL. */
export function normalizeAddress(address, pageProtocol = 'http:') {
  let a = String(address || '').trim();
  if (!a) throw new Error('Enter a server address');
  if (a.startsWith('quack:')) a = a.slice('quack:'.length);
  if (!/^https?:\/\//i.test(a)) a = `${pageProtocol}//${a}`;
  const url = new URL(a);
  return `${url.protocol}//${url.host}`;
}

/** base64url of a UTF-8 string (no padding). */
export function base64url(text) {
  const bytes = new TextEncoder().encode(text);
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

const BACKOFF_MS = [1000, 2000, 4000, 8000, 10000];

/**
 * A live connection to one server. Events (EventTarget): 'status'
 * ({status, reason}), 'metrics', 'alert', 'kpi', 'table', 'pipeline', 'notice' (detail =
 * frame data). subscribe()/unsubscribe() add or drop channels beyond the default three
 * (kept across reconnects).
 */
export class ServerConnection extends EventTarget {
  constructor({baseUrl, token}) {
    super();
    this.baseUrl = baseUrl.replace(/\/+$/, '');
    this.token = token || '';
    this.status = 'connecting';
    this.reason = '';
    this.ws = null;
    this.paused = false;
    this.closed = false;
    this.attempt = 0;
    this.timer = null;
    this.channels = ['metrics', 'alerts', 'kpis'];
  }

  headers(extra = {}) {
    const h = {...extra};
    if (this.token) h.Authorization = `Bearer ${this.token}`;
    return h;
  }

  /** Call a REST route; resolves to parsed JSON (or text), throws ApiError. */
  async request(method, path, body, {timeoutMs = 30000} = {}) {
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), timeoutMs);
    let resp;
    try {
      resp = await fetch(this.baseUrl + path, {
        method,
        headers: this.headers(body !== undefined ? {'Content-Type': 'application/json'} : {}),
        body: body !== undefined ? JSON.stringify(body) : undefined,
        signal: ctl.signal,
        credentials: 'omit',
        cache: 'no-store',
      });
    } catch (e) {
      throw new ApiError(0, `Server unreachable (${this.baseUrl}): ${e.name === 'AbortError' ? 'timed out' : e.message}`);
    } finally {
      clearTimeout(timer);
    }
    const text = await resp.text();
    let data = text;
    try { data = text ? JSON.parse(text) : null; } catch (_) { /* not JSON */ }
    if (!resp.ok) {
      const msg = (data && data.message) || (typeof data === 'string' && data) || resp.statusText;
      if (resp.status === 401) throw new ApiError(401, 'Wrong or missing token');
      throw new ApiError(resp.status, msg);
    }
    return data;
  }

  get(path, params) {
    const qs = params ? '?' + new URLSearchParams(
      Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== '')).toString() : '';
    return this.request('GET', path + qs);
  }

  /** Check the address and the token. Resolves to /api/v1/info. */
  async check() {
    return this.request('GET', ROUTES.info, undefined, {timeoutMs: 5000});
  }

  /** Add a channel (e.g. 'pipeline'): sent now if the socket is open, and on every reconnect. */
  subscribe(channel) {
    if (this.channels.includes(channel)) return;
    this.channels = [...this.channels, channel];
    this.sendIfOpen({type: 'subscribe', channels: [channel]});
  }

  /** Drop a channel added by subscribe(). */
  unsubscribe(channel) {
    if (!this.channels.includes(channel)) return;
    this.channels = this.channels.filter((c) => c !== channel);
    this.sendIfOpen({type: 'unsubscribe', channels: [channel]});
  }

  /** True while the socket is open and the server confirmed it (frames arrive). */
  get live() { return this.status === 'online' && !!this.ws && this.ws.readyState === 1; }

  sendIfOpen(message) {
    if (this.ws && this.ws.readyState === 1) this.ws.send(JSON.stringify(message));
  }

  setStatus(status, reason = '') {
    if (this.status === status && this.reason === reason) return;
    this.status = status;
    this.reason = reason;
    this.dispatchEvent(new CustomEvent('status', {detail: {status, reason}}));
  }

  /** Open the stream (and keep it open, reconnecting with backoff). */
  connect() {
    this.closed = false;
    if (this.ws || this.paused) return;
    const url = this.baseUrl.replace(/^http/, 'ws') + ROUTES.stream;
    let ws;
    try {
      // The token rides in a subprotocol (browsers cannot set headers on a
      // WebSocket; cookies would reach every server on the host).
      ws = this.token ? new WebSocket(url, ['rill', 'rill.auth.' + base64url(this.token)]) : new WebSocket(url);
    } catch (e) {
      this.setStatus('offline', e.message);
      this.scheduleReconnect();
      return;
    }
    this.ws = ws;
    ws.onopen = () => {
      ws.send(JSON.stringify({type: 'subscribe', channels: this.channels}));
    };
    ws.onmessage = (ev) => this.onFrame(ev.data);
    ws.onerror = () => { /* onclose follows with the reason */ };
    ws.onclose = (ev) => {
      this.ws = null;
      if (this.closed || this.paused) return;
      const reason = ev.code === 4401 || ev.code === 1008
        ? 'Wrong or missing token'
        : `Connection lost (${ev.code}${ev.reason ? ': ' + ev.reason : ''})`;
      this.setStatus(ev.code === 4401 ? 'unauthorized' : 'offline', reason);
      this.scheduleReconnect();
    };
  }

  onFrame(data) {
    let frame;
    try { frame = JSON.parse(data); } catch (_) { return; }
    const channel = frame.channel || frame.type;
    if (this.status !== 'online' && channel !== 'error') {
      this.attempt = 0;
      this.setStatus('online');
    }
    const payload = frame.data ?? frame.payload ?? frame;
    if (channel === 'metrics') this.emit('metrics', payload);
    else if (channel === 'alerts' || channel === 'alert') {
      for (const a of Array.isArray(payload) ? payload : [payload]) this.emit('alert', a);
    } else if (channel === 'kpis' || channel === 'kpi') {
      for (const k of Array.isArray(payload) ? payload : [payload]) this.emit('kpi', k);
    } else if (channel === 'pipeline') this.emit('pipeline', payload);
    else if (channel && channel.startsWith('table:')) this.emit('table', {table: channel.slice(6), ...payload});
    else if (channel === 'notice' || channel === 'hello' || channel === 'subscribed') this.emit('notice', payload);
    else if (channel === 'error') {
      if (/token|auth/i.test(JSON.stringify(payload))) this.setStatus('unauthorized', 'Wrong or missing token');
      this.emit('notice', payload);
    }
  }

  emit(type, detail) { this.dispatchEvent(new CustomEvent(type, {detail})); }

  scheduleReconnect() {
    clearTimeout(this.timer);
    if (this.closed || this.paused) return;
    const delay = BACKOFF_MS[Math.min(this.attempt, BACKOFF_MS.length - 1)];
    this.attempt++;
    this.timer = setTimeout(() => this.connect(), delay);
  }

  /** Stop live updates (tab hidden or the user paused); resume() reopens. */
  pause() {
    this.paused = true;
    clearTimeout(this.timer);
    if (this.ws) { this.ws.onclose = null; this.ws.close(1000, 'paused'); this.ws = null; }
  }

  resume() {
    if (!this.paused) return;
    this.paused = false;
    this.connect();
  }

  /** Close for good (tab closed or Disconnect). */
  close() {
    this.closed = true;
    this.pause();
    this.paused = false;
  }
}
