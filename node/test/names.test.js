'use strict';
// The snapshot's JavaScript shape against the snake_case JSON of `wattline collect`:
// one naming rule, both directions; bigint exactly above Number.MAX_SAFE_INTEGER.
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const { test } = require('node:test');

const wattline = require('..');
const { quietEnvironment, wattlineBinary } = require('./support');

/** Every key path of a decoded snapshot, measurements as leaves. */
function paths(value, rename, prefix = '', out = new Set()) {
  if (Array.isArray(value)) {
    if (value.length) paths(value[0], rename, `${prefix}[]`, out);
    return out;
  }
  if (value && typeof value === 'object' && !(value instanceof Date)) {
    for (const [key, item] of Object.entries(value)) {
      const name = rename(key);
      out.add(`${prefix}.${name}`);
      if (key !== 'fieldSampledProcesses' && key !== 'field_sampled_processes') paths(item, rename, `${prefix}.${name}`, out);
    }
  }
  return out;
}

function cliCollect() {
  return JSON.parse(
    execFileSync(wattlineBinary, ['collect', '--scope', 'process-tree', '--pid', String(process.pid)], {
      env: quietEnvironment(),
      encoding: 'utf8',
    }),
  );
}

test('every camelCase name maps to the CLI snake_case name and back', async () => {
  const snapshot = await wattline.collect();
  const cli = cliCollect();
  const ours = paths(snapshot, wattline.toSnake);
  assert.deepEqual([...ours].sort(), [...paths(cli, (name) => name)].sort());
  for (const name of paths(cli, (key) => key)) {
    for (const part of name.split('.').filter(Boolean)) {
      const key = part.replace('[]', '');
      assert.equal(wattline.toSnake(wattline.toCamel(key)), key, key);
    }
  }
  assert.ok(snapshot.cpu.totalTime, 'camelCase property');
  assert.equal(snapshot.cpu.total_time, undefined, 'no snake_case property');
  assert.ok('cpu.total_time' in snapshot.processSampling.fieldSampledProcesses, 'data keys are not renamed');
});

test('types: the spec\'s ISO string timestamp (a Date beside it), string enums, numbers', async () => {
  const snapshot = await wattline.collect();
  assert.equal(typeof snapshot.timestamp, 'string');
  assert.match(snapshot.timestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
  assert.ok(snapshot.timestampDate instanceof Date);
  assert.equal(snapshot.timestampDate.getTime(), Date.parse(snapshot.timestamp));
  assert.ok(!Object.keys(snapshot).includes('timestampDate'), 'not a field of the snapshot');
  assert.equal(snapshot.measurementScope, 'process_tree');
  assert.equal(snapshot.cpu.totalTime.unit, 'milliseconds');
  assert.equal(typeof snapshot.cpu.totalTime.value, 'number');
});

test('toJSON gives the snake_case JSON of wattline collect', async () => {
  // The first sample of a series, as the CLI's (module-level collect() continues one).
  const pipeline = await wattline.Pipeline.start();
  const snapshot = await pipeline.collect();
  await pipeline.shutdown();
  const json = JSON.parse(JSON.stringify(snapshot));
  const cli = cliCollect();
  assert.deepEqual([...paths(json, (n) => n)].sort(), [...paths(cli, (n) => n)].sort());
  assert.equal(json.timestamp, snapshot.toJSON().timestamp);
  assert.match(json.timestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
});

test('integers are numbers up to MAX_SAFE_INTEGER and bigints above it', () => {
  const decoded = wattline._decode(
    JSON.stringify({ at_the_line: 9007199254740991, above: 1 }).replace('"above":1', '"above":9007199254740992'),
  );
  assert.equal(decoded.atTheLine, Number.MAX_SAFE_INTEGER);
  assert.equal(typeof decoded.atTheLine, 'number');
  assert.equal(decoded.above, 9007199254740992n);
  assert.equal(typeof decoded.above, 'bigint');
  const top = wattline._decode('{"value": 18446744073709551615}');
  assert.equal(top.value, 18446744073709551615n, 'u64::MAX exactly');
  const negative = wattline._decode('{"value": -9007199254740993}');
  assert.equal(negative.value, -9007199254740993n);
  const lowest = wattline._decode('{"safe": -9007199254740991, "past": -9007199254740992}');
  assert.equal(lowest.safe, -Number.MAX_SAFE_INTEGER);
  assert.equal(typeof lowest.safe, 'number');
  assert.equal(lowest.past, -9007199254740992n);
  assert.equal(typeof lowest.past, 'bigint');
});
