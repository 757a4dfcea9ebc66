'use strict';
// Under `wattline run`, module-level agentScope marks the step in the run's pipeline;
// and a program whose pipeline is stopped exits on its own.
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { test } = require('node:test');

const { quietEnvironment, scratch, standInNvidiaSmi, wattlineBinary } = require('./support');

const packageDirectory = path.resolve(__dirname, '..');

test('steps land in the pipeline of wattline run', () => {
  const smi = standInNvidiaSmi();
  const atof = path.join(scratch(), 'runs');
  const program = `
    const wattline = require(${JSON.stringify(packageDirectory)});
    (async () => {
      if (!wattline.underWattlineRun()) throw new Error('not under run');
      const step = await wattline.agentScope('planner');
      await new Promise((resolve) => setTimeout(resolve, 500));
      await step.end();
      console.log('steps done');
    })();`;
  const run = spawnSync(
    wattlineBinary,
    ['run', '--quiet', '--interval', '100', '--report', 'json', '--atof', atof, '--', process.execPath, '-e', program],
    { env: quietEnvironment({ PATH: smi.path, GENAI_GPU_COLLECTION_INTERVAL: '0.1' }), encoding: 'utf8', timeout: 60_000 },
  );
  assert.equal(run.status, 0, run.stderr);
  assert.match(run.stdout, /^steps done/);
  const report = JSON.parse(run.stdout.slice(run.stdout.indexOf('{')));
  const planner = report.agent_scopes.find((scope) => scope.name === 'planner');
  const seconds = (planner.gpu_energy_kwh * 3_600_000) / 250;
  assert.ok(seconds > 0.3 && seconds < 1.5, `${seconds} s`);
  const events = fs
    .readdirSync(atof)
    .flatMap((name) => fs.readFileSync(path.join(atof, name), 'utf8').trim().split('\n'))
    .map((line) => JSON.parse(line));
  const start = events.find((event) => event.kind === 'scope' && event.name === 'planner');
  assert.deepEqual(start.attributes, ['remote']);
});

test('a process exits normally once its pipeline is stopped', () => {
  const program = `
    const wattline = require(${JSON.stringify(packageDirectory)});
    (async () => {
      const pipeline = await wattline.Pipeline.start({ gpu: false, intervalMs: 100 });
      await pipeline.collect();
      await pipeline.shutdown();
      console.log('stopped');
    })();`;
  const started = Date.now();
  const child = spawnSync(process.execPath, ['-e', program], { env: quietEnvironment(), encoding: 'utf8', timeout: 30_000 });
  assert.equal(child.status, 0, child.stderr);
  assert.equal(child.stdout.trim(), 'stopped');
  assert.ok(Date.now() - started < 20_000, 'no handle kept the event loop alive');
});
