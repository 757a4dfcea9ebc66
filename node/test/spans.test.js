'use strict';
// A step's span in the caller's trace: with spans exported, a step started while an
// `@opentelemetry/api` span is active is that span's child, in process and under
// `wattline run`; an explicit `traceparent` wins. The spans arrive at an OTLP/HTTP
// receiver here. The OpenTelemetry packages come from NODE_PATH (scripts/test.sh
// installs them into .ci/node-otel).
const assert = require('node:assert/strict');
const { spawnSync, spawn } = require('node:child_process');
const http = require('node:http');
const path = require('node:path');
const { test } = require('node:test');

const { quietEnvironment, receiver, wattlineBinary } = require('./support');

const packageDirectory = path.resolve(__dirname, '..');
const CALLER = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

/** A configuration sending steps' spans (with energy) to `collector`, as JSON. */
const spansTo = (collector) =>
  JSON.stringify({
    version: 1,
    components: [
      { kind: 'energy' },
      { kind: 'opentelemetry', config: { spans: true, endpoints: [{ endpoint: collector.url, transport: 'http_binary' }] } },
    ],
  });

const byName = (spans, name) => {
  const found = spans.filter((span) => span.name === name);
  assert.equal(found.length, 1, JSON.stringify(spans));
  return found[0];
};

// The program under test: the official SDK's tracer, a span active while steps start.
const PROGRAM = (body) => `
  const wattline = require(${JSON.stringify(packageDirectory)});
  const api = require('@opentelemetry/api');
  const { BasicTracerProvider } = require('@opentelemetry/sdk-trace-base');
  const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
  api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const tracer = new BasicTracerProvider().getTracer('agent');
  (async () => {
    const caller = await tracer.startActiveSpan('handle request', async (span) => {
      ${body}
      span.end();
      return span.spanContext();
    });
    console.log(caller.traceId, caller.spanId);
  })();`;

function runNode(program, environment) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['-e', program], { env: environment });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => { stdout += chunk; });
    child.stderr.on('data', (chunk) => { stderr += chunk; });
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

test('a step is a child of the active OpenTelemetry span in process', async () => {
  const collector = await receiver();
  const config = spansTo(collector);
  const program = PROGRAM(`
      const pipeline = await wattline.Pipeline.start({ gpu: false, config: ${config} });
      const plan = await pipeline.agentScope('plan');
      await plan.end();
      const act = await pipeline.agentScope('act', { traceparent: '${CALLER}' });
      await act.end();
      await pipeline.shutdown();`);
  const run = await runNode(program, quietEnvironment());
  collector.close();
  assert.equal(run.status, 0, run.stderr);
  const [traceId, spanId] = run.stdout.trim().split(' ');
  const plan = byName(collector.spans, 'plan');
  assert.equal(plan.traceId, traceId);
  assert.equal(plan.parentSpanId, spanId);
  const act = byName(collector.spans, 'act');
  assert.equal(act.traceId, '4bf92f3577b34da6a3ce929d0e0e4736');
  assert.equal(act.parentSpanId, '00f067aa0ba902b7');
});

test("a nested step is a child of its parent step's span unless a span opened between", async () => {
  const collector = await receiver();
  const config = spansTo(collector);
  const program = PROGRAM(`
      const pipeline = await wattline.Pipeline.start({ gpu: false, config: ${config} });
      await pipeline.withAgentScope('request', async () => {
        await pipeline.withAgentScope('summarize', () => {});
        await tracer.startActiveSpan('call tool', async (toolCall) => {
          await pipeline.withAgentScope('tool', () => {});
          console.log(toolCall.spanContext().spanId);
          toolCall.end();
        });
      });
      await pipeline.shutdown();`);
  const run = await runNode(program, quietEnvironment());
  collector.close();
  assert.equal(run.status, 0, run.stderr);
  const toolCallSpanId = run.stdout.trim().split('\n')[0];
  const [request, summarize, tool] = ['request', 'summarize', 'tool'].map((name) => byName(collector.spans, name));
  assert.equal(summarize.traceId, request.traceId);
  assert.equal(summarize.parentSpanId, request.spanId);
  // A span the program opened inside the parent step is the nearer parent.
  assert.equal(tool.parentSpanId, toolCallSpanId);
});

test('under wattline run the step joins the program trace', async () => {
  const collector = await receiver();
  const program = PROGRAM(`
      const step = await wattline.agentScope('planner');
      await step.end();`);
  const run = await new Promise((resolve) => {
    const child = spawn(
      wattlineBinary,
      ['run', '--quiet', '--report', 'json', '--otlp', `${collector.url}/v1/metrics`, '--otlp-spans', '--', process.execPath, '-e', program],
      { env: quietEnvironment() },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => { stdout += chunk; });
    child.stderr.on('data', (chunk) => { stderr += chunk; });
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
  collector.close();
  assert.equal(run.status, 0, run.stderr);
  const [traceId, spanId] = run.stdout.split('\n')[0].trim().split(' ');
  const planner = byName(collector.spans, 'planner');
  assert.equal(planner.traceId, traceId);
  assert.equal(planner.parentSpanId, spanId);
});
