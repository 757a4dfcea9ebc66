'use strict';
// Errors are Error subclasses with a code and the file/field/rule message.
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { test } = require('node:test');

const wattline = require('..');
const { scratch } = require('./support');

test('a bad plugins.toml names file, field and rule', async () => {
  const file = path.join(scratch(), 'plugins.toml');
  fs.writeFileSync(file, 'version = 1\n[[components]]\nkind = "resource_metrics"\n[components.config.polling]\ninterval_millis = 0\n');
  await assert.rejects(wattline.Pipeline.start({ config: file }), (error) => {
    assert.ok(error instanceof wattline.ConfigError && error instanceof wattline.WattlineError && error instanceof Error);
    assert.equal(error.code, 'WATTLINE_CONFIG');
    assert.ok(error.message.includes(file), error.message);
    assert.ok(error.message.includes('components[0].config.polling.interval_millis'), error.message);
    assert.ok(error.message.includes('greater than zero'), error.message);
    return true;
  });
});

test('an object config and the options are checked by the same rules', async () => {
  await assert.rejects(
    wattline.collect({ config: { version: 1, components: [{ kind: 'resource_metrics', config: { bogus: 1 } }] } }),
    { code: 'WATTLINE_CONFIG', message: /<config>: components\[0\]\.config\.bogus/ },
  );
  await assert.rejects(wattline.collect({ scope: 'everything' }), { code: 'WATTLINE_CONFIG', message: /scope: must be one of/ });
  await assert.rejects(wattline.Pipeline.start({ intervalMs: 0 }), { code: 'WATTLINE_CONFIG' });
  await assert.rejects(wattline.Pipeline.start({ otlpEndpoint: 'not a url' }), { code: 'WATTLINE_CONFIG', message: /otlp_endpoint/ });
  await assert.rejects(wattline.Pipeline.start({ intervalMs: -1 }), { code: 'WATTLINE_CONFIG', message: /intervalMs/ });
  await assert.rejects(wattline.collect({ nonsense: true }), { code: 'WATTLINE_CONFIG', message: /nonsense: unknown option/ });
  await assert.rejects(wattline.collect({ scope: 'process_tree', pid: 2 ** 31 - 1 }), { code: 'WATTLINE_ERROR', message: /cannot be measured/ });
  await assert.rejects(wattline.agentScope('  '), { code: 'WATTLINE_ERROR', message: /non-blank/ });
});

test('a stopped pipeline refuses calls', async () => {
  const pipeline = await wattline.Pipeline.start({ gpu: false });
  await pipeline.shutdown();
  await assert.rejects(pipeline.collect(), { code: 'WATTLINE_ERROR', message: /not running/ });
});

test("the README's example is the tour and it runs", () => {
  const { spawnSync } = require('node:child_process');
  const { quietEnvironment, repository } = require('./support');
  const tour = fs.readFileSync(path.join(repository, 'node', 'examples', 'tour.js'), 'utf8');
  assert.ok(fs.readFileSync(path.join(repository, 'README.md'), 'utf8').includes('```js\n' + tour + '```\n'));
  // `require('wattline')` resolves to this package, as after `npm install ./node`.
  const modules = scratch();
  fs.symlinkSync(path.join(repository, 'node'), path.join(modules, 'wattline'));
  const run = spawnSync(process.execPath, ['-e', tour], {
    env: quietEnvironment({ NODE_PATH: modules }),
    encoding: 'utf8',
    timeout: 60_000,
  });
  assert.equal(run.status, 0, run.stderr);
  assert.match(run.stdout, /wattline energy report/);
  assert.match(run.stdout, /\[ 'planner' \] USD/);
});
