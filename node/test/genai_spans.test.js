'use strict';
// OpenTelemetry GenAI spans become steps with no other code: the official SDK's tracer
// with `GenAISpanProcessor` from `wattline/spans`; each span carrying a
// `gen_ai.operation.name` is a step nested as the spans nest (through spans that are
// not steps); configurable by operations, a predicate and a weight attribute; under
// `wattline run` with no arguments. The SDK comes from NODE_PATH (scripts/test.sh
// installs it into .ci/node-otel).
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const path = require('node:path');
const { test } = require('node:test');

const api = require('@opentelemetry/api');
const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base');

const wattline = require('..');
const { GenAISpanProcessor } = require('../spans');
const { quietEnvironment, scopeStarts, scratch, wattlineBinary } = require('./support');

api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());

const packageDirectory = path.resolve(__dirname, '..');

/** A tracer whose spans go through `processor` and are kept in memory. */
function traced(processor) {
  const kept = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [processor, new SimpleSpanProcessor(kept)] });
  return { tracer: provider.getTracer('agent framework'), kept, provider };
}

/** An agent as a framework traces it (the same as python/tests/test_genai_spans.py). */
async function agentRun(tracer) {
  const span = (name, attributes, body) =>
    tracer.startActiveSpan(name, { attributes }, async (active) => {
      await body();
      active.end();
    });
  await span('invoke_agent planner', { 'gen_ai.operation.name': 'invoke_agent' }, async () => {
    await span('chat gpt-4o', { 'gen_ai.operation.name': 'chat', 'gen_ai.request.max_tokens': 300 }, async () => {});
    await span('GET /search', {}, () => span('execute_tool search', { 'gen_ai.operation.name': 'execute_tool' }, async () => {}));
  });
  await span('render page', {}, async () => {});
}

test('GenAI spans become nested steps, weighted by an attribute', async () => {
  const atofDir = scratch();
  const pipeline = await wattline.Pipeline.start({ gpu: false, atofDir });
  const processor = new GenAISpanProcessor({ pipeline, weightAttribute: 'gen_ai.request.max_tokens' });
  const { tracer, kept, provider } = traced(processor);
  await agentRun(tracer);
  await provider.forceFlush();
  const report = await pipeline.shutdown();
  assert.equal(kept.getFinishedSpans().length, 5);
  const found = scopeStarts(atofDir);
  assert.deepEqual(Object.keys(found).sort(), ['chat gpt-4o', 'execute_tool search', 'invoke_agent planner']);
  const planner = found['invoke_agent planner'].uuid;
  assert.equal(found['chat gpt-4o'].parent_uuid, planner);
  assert.equal(found['execute_tool search'].parent_uuid, planner, 'through the HTTP span');
  const weight = (name) => report.agentScopes.find((step) => step.name === name).weight;
  assert.equal(weight('chat gpt-4o'), 300);
  assert.equal(weight('invoke_agent planner'), null);
  assert.ok(report.agentScopes.every((step) => step.endedAt instanceof Date), 'every step ended');
});

test('operations and a predicate choose the steps; a stopped pipeline harms no span', async () => {
  const chatOnly = scratch();
  let pipeline = await wattline.Pipeline.start({ gpu: false, atofDir: chatOnly });
  let traces = traced(new GenAISpanProcessor({ pipeline, operations: ['chat'] }));
  await agentRun(traces.tracer);
  await traces.provider.forceFlush();
  await pipeline.shutdown();
  assert.deepEqual(Object.keys(scopeStarts(chatOnly)), ['chat gpt-4o']);

  const picked = scratch();
  pipeline = await wattline.Pipeline.start({ gpu: false, atofDir: picked });
  traces = traced(new GenAISpanProcessor({ pipeline, predicate: (span) => span.name.startsWith('render') }));
  await agentRun(traces.tracer);
  await traces.provider.forceFlush();
  await pipeline.shutdown();
  assert.deepEqual(Object.keys(scopeStarts(picked)), ['render page']);

  // Stopped: the spans go on; the steps are logged and skipped.
  traces = traced(new GenAISpanProcessor({ pipeline }));
  await agentRun(traces.tracer);
  await traces.provider.forceFlush();
  assert.equal(traces.kept.getFinishedSpans().length, 5);
  assert.throws(() => new GenAISpanProcessor({ pipeline: 'not a pipeline' }), /must be a wattline Pipeline/);
});

