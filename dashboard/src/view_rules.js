// Alert Rules & Settings: the server's threshold rules (they fire with no
// browser open), webhook settings, sound and display preferences.
import {h, setChildren} from './dom.js';
import {ROUTES} from './api.js';
import {OPERATORS, SYSTEM_METRICS, DEFAULT_COOLDOWN_SECONDS, validateRuleForm, describeRule} from './rules.js';
import {TONES} from './sound.js';
import {formatAge} from './format.js';

export class RulesView {
  constructor(root, app) {
    this.root = root;
    this.app = app;
    this.editing = null;
    this.build();
  }

  build() {
    const f = this.form = {
      name: h('input#rule-name', {placeholder: 'High CPU', 'aria-label': 'Rule name'}),
      metric: h('input#rule-metric', {list: 'rule-metrics', placeholder: 'cpu_usage', 'aria-label': 'Metric'}),
      metricList: h('datalist#rule-metrics'),
      operator: h('select#rule-operator', {'aria-label': 'Operator'}, OPERATORS.map((o) => h('option', {value: o, text: o}))),
      threshold: h('input#rule-threshold', {type: 'number', step: 'any', 'aria-label': 'Threshold'}),
      cooldown: h('input#rule-cooldown', {type: 'number', min: '0', step: 'any', value: String(DEFAULT_COOLDOWN_SECONDS), 'aria-label': 'Cooldown (s)'}),
      severity: h('select#rule-severity', {'aria-label': 'Severity'}, ['warning', 'error', 'info'].map((s) => h('option', {value: s, text: s}))),
      message: h('input#rule-message', {placeholder: 'optional message', 'aria-label': 'Message'}),
      webhook: h('input#rule-webhook', {type: 'checkbox', 'aria-label': 'Deliver to the webhook'}),
      errors: h('div.form-errors#rule-errors', {role: 'alert'}),
      submit: h('button.primary#rule-save', {text: 'Add rule'}),
    };
    f.submit.addEventListener('click', () => this.save());
    this.rulesBody = h('tbody');
    const p = this.app.prefs;
    const w = this.webhook = {
      url: h('input#webhook-url', {type: 'url', placeholder: 'https://hooks.slack.com/services/…', value: p.webhook.url, 'aria-label': 'Webhook URL'}),
      format: h('select#webhook-format', {'aria-label': 'Webhook format'},
        [['slack', 'Slack'], ['google_chat', 'Google Chat'], ['custom', 'Custom JSON']].map(([v, t]) => h('option', {value: v, text: t}))),
      enabled: h('input#webhook-enabled', {type: 'checkbox', checked: p.webhook.enabled, 'aria-label': 'Webhook enabled'}),
      status: h('span.status#webhook-status'),
    };
    w.format.value = p.webhook.format;
    for (const el of [w.url, w.format, w.enabled]) el.addEventListener('change', () => this.saveWebhook());
    const s = this.sound = {
      enabled: h('input#sound-enabled', {type: 'checkbox', checked: p.sound.enabled, 'aria-label': 'Sound enabled'}),
      mode: h('select#sound-mode', {'aria-label': 'Tone choice'}, h('option', {value: 'severity', text: 'Per severity'}), h('option', {value: 'global', text: 'One tone for all'})),
      global: toneSelect('sound-global', p.sound.globalTone),
      error: toneSelect('sound-error', p.sound.tones.error),
      warning: toneSelect('sound-warning', p.sound.tones.warning),
      info: toneSelect('sound-info', p.sound.tones.info),
      duration: h('input#sound-duration', {type: 'range', min: '1', max: '30', step: '1', value: String(p.sound.durationSeconds), 'aria-label': 'Sound duration (s)'}),
      durationLabel: h('span#sound-duration-label', {text: `${p.sound.durationSeconds} s`}),
    };
    s.mode.value = p.sound.mode;
    for (const el of [s.enabled, s.mode, s.global, s.error, s.warning, s.info, s.duration]) {
      el.addEventListener('input', () => this.saveSound());
    }
    this.root.append(
      h('section.panel', {},
        h('h2', {text: 'Alert Rules'}),
        h('p.hint', {text: 'Rules live on the server: they keep firing with no browser open. System metrics: cpu_usage, memory_percent, records_per_second, last_batch_latency_ms; or the name of a KPI query or business metric.'}),
        h('div.form-grid', {},
          label('Name', f.name), label('Metric', f.metric, f.metricList), label('Operator', f.operator),
          label('Threshold', f.threshold), label('Cooldown (s)', f.cooldown), label('Severity', f.severity),
          label('Message', f.message), label('Send to webhook', f.webhook)),
        h('div.row', {}, f.submit, h('button#rule-cancel', {text: 'Cancel edit', onclick: () => this.resetForm()})),
        f.errors,
        h('table.grid#rules-table', {}, h('thead', {}, h('tr', {}, ['On', 'Rule', 'Condition', 'Severity', 'Last triggered', ''].map((c) => h('th', {text: c})))), this.rulesBody)),
      h('section.panel', {},
        h('h2', {text: 'Webhook Settings'}),
        h('div.form-grid', {}, label('URL', w.url), label('Format', w.format), label('Enabled', w.enabled)),
        h('div.row', {}, h('button#webhook-test', {text: 'Test delivery', onclick: () => this.testWebhook()}), w.status)),
      h('section.panel', {},
        h('h2', {text: 'Sound Alerts'}),
        h('div.form-grid', {},
          label('Enabled', s.enabled), label('Tones', s.mode), label('Global tone', s.global),
          label('🔴 Error tone', s.error), label('🟡 Warning tone', s.warning), label('🔵 Info tone', s.info),
          label('Duration', s.duration, s.durationLabel)),
        h('div.row', {}, h('button#sound-test', {text: 'Test sound', onclick: () => {
          this.app.sound.stop();
          this.app.sound.play(s.mode.value === 'global' ? s.global.value : s.warning.value);
        }}),
          h('button#sound-stop', {text: 'Stop', onclick: () => this.app.sound.stop()}))));
  }

