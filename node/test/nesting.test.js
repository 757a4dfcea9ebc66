'use strict';
// Nested steps as agents are written: a step started inside `withAgentScope` (or
// `step.run`) is its child, through promises, timers and callbacks; `{ parent }` wins;
// a parent includes its child's energy; and under `wattline run` module-level steps
// nest over the host endpoint.
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const path = require('node:path');
const { test } = require('node:test');

const wattline = require('..');
const { pipelineOnStandInGpu, quietEnvironment, scopeStarts, scratch, wattlineBinary } = require('./support');

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const packageDirectory = path.resolve(__dirname, '..');

test('a step started inside another is its child, through promises and callbacks', async () => {
  const atofDir = scratch();
  const pipeline = await wattline.Pipeline.start({ gpu: false, atofDir });
  const other = await wattline.Pipeline.start({ gpu: false });
  assert.equal(wattline.currentScope(), undefined);
  let request;
  const result = await pipeline.withAgentScope('request', async (step) => {
    request = step;
    assert.equal(wattline.currentScope(), step);
    await sleep(10);
    // Concurrent siblings, each its own promise chain.
    await Promise.all(['tool-a', 'tool-b'].map((name) => pipeline.withAgentScope(name, () => sleep(20))));
    // A callback scheduled inside the step.
    await new Promise((resolve) => {
      setTimeout(async () => {
        const later = await pipeline.agentScope('from-timer');
        await later.end();
        resolve();
      }, 5);
    });
    const plan = await pipeline.agentScope('plan');
    await plan.run(async () => {
      const lookup = await pipeline.agentScope('lookup');
      await lookup.end();
    });
    // Explicit: beside `plan`, though `plan` is current in that call.
    await plan.run(async () => (await pipeline.agentScope('explicit', { parent: step })).end());
    await plan.end();
    // The current step of another pipeline is no parent there.
    const elsewhere = await other.agentScope('elsewhere');
    await elsewhere.end();
    await assert.rejects(other.agentScope('refused', { parent: step }), /another pipeline/);
    return 'answered';
  });
  assert.equal(result, 'answered');
  assert.equal(wattline.currentScope(), undefined);
  assert.equal(request.ended, true, 'withAgentScope ends its step');
  await assert.rejects(pipeline.agentScope('late', { parent: request }), /has ended/);
  await other.shutdown();
  await pipeline.shutdown();

  const found = scopeStarts(atofDir);
  const uuid = (name) => found[name].uuid;
  assert.equal(uuid('request'), request.uuid);
  for (const child of ['tool-a', 'tool-b', 'from-timer', 'plan', 'explicit']) {
    assert.equal(found[child].parent_uuid, request.uuid, child);
  }
  assert.equal(found.lookup.parent_uuid, uuid('plan'));
  assert.notEqual(found.request.parent_uuid, request.uuid);
});

test("a parent's attributed energy includes its child's", async () => {
  // The stand-in draws a constant 250 W and names no processes: every joule of a
  // window goes to the innermost steps live in it, so a parent holding its child is
  // attributed its whole window, and the child its own.
  const pipeline = await pipelineOnStandInGpu(wattline, { intervalMs: 100 });
  await pipeline.withAgentScope('request', async () => {
    await sleep(300);
    await pipeline.withAgentScope('summarize', () => sleep(300));
  });
  const report = await pipeline.shutdown();
  const step = (name) => report.agentScopes.find((scope) => scope.name === name);
  const [request, summarize] = [step('request'), step('summarize')];
  assert.equal(summarize.parentUuid, request.uuid);
  const close = (a, b) => Math.abs(a - b) <= 1e-6 * Math.abs(b);
  assert.ok(close(request.attributedGpuEnergyKwh, request.gpuEnergyKwh), `${request.attributedGpuEnergyKwh} vs ${request.gpuEnergyKwh}`);
  assert.ok(close(summarize.attributedGpuEnergyKwh, summarize.gpuEnergyKwh));
  assert.ok(request.attributedGpuEnergyKwh > 1.5 * summarize.attributedGpuEnergyKwh);
});

test('a sibling overlapping the parent takes half of its own window from it', async () => {
  // Where steps overlap, attributed and window part: `other`, a top-level step, lies
  // wholly inside `request`, across the start of its child `summarize`. At every
  // instant of `other` one step of request's tree is innermost beside it, with equal
  // weights: `other` gets half its window, request's tree the rest of request's.
  const pipeline = await pipelineOnStandInGpu(wattline);
  // Started outside `request`: top-level.
  const other = (async () => {
    await sleep(150);
    await pipeline.withAgentScope('other', () => sleep(300));
  })();
  await pipeline.withAgentScope('request', async () => {
    await sleep(300);
    await pipeline.withAgentScope('summarize', () => sleep(300));
  });
  await other;
  const report = await pipeline.shutdown();
  const step = (name) => report.agentScopes.find((scope) => scope.name === name);
  const [request, summarize, sibling] = [step('request'), step('summarize'), step('other')];
  assert.notEqual(sibling.parentUuid, request.uuid);
  assert.ok(request.startedAt < sibling.startedAt && sibling.startedAt < summarize.startedAt);
  assert.ok(summarize.startedAt < sibling.endedAt && sibling.endedAt < request.endedAt, 'the schedule held');
  const close = (a, b) => Math.abs(a - b) <= 1e-6 * Math.abs(b);
  assert.ok(close(sibling.attributedGpuEnergyKwh, sibling.gpuEnergyKwh / 2), `${sibling.attributedGpuEnergyKwh} vs ${sibling.gpuEnergyKwh}`);
  assert.ok(close(request.attributedGpuEnergyKwh, request.gpuEnergyKwh - sibling.gpuEnergyKwh / 2));
  assert.ok(summarize.gpuEnergyKwh / 2 < summarize.attributedGpuEnergyKwh && summarize.attributedGpuEnergyKwh < summarize.gpuEnergyKwh);
});

test('module-level steps nest under wattline run', () => {
  const atof = path.join(scratch(), 'runs');
  const program = `
    const wattline = require(${JSON.stringify(packageDirectory)});
    const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
    (async () => {
      await wattline.withAgentScope('request', async (request) => {
        await wattline.withAgentScope('plan', () => sleep(50));
        await Promise.all(['tool-a', 'tool-b'].map((name) => wattline.withAgentScope(name, () => sleep(50))));
        const explicit = await wattline.agentScope('explicit', { parent: request });
        await explicit.end();
      });
      console.log('nested steps done');
    })();`;
  const run = spawnSync(
    wattlineBinary,
    ['run', '--quiet', '--gpus', 'none', '--interval', '100', '--atof', atof, '--', process.execPath, '-e', program],
    { env: quietEnvironment(), encoding: 'utf8', timeout: 60_000 },
  );
  assert.equal(run.status, 0, run.stderr);
  assert.match(run.stdout, /^nested steps done/);
  const found = scopeStarts(atof);
  for (const child of ['plan', 'tool-a', 'tool-b', 'explicit']) {
    assert.equal(found[child].parent_uuid, found.request.uuid, child);
    assert.deepEqual(found[child].attributes, ['remote']);
  }
  assert.notEqual(found.request.parent_uuid, found.request.uuid);
});
