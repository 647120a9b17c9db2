// Value formatting for cards, tables and axes. Pure functions (unit-tested).

/** Guess how a KPI value should read from its name: currency, percent or count. */
export function kindOf(name) {
  const n = String(name || '').toLowerCase();
  if (/(\$|revenue|amount|price|sales|cost|usd|eur|gbp|ticket|spend|income)/.test(n)) return 'currency';
  if (/(%|ratio|rate_pct|percent|pct|share|fraction|usage)/.test(n)) return 'percent';
  return 'count';
}

/** Format a number by kind. Ratios in [0, 1] named as percent are scaled to %. */
export function formatValue(value, kind = 'count') {
  if (value === null || value === undefined || value === '') return '—';
  const v = Number(value);
  if (!Number.isFinite(v)) return String(value);
  switch (kind) {
    case 'currency':
      return (v < 0 ? '-$' : '$') + Math.abs(v).toLocaleString('en-US', {
        minimumFractionDigits: 2, maximumFractionDigits: 2});
    case 'percent': {
      const pct = Math.abs(v) <= 1 ? v * 100 : v;
      return pct.toFixed(1) + '%';
    }
    default:
      if (Number.isInteger(v)) return v.toLocaleString('en-US');
      return v.toLocaleString('en-US', {maximumFractionDigits: 2});
  }
}

/** Bytes in binary units: 1536 -> "1.50 KB". */
export function formatBytes(bytes) {
  const b = Number(bytes);
  if (!Number.isFinite(b)) return '—';
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  let x = Math.abs(b);
  while (x >= 1024 && i < units.length - 1) { x /= 1024; i++; }
  return (b < 0 ? '-' : '') + (i === 0 ? String(x) : x.toFixed(2)) + ' ' + units[i];
}

/** Milliseconds as "17 ms", "1.25 s", "3m 05s". */
export function formatDuration(ms) {
  const v = Number(ms);
  if (!Number.isFinite(v)) return '—';
  if (v < 1) return v.toFixed(2) + ' ms';
  if (v < 1000) return (v < 10 ? v.toFixed(1) : Math.round(v)) + ' ms';
  const s = v / 1000;
  if (s < 60) return s.toFixed(2) + ' s';
  const m = Math.floor(s / 60);
  const r = Math.floor(s % 60);
  if (m < 60) return `${m}m ${String(r).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, '0')}m`;
}

/** Rate with a unit: 12345.6 -> "12,346/s". */
export function formatRate(perSecond) {
  const v = Number(perSecond);
  if (!Number.isFinite(v)) return '—';
  return Math.round(v).toLocaleString('en-US') + '/s';
}

/** Seconds since `ts` (unix seconds) as "just now", "12 s ago", "5 min ago". */
export function formatAge(ts, nowSeconds = Date.now() / 1000) {
  const t = Number(ts);
  if (!Number.isFinite(t) || t <= 0) return 'never';
  const d = Math.max(0, nowSeconds - t);
  if (d < 1) return 'just now';
  if (d < 60) return `${Math.floor(d)} s ago`;
  if (d < 3600) return `${Math.floor(d / 60)} min ago`;
  return `${Math.floor(d / 3600)} h ago`;
}

/** A clock time for an axis or a log line: unix seconds -> "14:03:07". */
export function formatTime(ts) {
  const t = Number(ts);
  if (!Number.isFinite(t)) return '';
  const d = new Date(t * 1000);
  const p = (x) => String(x).padStart(2, '0');
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/** Memory-bar colour class for a used percentage (purple above 70, red above 85). */
export function memoryLevel(percent) {
  if (percent > 85) return 'critical';
  if (percent > 70) return 'high';
  return 'normal';
}

/** Trend between two values: {dir: 'up'|'down'|'flat', delta}. */
export function trend(previous, current) {
  const a = Number(previous);
  const b = Number(current);
  if (!Number.isFinite(a) || !Number.isFinite(b)) return {dir: 'flat', delta: 0};
  const delta = b - a;
  if (Math.abs(delta) < 1e-12) return {dir: 'flat', delta: 0};
  return {dir: delta > 0 ? 'up' : 'down', delta};
}

/** Unix seconds from a value that may be seconds, milliseconds, an ISO string or a Date. */
export function toUnixSeconds(value) {
  if (value === null || value === undefined) return NaN;
  if (value instanceof Date) return value.getTime() / 1000;
  if (typeof value === 'number') return value > 1e11 ? value / 1000 : value;
  const n = Number(value);
  if (Number.isFinite(n)) return n > 1e11 ? n / 1000 : n;
  const parsed = Date.parse(String(value).replace(' ', 'T'));
  return Number.isFinite(parsed) ? parsed / 1000 : NaN;
}

/** Escape text for insertion into HTML. */
export function escapeHtml(s) {
  return String(s ?? '').replace(/[&<>"']/g, (c) => ({
    '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}[c]));
}

/** Rows (array of objects) as CSV text with RFC 4180 quoting. */
export function toCsv(columns, rows) {
  const q = (v) => {
    if (v === null || v === undefined) return '';
    const s = typeof v === 'object' ? JSON.stringify(v) : String(v);
    return /[",\n\r]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
  };
  const lines = [columns.map(q).join(',')];
  for (const r of rows) lines.push(columns.map((c) => q(r[c])).join(','));
  return lines.join('\r\n') + '\r\n';
}
