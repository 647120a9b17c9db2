// Unit tests of the Cluster view's model (node --test).
import test from 'node:test';
import assert from 'node:assert/strict';
import {clusterModel, ownerColors, restoreText} from '../src/cluster_model.js';

const part = (topic, partition) => ({topic, partition});

test('a server outside an application has no model', () => {
  assert.equal(clusterModel({app_id: null}).app, null);
  assert.equal(clusterModel(null).app, null);
});

test('members come from the group description, this instance first, and every partition has its owner', () => {
  const m = clusterModel({
    app_id: 'orders-app', instance_id: 'node-2', member_id: 'b', group_state: 'Stable', partitions: [],
    members: [
      {member_id: 'a', instance_id: 'node-1', host: '/127.0.0.1', partitions: [part('orders', 0), part('orders', 1)]},
      {member_id: 'b', instance_id: 'node-2', host: '/127.0.0.1', partitions: [part('orders', 2), part('orders', 3)]},
    ],
  });
  assert.equal(m.app, 'orders-app');
  assert.deepEqual(m.members.map((x) => [x.instance, x.self]), [['node-2', true], ['node-1', false]]);
  assert.deepEqual(m.topics.map((t) => t.topic), ['orders']);
  assert.deepEqual(m.topics[0].partitions.map((p) => p.owners), [['node-1'], ['node-1'], ['node-2'], ['node-2']]);
  assert.equal(m.unowned, 0);
  assert.equal(m.contested, 0);
  const colors = ownerColors(m.members);
  assert.notEqual(colors.get('node-1'), colors.get('node-2'));
});

test('a hole in the assignment shows as unowned, a partition held twice as contested', () => {
  const m = clusterModel({
    app_id: 'a', instance_id: 'n1', member_id: 'x',
    members: [
      {member_id: 'x', instance_id: 'n1', partitions: [part('t', 0), part('t', 3)]},
      {member_id: 'y', instance_id: 'n2', partitions: [part('t', 3)]},
    ],
  });
  assert.deepEqual(m.topics[0].partitions.map((p) => p.owners.length), [1, 0, 0, 2]);
  assert.equal(m.unowned, 2);
  assert.equal(m.contested, 1);
});

test('before the group is described, this instance shows with its own partitions', () => {
  const m = clusterModel({app_id: 'a', instance_id: 'n1', member_id: 'x', members: [],
    partitions: [part('t', 1)]});
  assert.equal(m.members.length, 1);
  assert.ok(m.members[0].self);
  assert.deepEqual(m.topics[0].partitions.map((p) => p.owners), [[], ['n1']]);
});

test('the restores of partition shards read as partitions, records, megabytes and the last one\'s time', () => {
  assert.equal(restoreText({}), 'none');
  assert.equal(restoreText({partitions_restored: 0, restored_records: 0}), 'none');
  assert.equal(restoreText({partitions_restored: 3, restored_records: 4491, restored_bytes: 250000,
    last_restore_seconds: 0.5}), '3 partitions, 4491 records (0.3 MB), last restore 0.50 s');
  assert.equal(restoreText({partitions_restored: 1, restored_records: 10, restored_bytes: 0}),
    '1 partition, 10 records (0.0 MB)');
  assert.equal(restoreText({partitions_restored: 4, partitions_from_checkpoint: 3, restored_records: 20,
    restored_bytes: 2000000}), '4 partitions (3 from the checkpoint), 20 records (2.0 MB)');
  assert.equal(restoreText({partitions_restored: 5, partitions_from_checkpoint: 1,
    partitions_from_changelog: 4, restored_records: 8, restored_bytes: 0}),
  '5 partitions (1 from the checkpoint, 4 from the changelog), 8 records (0.0 MB)');
});
