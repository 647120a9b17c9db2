// The Cluster view's model (DOM-free, unit-tested): an application instance's
// GET /api/v1/telemetry/cluster as members and a partition map.

/**
 * Members (this instance first marked `self`) and, per input topic, every
 * partition with its owner(s): `owners` empty = nobody owns it (a rebalance,
 * or an instance down), more than one = the description caught a hand-over.
 * Partitions 0..max seen per topic are listed, so a hole shows as unowned.
 */
export function clusterModel(status) {
  if (!status || !status.app_id) return {app: null, members: [], topics: [], unowned: 0, contested: 0};
  const members = (status.members || []).map((m) => ({
    instance: m.instance_id || m.client_id || m.member_id,
    host: m.host || '',
    memberId: m.member_id || '',
    self: m.member_id === status.member_id,
    partitions: (m.partitions || []).map((p) => ({topic: p.topic, partition: p.partition})),
  }));
  // Before the first description (or when it failed): at least this instance.
  if (!members.some((m) => m.self) && status.member_id) {
    members.unshift({instance: status.instance_id, host: '', memberId: status.member_id, self: true,
      partitions: (status.partitions || []).map((p) => ({topic: p.topic, partition: p.partition}))});
  }
  members.sort((a, b) => (b.self - a.self) || String(a.instance).localeCompare(String(b.instance)));
  const byTopic = new Map();
  for (const m of members) {
    for (const p of m.partitions) {
      if (!byTopic.has(p.topic)) byTopic.set(p.topic, new Map());
      const owners = byTopic.get(p.topic);
      if (!owners.has(p.partition)) owners.set(p.partition, []);
      owners.get(p.partition).push(m.instance);
    }
  }
  let unowned = 0;
  let contested = 0;
  const topics = [...byTopic.keys()].sort().map((topic) => {
    const owners = byTopic.get(topic);
    const max = Math.max(...owners.keys());
    const partitions = [];
    for (let p = 0; p <= max; ++p) {
      const o = owners.get(p) || [];
      if (o.length === 0) ++unowned;
      if (o.length > 1) ++contested;
      partitions.push({partition: p, owners: o});
    }
    return {topic, partitions};
  });
  return {
    app: status.app_id, instance: status.instance_id, state: status.group_state || '',
    members, topics, unowned, contested,
  };
}

/** A stable colour index per instance name (0..n-1), in the members' order. */
export function ownerColors(members) {
  const out = new Map();
  members.forEach((m, i) => out.set(m.instance, i % 8));
  return out;
}

/**
 * The partition shards' restores: "N partitions (C from the checkpoint, L from the changelog),
 * R records (M MB), last restore S s".
 */
export function restoreText(s) {
  const n = s.partitions_restored ?? 0;
  if (!n) return 'none';
  const mb = (s.restored_bytes ?? 0) / 1e6;
  const secs = s.last_restore_seconds ?? 0;
  const rate = secs > 0 ? `, last restore ${secs.toFixed(2)} s` : '';
  const sources = [];
  if (s.partitions_from_checkpoint) sources.push(`${s.partitions_from_checkpoint} from the checkpoint`);
  if (s.partitions_from_changelog) sources.push(`${s.partitions_from_changelog} from the changelog`);
  const from = sources.length ? ` (${sources.join(', ')})` : '';
  return `${n} partition${n === 1 ? '' : 's'}${from}, ${s.restored_records ?? 0} records (${mb.toFixed(1)} MB)${rate}`;
}