test('a model call served elsewhere gets an estimate from its tokens, apart from the measured figures', async () => {
  const pipeline = await wattline.Pipeline.start({ gpu: false });
  const { tracer, provider } = traced(new GenAISpanProcessor({ pipeline }));
  const call = (name, model, address, input, output) =>
    tracer.startActiveSpan(name, { attributes: { 'gen_ai.operation.name': 'chat', 'gen_ai.system': 'anthropic', 'gen_ai.request.model': model } }, (span) => {
      // As instrumentations do: the server and the usage are set when the answer came.
      span.setAttributes({ 'server.address': address, 'gen_ai.usage.input_tokens': input, 'gen_ai.usage.output_tokens': output });
      span.end();
    });
  call('chat haiku', 'claude-3-5-haiku-20241022', 'api.anthropic.com', 1000, 500);
  call('chat mystery', 'mystery-model', 'api.example.com', 10, 10);
  call('chat local', 'claude-3-5-haiku-20241022', 'localhost', 1000, 500);
  await provider.forceFlush();
  const report = await pipeline.shutdown();
  const step = (name) => report.agentScopes.find((scope) => scope.name === name);
  // The shipped row (config/data/remote_model_energy.toml: output 2.6 to 5.4 Wh per
  // 1,000 tokens, input 0.026 to 2.0): 1.0·0.026 + 0.5·2.6 Wh and 1.0·2.0 + 0.5·5.4 Wh.
  const { estimate } = step('chat haiku').remoteCall;
  assert.ok(Math.abs(estimate.lowKwh - 1.326e-3) < 1e-15, `${estimate.lowKwh}`);
  assert.ok(Math.abs(estimate.highKwh - 4.7e-3) < 1e-15, `${estimate.highKwh}`);
  assert.deepEqual([estimate.method, estimate.estimator], ['estimated', 'factor-table']);
  assert.equal(step('chat mystery').remoteCall.estimate, undefined);
  assert.equal(step('chat local').remoteCall, undefined);
  assert.deepEqual(report.remoteEstimates.modelsWithoutEstimate, ['mystery-model']);
  assert.equal(report.remoteEstimates.calls, 2);
});

test('with no arguments it uses the pipeline of wattline run', () => {
  const atof = path.join(scratch(), 'runs');
  const program = `
    const api = require('@opentelemetry/api');
    const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
    const { BasicTracerProvider } = require('@opentelemetry/sdk-trace-base');
    const { GenAISpanProcessor } = require(${JSON.stringify(path.join(packageDirectory, 'spans.js'))});
    api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    const provider = new BasicTracerProvider({ spanProcessors: [new GenAISpanProcessor()] });
    const tracer = provider.getTracer('agent framework');
    (async () => {
      await tracer.startActiveSpan('invoke_agent planner', { attributes: { 'gen_ai.operation.name': 'invoke_agent' } }, async (planner) => {
        await tracer.startActiveSpan('chat gpt-4o', { attributes: { 'gen_ai.operation.name': 'chat' } }, async (chat) => chat.end());
        planner.end();
      });
      await provider.shutdown();
      console.log('traced');
    })();`;
  const run = spawnSync(
    wattlineBinary,
    ['run', '--quiet', '--gpus', 'none', '--interval', '100', '--atof', atof, '--', process.execPath, '-e', program],
    { env: quietEnvironment({ NODE_PATH: process.env.NODE_PATH }), encoding: 'utf8', timeout: 60_000 },
  );
  assert.equal(run.status, 0, run.stderr);
  assert.match(run.stdout, /^traced/);
  const found = scopeStarts(atof);
  assert.equal(found['chat gpt-4o'].parent_uuid, found['invoke_agent planner'].uuid);
  assert.deepEqual(found['chat gpt-4o'].attributes, ['remote']);
});
