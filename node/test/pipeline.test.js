'use strict';
// The pipeline: agent scopes get energy from a stand-in nvidia-smi; the report is
// camelCase with the CLI's table as toString(); start and stop many times, no leaks.
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { test } = require('node:test');

const wattline = require('..');
const { pipelineOnStandInGpu } = require('./support');

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

test('an agent scope gets its energy from the GPU', async () => {
  const pipeline = await pipelineOnStandInGpu(wattline);
  const step = await pipeline.agentScope('planner');
  await sleep(600);
  await step.end();
  await step.end(); // a second end does nothing
  const report = await pipeline.shutdown();
  assert.equal(report.gpuSource, 'nvidia-smi');
  const planner = report.agentScopes.find((scope) => scope.name === 'planner');
  const seconds = (planner.gpuEnergyKwh * 3_600_000) / 250;
  assert.ok(seconds > 0.4 && seconds < 1.5, `${seconds} s at 250 W`);
  assert.ok(planner.endedAt instanceof Date && planner.endedAt > planner.startedAt);
  assert.ok(report.total.gpuEnergyKwh > planner.gpuEnergyKwh);
  assert.equal(await pipeline.shutdown(), report, 'the same report again');
});

test('concurrent steps divide the energy they share by weight', async () => {
  const pipeline = await pipelineOnStandInGpu(wattline);
  const [heavy, light] = await Promise.all([
    pipeline.agentScope('heavy', { weight: 3 }),
    pipeline.agentScope('light', { weight: 1 }),
  ]);
  await sleep(600);
  await Promise.all([heavy.end(), light.end()]);
  await assert.rejects(pipeline.agentScope('bad', { weight: -1 }), /weight/);
  const report = await pipeline.shutdown();
  const step = (name) => report.agentScopes.find((scope) => scope.name === name);
  assert.equal(step('heavy').weight, 3);
  // Live together: 3 : 1 of what they shared, while each window holds all of it.
  const ratio = step('heavy').attributedGpuEnergyKwh / step('light').attributedGpuEnergyKwh;
  assert.ok(ratio > 2.7 && ratio < 3.3, `ratio ${ratio}`);
  const shared = step('heavy').attributedGpuEnergyKwh + step('light').attributedGpuEnergyKwh;
  assert.ok(shared < 1.1 * Math.min(step('heavy').gpuEnergyKwh, step('light').gpuEnergyKwh));
  const gpu = report.domains.find((domain) => domain.domain === 'gpu');
  assert.ok(Math.abs(shared + gpu.unattributedKwh - gpu.energyKwh) <= 1e-9 * gpu.energyKwh);
  assert.equal(report.scopeAttribution, 'process-share-then-weight');
});

test('the report: camelCase, every JSON field, the CLI table', async () => {
  const pipeline = await wattline.Pipeline.start({ gpu: false });
  const step = await pipeline.agentScope('step');
  await step.end();
  const report = await pipeline.flush();
  await pipeline.shutdown();
  const json = report.toJSON();
  for (const key of Object.keys(json)) assert.ok(wattline.toCamel(key) in report, key);
  assert.equal(report.costPerKwh.origin.kind, 'default');
  assert.ok(report.startedAt instanceof Date);
  const table = String(report);
  assert.match(table, /^wattline energy report/);
  assert.match(table, /agent step/);
});

test('collect in a pipeline has a rate on its second sample', async () => {
  const pipeline = await wattline.Pipeline.start({ gpu: false });
  const first = await pipeline.collect();
  const end = Date.now() + 200;
  while (Date.now() < end) Math.sqrt(Math.random());
  const second = await pipeline.collect();
  await pipeline.shutdown();
  assert.equal(first.cpu.consumptionRate, null);
  assert.equal(second.cpu.consumptionRate.unit, 'logical_processors');
});

test('await using ends a step and stops a pipeline', { skip: !Symbol.asyncDispose && 'Symbol.asyncDispose needs Node 22+' }, async () => {
  const pipeline = await wattline.Pipeline.start({ gpu: false });
  const step = await pipeline.agentScope('disposed');
  await step[Symbol.asyncDispose]();
  assert.ok(step.ended);
  const report = await pipeline[Symbol.asyncDispose]();
  assert.deepEqual(report.agentScopes.map((scope) => scope.name), ['disposed']);
});

test('start and stop many times in one process leaks no thread or descriptor', async () => {
  const threads = () => fs.readdirSync('/proc/self/task').length;
  const descriptors = () => fs.readdirSync('/proc/self/fd').length;
  for (let i = 0; i < 3; i += 1) await (await wattline.Pipeline.start({ gpu: false, intervalMs: 50 })).shutdown();
  const before = [threads(), descriptors()];
  for (let i = 0; i < 15; i += 1) {
    const pipeline = await wattline.Pipeline.start({ gpu: false, intervalMs: 50 });
    const step = await pipeline.agentScope('again');
    await step.end();
    assert.ok(await pipeline.shutdown());
  }
  const after = [threads(), descriptors()];
  assert.ok(after[0] <= before[0] + 2, `threads ${before[0]} -> ${after[0]}`);
  assert.ok(after[1] <= before[1] + 2, `descriptors ${before[1]} -> ${after[1]}`);
});