  render(state) {
    const names = SYSTEM_METRICS.map((m) => m.value).concat([...state.kpis.keys()], [...state.business.keys()]);
    setChildren(this.form.metricList, names.map((n) => h('option', {value: n})));
    const now = Date.now() / 1000;
    if (!state.rules.length) {
      setChildren(this.rulesBody, h('tr.empty-row', {}, h('td', {colspan: '6', text: 'No rules yet: add one above.'})));
      return;
    }
    setChildren(this.rulesBody, state.rules.map((r) => {
      const toggle = h('input', {type: 'checkbox', checked: r.enabled !== false, 'aria-label': `Enable ${r.name}`});
      toggle.addEventListener('change', () => this.update(r, {enabled: toggle.checked}));
      return h('tr', {dataset: {rule: r.name}}, h('td', {}, toggle), h('td', {text: r.name}),
        h('td', {text: describeRule(r)}), h('td', {text: r.severity || 'warning'}),
        h('td', {text: formatAge(r.last_fired_at, now)}),
        h('td', {}, h('button.small', {text: 'Edit', onclick: () => this.edit(r)}),
          h('button.small.danger', {text: 'Delete', onclick: () => this.remove(r)})));
    }));
  }

  values() {
    const f = this.form;
    const p = this.app.prefs.webhook;
    return {
      name: f.name.value, metric: f.metric.value, operator: f.operator.value, threshold: f.threshold.value,
      cooldown_seconds: f.cooldown.value, severity: f.severity.value, message: f.message.value,
      enabled: this.editing ? this.editing.enabled !== false : true,
      webhook_url: f.webhook.checked ? p.url : '', webhook_format: p.format,
      // An edit keeps the rule's own webhook unless the box was unticked.
      ...(this.editing && f.webhook.checked && !p.url ? {webhook_url: this.editing.webhook} : {}),
    };
  }

