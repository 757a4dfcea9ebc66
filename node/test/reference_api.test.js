'use strict';
// Code written for the reference runs on wattline with only the package name changed:
// the specification's collect-metrics.cjs, `collectResourceMetrics()` after
// `plugin.initialize`, module-level `collect()` as one series, `setGpuSource`, and the
// GPU group's shape without a backend.
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { test } = require('node:test');

const wattline = require('..');
const plugin = require('../plugin');
const { quietEnvironment, scratch } = require('./support');

const packageDirectory = path.resolve(__dirname, '..');

// The specification's "Collect One Snapshot" Node.js example, verbatim.
const REFERENCE_SNIPPET = `const { collectResourceMetrics } = require("nemo-relay-node");
const plugin = require("nemo-relay-node/plugin");

async function main() {
  const activation = await plugin.initialize({
    version: 1,
    components: [{ kind: "resource_metrics", enabled: true }],
  });
  try {
    const snapshot = await collectResourceMetrics();
    console.dir(snapshot, { depth: null });
  } finally {
    await activation.close();
  }
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
`;

/** Runs `source` as a CommonJS file in a project where `wattline` is this package. */
function runProgram(source) {
  const project = scratch();
  fs.mkdirSync(path.join(project, 'node_modules'));
  fs.symlinkSync(packageDirectory, path.join(project, 'node_modules', 'wattline'), 'dir');
  const file = path.join(project, 'program.cjs');
  fs.writeFileSync(file, source);
  return spawnSync(process.execPath, [file], { cwd: project, env: quietEnvironment(), encoding: 'utf8', timeout: 60_000 });
}

test("the reference's collect-metrics.cjs runs with only the package name changed", () => {
  const ours = REFERENCE_SNIPPET.replaceAll('nemo-relay-node', 'wattline');
  const child = runProgram(ours);
  assert.equal(child.status, 0, child.stderr);
  assert.match(child.stdout, /timestamp: '\d{4}-\d\d-\d\dT[\d:.]+Z'/, 'an ISO string timestamp');
  assert.match(child.stdout, /measurementScope: 'process_tree'/);
});

test('module-level collect() is one series: rates from the second call on; the process still exits', () => {
  const child = runProgram(`
    const wattline = require('wattline');
    const busy = (ms) => { const end = Date.now() + ms; while (Date.now() < end) Math.sqrt(Math.random()); };
    (async () => {
      const rates = [];
      for (let call = 0; call < 3; call += 1) {
        const snapshot = await wattline.collect();
        rates.push({
          cpu: snapshot.cpu.consumptionRate !== null,
          network: snapshot.network.system === null || snapshot.network.system.receiveThroughput !== null,
        });
        busy(300);
      }
      console.log(JSON.stringify(rates));
    })();`);
  assert.equal(child.status, 0, child.stderr);
  const noRate = { cpu: false, network: false };
  const withRate = { cpu: true, network: true };
  // The reference's rule: only a series' first sample lacks rates.
  assert.deepEqual(JSON.parse(child.stdout.trim()), [noRate, withRate, withRate]);
});

test('collectResourceMetrics() after plugin.initialize is one series and needs an active host', async () => {
  const config = { version: 1, components: [{ kind: 'resource_metrics', enabled: true }] };
  const activation = await plugin.initialize(config);
  try {
    assert.equal(activation.isActive, true);
    await assert.rejects(plugin.initialize(config), { code: 'WATTLINE_ERROR', message: /conflict/ });
    const first = await wattline.collectResourceMetrics();
    await new Promise((resolve) => setTimeout(resolve, 300));
    const second = await wattline.collectResourceMetrics();
    assert.equal(first.cpu.consumptionRate, null);
    assert.notEqual(second.cpu.consumptionRate, null);
    await wattline.flushTelemetry();
  } finally {
    await activation.close();
  }
  assert.equal(activation.isActive, false);
  await activation.close();
  await assert.rejects(wattline.collectResourceMetrics(), { message: /requires an active resource_metrics component/ });
  await assert.rejects(
    plugin.initialize({ version: 1, components: [{ kind: 'resource_metrics', config: { bogus: 1 } }] }),
    { code: 'WATTLINE_CONFIG', message: /components\[0\]\.config\.bogus/ },
  );
});

test('setGpuSource: a JavaScript source replaces selection; undefined turns GPU off', async () => {
  let calls = 0;
  const source = {
    name: 'fixed',
    async sample() {
      calls += 1;
      return [
        { index: 0, uuid: 'GPU-a', memoryUsed: 1024, utilization: 40, powerDraw: 250 },
        { index: 1, uuid: 'GPU-b', memoryUsed: 2.5, utilization: 0, powerDraw: 60 },
      ];
    },
  };
  try {
    wattline.setGpuSource(() => source);
    const pipeline = await wattline.Pipeline.start();
    const snapshot = await pipeline.collect();
    const report = await pipeline.shutdown();
    const devices = snapshot.gpu.deviceMetrics;
    assert.deepEqual(devices.map((device) => device.deviceIdentifier), ['GPU-a', 'GPU-b']);
    // MiB in, KiB out (the snapshot's default unit).
    assert.equal(devices[0].memoryUsed.value, 1024 * 1024);
    assert.equal(devices[1].memoryUsed.value, Math.floor(2.5 * 1024));
    assert.equal(devices[0].computeUtilization.value, 40);
    assert.ok(calls >= 1);
    assert.match(report.gpuSource || '', /fixed/);

    // A source that observes nothing: the reference's empty groups, not null.
    wattline.setGpuSource(() => ({ sample: async () => undefined }));
    const quiet = await wattline.Pipeline.start();
    const empty = await quiet.collect();
    await quiet.shutdown();
    assert.deepEqual(empty.gpu.deviceMetrics, []);
    assert.deepEqual(empty.gpu.processMetrics, []);

    wattline.setGpuSource(() => undefined);
    const off = await wattline.Pipeline.start();
    const none = await off.collect();
    await off.shutdown();
    assert.equal(none.gpu, null);
  } finally {
    wattline.setGpuSource(undefined);
  }
  assert.throws(() => wattline.setGpuSource(source), TypeError);
});
