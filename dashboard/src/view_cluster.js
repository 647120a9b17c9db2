// Cluster: the scaled-out application this server is an instance of (issue
// 28): every member with its partitions (from the group's description, so
// any instance shows the whole application), a map of the input partitions
// by owner, and this instance's commits and rebalances. Polls
// GET /api/v1/telemetry/cluster every 2 s while shown. Model: cluster_model.js.
import {h, setChildren, setText} from './dom.js';
import {ROUTES} from './api.js';
import {clusterModel, ownerColors, restoreText} from './cluster_model.js';
import {formatDuration} from './format.js';

const POLL_INTERVAL_MS = 2000;

export class ClusterView {
  constructor(root, app) {
    this.root = root;
    this.app = app;
    this.server = null;
    this.status = null;
    this.build();
  }

  build() {
    this.statusLine = h('span.status#cluster-status', {text: 'Loading…'});
    this.summary = h('div.cluster-summary#cluster-summary');
    this.members = h('table.grid#cluster-members', {'aria-label': 'Members'});
    this.map = h('div.cluster-map#cluster-map', {'aria-label': 'Partitions by owner'});
    this.instance = h('table.grid#cluster-instance', {'aria-label': 'This instance'});
    this.root.append(
      h('section.panel', {},
        h('div.pipeline-head', {}, h('h2', {text: 'Cluster'}), this.statusLine),
        h('p.hint', {text: 'The application this server is an instance of: its members (one Kafka consumer group), which instance owns each input partition, and this instance\'s transactions.'}),
        this.summary,
        h('h3', {text: 'Members'}), this.members,
        h('h3', {text: 'Partitions'}), this.map,
        h('h3', {text: 'This instance'}), this.instance));
  }

  attach(server) {
    if (this.server === server) return;
    this.detach();
    this.server = server;
    this.status = null;
    if (!server) return;
    setText(this.statusLine, 'Loading…');
    this.poll();
    this.timer = setInterval(() => this.poll(), POLL_INTERVAL_MS);
  }

  detach() {
    clearInterval(this.timer);
    this.timer = null;
    this.server = null;
  }

  async poll() {
    const server = this.server;
    if (!server || this.app.paused || document.hidden) return;
    try {
      const status = await server.conn.get(ROUTES.cluster);
      if (server !== this.server) return;
      this.status = status;
      this.render();
    } catch (e) {
      if (server === this.server) setText(this.statusLine, `Cannot read the cluster: ${e.message}`);
    }
  }

  render() {
    const model = clusterModel(this.status);
    if (!model.app) {
      setText(this.statusLine, this.status ? 'Not an application instance' : 'Loading…');
      setChildren(this.summary, h('p.hint#cluster-none', {text: 'This server is not an instance of a scaled-out application. Start it with a `cluster:` section (app_id) in its pipeline file, or `rill serve --app-id … --instance-id …` (docs/scale-out.md).'}));
      setChildren(this.members);
      setChildren(this.map);
      setChildren(this.instance);
      return;
    }
    const s = this.status;
    const covered = model.unowned === 0 && model.contested === 0;
    setText(this.statusLine, `${model.members.length} member${model.members.length === 1 ? '' : 's'} · group ${model.state || 'unknown'}`);
    setChildren(this.summary,
      h('div.cluster-cards', {},
        card('Application', model.app, 'cluster-app'),
        card('This instance', model.instance, 'cluster-self'),
        card('Members', String(model.members.length), 'cluster-count'),
        card('Partitions', covered ? 'all owned' : `${model.unowned} unowned, ${model.contested} contested`,
          'cluster-coverage', covered ? '' : 'warn')),
      s.members_error ? h('p.hint.error', {text: `Group description: ${s.members_error}`}) : null);

    const colors = ownerColors(model.members);
    setChildren(this.members,
      h('thead', {}, h('tr', {}, ['Instance', 'Host', 'Partitions', 'Owned'].map((t) => h('th', {text: t})))),
      h('tbody', {}, model.members.map((m) => h(`tr${m.self ? '.self' : ''}`, {dataset: {instance: m.instance}},
        h('td', {}, h(`span.owner-dot.owner-${colors.get(m.instance)}`), ` ${m.instance}${m.self ? ' (this one)' : ''}`),
        h('td', {text: m.host}),
        h('td', {text: String(m.partitions.length)}),
        h('td', {text: m.partitions.map((p) => `${p.topic}[${p.partition}]`).join(', ')})))));

    setChildren(this.map, model.topics.map((t) => h('div.cluster-topic', {},
      h('div.cluster-topic-name', {text: t.topic}),
      h('div.cluster-cells', {}, t.partitions.map((p) => {
        const owner = p.owners[0];
        const cls = p.owners.length === 0 ? '.unowned' : p.owners.length > 1 ? '.contested' : `.owner-${colors.get(owner)}`;
        return h(`span.cluster-cell${cls}`, {
          text: String(p.partition),
          title: p.owners.length ? `${t.topic}[${p.partition}]: ${p.owners.join(', ')}` : `${t.topic}[${p.partition}]: unowned`,
          dataset: {partition: String(p.partition), owner: p.owners.join(',')},
        });
      })))));

    const rows = [
      ['Member id', s.member_id],
      ['Group generation', s.generation >= 0 ? String(s.generation) : '—'],
      ['Owned partitions', String((s.partitions || []).length)],
      ['Assigns / revokes', `${s.assigns} / ${s.revokes}`],
      ['Last rebalance took', s.last_rebalance_seconds ? formatDuration(s.last_rebalance_seconds * 1000) : '—'],
      ['Exactly-once', s.exactly_once ? `yes, every ${s.commit_interval_ms} ms` : 'no'],
      ['Transactions committed', String(s.commits)],
      ['Aborted', String(s.commit_aborts)],
      ['Last / max commit', `${Number(s.last_commit_ms).toFixed(1)} / ${Number(s.max_commit_ms).toFixed(1)} ms`],
      ['Rewinds', String(s.rewinds ?? 0)],
      ['Shards restored', restoreText(s)],
      ['Shards dropped', String(s.partitions_dropped ?? 0)],
      ['Fenced', s.fenced ? 'yes' : 'no'],
      ['Last commit error', s.last_commit_error || '—'],
    ];
    setChildren(this.instance, h('tbody', {}, rows.map(([k, v]) => h('tr', {}, h('th', {text: k}), h('td', {text: v})))));
  }
}

function card(label, value, id, extra = '') {
  return h(`div.card.cluster-card#${id}${extra ? '.' + extra : ''}`, {},
    h('div.card-label', {text: label}), h('div.card-value', {text: value}));
}