  async save() {
    const s = this.app.active();
    if (!s) return;
    const v = validateRuleForm(this.values());
    if (v.ok && this.form.webhook.checked && !v.rule.webhook) {
      v.ok = false;
      v.errors = {webhook: 'Enter a webhook URL under Webhook Settings first'};
    } else if (v.ok && this.form.webhook.checked && !this.app.prefs.webhook.enabled && !this.editing) {
      v.ok = false;
      v.errors = {webhook: 'The webhook is disabled under Webhook Settings: enable it, or untick "Send to webhook"'};
    }
    if (!v.ok) {
      setChildren(this.form.errors, Object.entries(v.errors).map(([k, m]) => h('div', {text: `${k}: ${m}`})));
      return;
    }
    setChildren(this.form.errors);
    try {
      if (this.editing) {
        await s.conn.request('PATCH', `${ROUTES.rules}/${encodeURIComponent(this.editing.name)}`, v.rule);
      } else {
        await s.conn.request('POST', ROUTES.rules, v.rule);
      }
      this.resetForm();
      await s.refreshRules();
    } catch (e) {
      setChildren(this.form.errors, h('div', {text: e.message}));
    }
  }

  async update(rule, changes) {
    const s = this.app.active();
    try {
      await s.conn.request('PATCH', `${ROUTES.rules}/${encodeURIComponent(rule.name)}`, changes);
    } catch (e) {
      setChildren(this.form.errors, h('div', {text: e.message}));
    }
    await s.refreshRules().catch(() => {});
  }

  async remove(rule) {
    const s = this.app.active();
    try {
      await s.conn.request('DELETE', `${ROUTES.rules}/${encodeURIComponent(rule.name)}`);
    } catch (e) {
      setChildren(this.form.errors, h('div', {text: e.message}));
    }
    await s.refreshRules().catch(() => {});
  }

  edit(rule) {
    const f = this.form;
    this.editing = rule;
    f.name.value = rule.name;
    f.metric.value = rule.metric;
    f.operator.value = rule.op ?? rule.operator;
    f.threshold.value = String(rule.threshold);
    f.cooldown.value = String(rule.cooldown_seconds ?? DEFAULT_COOLDOWN_SECONDS);
    f.severity.value = rule.severity || 'warning';
    f.message.value = rule.message || '';
    f.webhook.checked = !!rule.webhook;
    f.submit.textContent = 'Save rule';
  }

  resetForm() {
    const f = this.form;
    this.editing = null;
    for (const k of ['name', 'metric', 'threshold', 'message']) f[k].value = '';
    f.cooldown.value = String(DEFAULT_COOLDOWN_SECONDS);
    f.webhook.checked = false;
    f.submit.textContent = 'Add rule';
    setChildren(f.errors);
  }

  saveWebhook() {
    const w = this.webhook;
    this.app.prefs.webhook = {url: w.url.value.trim(), format: w.format.value, enabled: w.enabled.checked};
    this.app.savePrefs();
  }

  async testWebhook() {
    const s = this.app.active();
    this.saveWebhook();
    const {url, format} = this.app.prefs.webhook;
    if (!url) { this.webhook.status.textContent = 'Enter a webhook URL'; return; }
    this.webhook.status.textContent = 'Sending…';
    try {
      const r = await s.conn.request('POST', ROUTES.webhookSend, {url, format,
        payload: {text: 'Rill test delivery', message: 'Rill test delivery', severity: 'info', source: 'dashboard'}});
      this.webhook.status.textContent = `Delivered (remote status ${r && (r.remote_status ?? r.status) || 'ok'})`;
      this.webhook.status.className = 'status ok';
    } catch (e) {
      this.webhook.status.textContent = `Failed: ${e.message}`;
      this.webhook.status.className = 'status error';
    }
  }

  saveSound() {
    const s = this.sound;
    const prefs = this.app.prefs.sound;
    Object.assign(prefs, {enabled: s.enabled.checked, mode: s.mode.value, globalTone: s.global.value,
      tones: {error: s.error.value, warning: s.warning.value, info: s.info.value},
      durationSeconds: Number(s.duration.value)});
    s.durationLabel.textContent = `${prefs.durationSeconds} s`;
    this.app.sound.prefs = prefs;
    this.app.savePrefs();
  }
}

function toneSelect(id, value) {
  const el = h(`select#${id}`, {'aria-label': id.replace('-', ' ')}, Object.entries(TONES).map(([v, t]) => h('option', {value: v, text: t})));
  el.value = value;
  return el;
}

function label(text, ...controls) {
  return h('label.field', {}, h('span', {text}), ...controls);
}
