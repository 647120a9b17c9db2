// Alert log model: normalizing, filtering, unseen counts. Pure (unit-tested).

export const SEVERITY_BADGE = {error: '🔴 Error', warning: '🟡 Warning', info: '🔵 Info'};

/** Source badge from the alert's source/component: User, Rule or Engine. */
export function sourceKind(alert) {
  const s = String(alert.source ?? alert.component ?? '').toLowerCase();
  if (s === 'user' || s.startsWith('user')) return 'User';
  if (s === 'rule' || s.startsWith('rule')) return 'Rule';
  return 'Engine';
}

/** One alert in the page's shape. */
export function normalizeAlert(raw) {
  const severity = String(raw.severity ?? 'info').toLowerCase();
  return {
    id: raw.id ?? `${raw.ts}|${raw.source}|${raw.message}`,
    ts: Number(raw.ts ?? raw.timestamp ?? 0),
    severity: ['error', 'warning', 'info'].includes(severity) ? severity : 'info',
    source: String(raw.source ?? raw.component ?? 'engine'),
    kind: sourceKind(raw),
    message: String(raw.message ?? ''),
    detail: raw.detail == null ? '' : String(raw.detail),
  };
}

export const FILTERS = ['All', 'Errors', 'Warnings', 'User', 'Engine', 'Rules'];

/** Whether `alert` passes the filter toggle. */
export function matchesFilter(alert, filter) {
  switch (filter) {
    case 'All': return true;
    case 'Errors': return alert.severity === 'error';
    case 'Warnings': return alert.severity === 'warning';
    case 'User': return alert.kind === 'User';
    case 'Engine': return alert.kind === 'Engine';
    case 'Rules': return alert.kind === 'Rule';
    default: return true;
  }
}

/** Alerts newer than `clearedAt` passing `filter`, newest first. */
export function visibleAlerts(alerts, filter, clearedAt = 0) {
  return alerts.filter((a) => a.ts > clearedAt && matchesFilter(a, filter))
    .sort((a, b) => b.ts - a.ts);
}
