// Alert-rule form logic: validation and the payload the server's rule API takes.

export const OPERATORS = ['>', '>=', '<', '<=', '=='];

/** System metrics a rule can watch, by rill_metrics column. */
export const SYSTEM_METRICS = [
  {value: 'cpu_usage', label: 'CPU %'},
  {value: 'memory_percent', label: 'Memory %'},
  {value: 'records_per_second', label: 'Rows/s'},
  {value: 'last_batch_latency_ms', label: 'Tick latency (ms)'},
  {value: 'avg_batch_latency_ms', label: 'Average tick latency (ms)'},
];

export const DEFAULT_COOLDOWN_SECONDS = 10;

/** Compare like the server does. */
export function evaluate(operator, observed, threshold) {
  switch (operator) {
    case '>': return observed > threshold;
    case '>=': return observed >= threshold;
    case '<': return observed < threshold;
    case '<=': return observed <= threshold;
    case '==': return observed === threshold;
    default: throw new Error(`unknown operator ${operator}`);
  }
}

/**
 * Validate the form's fields; return {ok: true, rule} with the API payload or
 * {ok: false, errors: {field: message}}.
 */
export function validateRuleForm(form) {
  const errors = {};
  const name = String(form.name ?? '').trim();
  if (!name) errors.name = 'Give the rule a name';
  else if (name.length > 120) errors.name = 'At most 120 characters';
  const metric = String(form.metric ?? '').trim();
  if (!metric) errors.metric = 'Choose a metric';
  const operator = String(form.operator ?? '');
  if (!OPERATORS.includes(operator)) errors.operator = `One of ${OPERATORS.join(' ')}`;
  const threshold = Number(form.threshold);
  if (form.threshold === '' || form.threshold === null || !Number.isFinite(threshold)) {
    errors.threshold = 'A number';
  }
  const cooldownRaw = form.cooldown_seconds ?? DEFAULT_COOLDOWN_SECONDS;
  const cooldown = Number(cooldownRaw === '' ? DEFAULT_COOLDOWN_SECONDS : cooldownRaw);
  if (!Number.isFinite(cooldown) || cooldown < 0) errors.cooldown_seconds = 'Seconds, 0 or more';
  const severity = String(form.severity || 'warning');
  if (!['info', 'warning', 'error'].includes(severity)) errors.severity = 'info, warning or error';
  const webhookUrl = String(form.webhook_url ?? '').trim();
  if (webhookUrl && !/^https?:\/\//i.test(webhookUrl)) errors.webhook_url = 'An http(s) URL';
  if (Object.keys(errors).length) return {ok: false, errors};
  // The server's rule fields (docs/api.md): op, webhook, webhook_format.
  const rule = {name, metric, op: operator, threshold, cooldown_seconds: cooldown, severity,
                enabled: form.enabled !== false};
  if (form.message) rule.message = String(form.message);
  if (webhookUrl) {
    rule.webhook = webhookUrl;
    rule.webhook_format = form.webhook_format || 'slack';
  }
  return {ok: true, rule};
}

/** A rule as one line: "cpu_usage > 80 (cooldown 10 s)". */
export function describeRule(rule) {
  return `${rule.metric} ${rule.op ?? rule.operator} ${rule.threshold} (cooldown ${rule.cooldown_seconds ?? DEFAULT_COOLDOWN_SECONDS} s)`;
}
