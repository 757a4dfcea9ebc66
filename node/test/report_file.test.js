'use strict';
// An event file read back into the report object: the concurrent-steps fixture
// (tests/fixtures/concurrent_steps/, hand-worked figures in its expected.json) through
// reportFromAtof: each step's window and attributed figures, as the hand gives them.
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { test } = require('node:test');

const wattline = require('..');

const FIXTURE = path.join(__dirname, '..', '..', 'tests', 'fixtures', 'concurrent_steps');
const JOULES_PER_KWH = 3.6e6;
const kwh = (joules) => joules / JOULES_PER_KWH;

function fixtureRun(name) {
  const expected = JSON.parse(fs.readFileSync(path.join(FIXTURE, 'expected.json'), 'utf8'));
  return [expected, expected.runs.find((run) => run.name === name)];
}

function near(actual, expected, what) {
  assert.ok(
    Math.abs(actual - expected) <= 1e-9 * Math.max(Math.abs(expected), 1e-6),
    `${what}: ${actual} where the hand-worked figure is ${expected}`,
  );
}

test('each step has its window and its part', async () => {
  const [fixture, run] = fixtureRun('base');
  const report = await wattline.reportFromAtof(path.join(FIXTURE, run.file));
  assert.equal(report.currency, fixture.currency);
  assert.deepEqual(
    report.agentScopes.map((scope) => scope.name).sort(),
    run.steps.map((step) => step.name).sort(),
  );
  const price = fixture.cost_per_kwh;
  const intensity = fixture.gco2e_per_kwh;
  for (const step of run.steps) {
    const scope = report.agentScopes.find((entry) => entry.name === step.name);
    const window = step.window_gpu_joules + step.window_cpu_joules;
    const part = step.attributed_gpu_joules + step.attributed_cpu_joules;
    const figures = {
      gpuEnergyKwh: kwh(step.window_gpu_joules),
      energyKwh: kwh(window),
      cost: kwh(window) * price,
      co2Grams: kwh(window) * intensity,
      attributedGpuEnergyKwh: kwh(step.attributed_gpu_joules),
      attributedEnergyKwh: kwh(part),
      attributedCost: kwh(part) * price,
      attributedCo2Grams: kwh(part) * intensity,
    };
    for (const [field, value] of Object.entries(figures)) near(scope[field], value, `${step.name} ${field}`);
    assert.equal(scope.weight, step.weight);
    assert.equal(scope.processId, step.process);
    near((scope.endedAt - scope.startedAt) / 1000, step.to - step.from, `${step.name} duration`);
  }
  const gpu = report.domains.find((domain) => domain.domain === 'gpu');
  near(gpu.unattributedKwh, kwh(run.unattributed_gpu_joules), 'gpu unattributed');
  assert.match(String(report), /agent request/);
});

test('a folded step keeps its part', async () => {
  const [, run] = fixtureRun('base_folded');
  const report = await wattline.reportFromAtof(path.join(FIXTURE, run.file));
  assert.deepEqual(
    report.agentScopes.map((scope) => scope.name),
    run.steps.filter((step) => step.detailed).map((step) => step.name),
  );
  for (const step of run.steps.filter((entry) => !entry.detailed)) {
    const folded = report.foldedScopes.find((entry) => entry.name === step.name);
    assert.equal(folded.count, 1);
    near(folded.attributedEnergyKwh.sum, kwh(step.attributed_gpu_joules + step.attributed_cpu_joules), step.name);
  }
});

test('a file that cannot be read is named', async () => {
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'wattline-report-'));
  await assert.rejects(wattline.reportFromAtof(path.join(folder, 'missing.jsonl')), (error) => {
    assert.ok(error instanceof wattline.WattlineError, String(error));
    assert.match(error.message, /missing\.jsonl/);
    return true;
  });
  const broken = path.join(folder, 'broken.jsonl');
  fs.writeFileSync(broken, '{"kind": "mark"\n');
  await assert.rejects(wattline.reportFromAtof(broken), /broken\.jsonl/);
  await assert.rejects(wattline.reportFromAtof(42), TypeError);
});
