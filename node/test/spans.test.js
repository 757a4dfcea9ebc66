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

const { quietEnvironment, wattlineBinary } = require('./support');

const packageDirectory = path.resolve(__dirname, '..');
const CALLER = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

// --- the protobuf wire format, for the fields of opentelemetry/proto/trace/v1 used here:
// ExportTraceServiceRequest.resource_spans = 1; ResourceSpans.scope_spans = 2;
// ScopeSpans.spans = 2; Span.trace_id = 1, span_id = 2, parent_span_id = 4, name = 5.

/** Each field of a message: [number, wire type, value (Buffer for length-delimited)]. */
function fields(buffer) {
  const out = [];
  let offset = 0;
  const varint = () => {
    let value = 0n;
    let shift = 0n;
    for (;;) {
      const byte = buffer[offset++];
      value |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return value;
      shift += 7n;
    }
  };
  while (offset < buffer.length) {
    const key = Number(varint());
    const [number, type] = [key >> 3, key & 7];
    if (type === 0) out.push([number, type, varint()]);
    else if (type === 1) { out.push([number, type, buffer.subarray(offset, offset + 8)]); offset += 8; }
    else if (type === 5) { out.push([number, type, buffer.subarray(offset, offset + 4)]); offset += 4; }
    else if (type === 2) {
      const length = Number(varint());
      out.push([number, type, buffer.subarray(offset, offset + length)]);
      offset += length;
    } else throw new Error(`wire type ${type}`);
  }
  return out;
}

const field = (message, number) => fields(message).filter(([n]) => n === number).map(([, , v]) => v);

function spansOf(requestBody) {
  return field(requestBody, 1)
    .flatMap((resourceSpans) => field(resourceSpans, 2))
    .flatMap((scopeSpans) => field(scopeSpans, 2))
    .map((span) => ({
      traceId: (field(span, 1)[0] || Buffer.alloc(0)).toString('hex'),
      spanId: (field(span, 2)[0] || Buffer.alloc(0)).toString('hex'),
      parentSpanId: (field(span, 4)[0] || Buffer.alloc(0)).toString('hex'),
      name: (field(span, 5)[0] || Buffer.alloc(0)).toString('utf8'),
    }));
}

/** An OTLP/HTTP receiver keeping the spans of every trace export. */
async function receiver() {
  const spans = [];
  const server = http.createServer((request, response) => {
    const chunks = [];
    request.on('data', (chunk) => chunks.push(chunk));
    request.on('end', () => {
      if (request.url === '/v1/traces') spans.push(...spansOf(Buffer.concat(chunks)));
      response.writeHead(200, { 'content-type': 'application/x-protobuf' });
      response.end();
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { spans, url: `http://127.0.0.1:${server.address().port}`, close: () => server.close() };
}

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
