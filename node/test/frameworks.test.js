'use strict';
// A real framework end to end: the `openai` package instrumented by
// `@opentelemetry/instrumentation-openai` calls a local OpenAI-compatible server inside
// an agent span; `GenAISpanProcessor` turns the GenAI spans into steps. The scope tree
// equals the span tree and every step has the GPU's energy. The packages come from
// NODE_PATH (scripts/test.sh installs them into .ci/node-otel).
const assert = require('node:assert/strict');
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const { test } = require('node:test');

const api = require('@opentelemetry/api');
const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const { OpenAIInstrumentation } = require('@opentelemetry/instrumentation-openai');

const wattline = require('..');
const { GenAISpanProcessor } = require('../spans');
const { pipelineOnStandInGpu, receiver, scratch } = require('./support');

api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());

const USAGE = { prompt_tokens: 12, completion_tokens: 2, total_tokens: 14 };

/** A local OpenAI-compatible server: chat completions (plain and streamed) and embeddings, with usage. */
async function fakeOpenAI() {
  const server = http.createServer((request, response) => {
    let body = '';
    request.on('data', (chunk) => { body += chunk; });
    request.on('end', () => {
      const asked = JSON.parse(body);
      if (request.url.endsWith('/embeddings')) {
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ object: 'list', data: [{ object: 'embedding', index: 0, embedding: [0.1, 0.2] }], model: asked.model, usage: { prompt_tokens: 3, total_tokens: 3 } }));
        return;
      }
      const base = { id: 'chatcmpl-1', created: 1, model: asked.model };
      if (asked.stream) {
        response.writeHead(200, { 'content-type': 'text/event-stream' });
        const chunk = (choices, extra = {}) => `data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices, ...extra })}\n\n`;
        response.write(chunk([{ index: 0, delta: { role: 'assistant', content: 'Hello' }, finish_reason: null }]));
        response.write(chunk([{ index: 0, delta: { content: ' there' }, finish_reason: 'stop' }]));
        response.write(chunk([], { usage: USAGE }));
        response.end('data: [DONE]\n\n');
        return;
      }
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ ...base, object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: 'Hello there' }, finish_reason: 'stop' }], usage: USAGE }));
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { baseURL: `http://127.0.0.1:${server.address().port}/v1`, close: () => server.close() };
}

test("the openai package's instrumented spans become steps, as its spans nest", async () => {
  const atofDir = scratch();
  const collector = await receiver();
  const config = {
    version: 1,
    components: [
      { kind: 'energy' },
      { kind: 'opentelemetry', config: { spans: true, endpoints: [{ endpoint: collector.url, transport: 'http_binary' }] } },
    ],
  };
  const pipeline = await pipelineOnStandInGpu(wattline, { atofDir, config });
  const kept = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new GenAISpanProcessor({ pipeline }), new SimpleSpanProcessor(kept)] });
  const instrumentation = new OpenAIInstrumentation();
  instrumentation.setTracerProvider(provider);
  // Its metric instruments, made in the base class's constructor, are reset by its own
  // class fields (0.21.0): made again here, or a streamed answer's usage throws.
  instrumentation.setMeterProvider(api.metrics.getMeterProvider());
  instrumentation.enable();
  const OpenAI = require('openai');
  const server = await fakeOpenAI();
  try {
    const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'not-a-key' });
    const tracer = provider.getTracer('agent');
    await tracer.startActiveSpan('invoke_agent support', { attributes: { 'gen_ai.operation.name': 'invoke_agent' } }, async (agent) => {
      const messages = [{ role: 'user', content: 'hi' }];
      const answer = await client.chat.completions.create({ model: 'gpt-4o-mini', messages });
      assert.equal(answer.choices[0].message.content, 'Hello there');
      const stream = await client.chat.completions.create({ model: 'gpt-4o-mini', messages, stream: true, stream_options: { include_usage: true } });
      let text = '';
      for await (const chunk of stream) text += (chunk.choices[0] && chunk.choices[0].delta.content) || '';
      assert.equal(text, 'Hello there');
      await client.embeddings.create({ model: 'text-embedding-3-small', input: 'hi' });
      agent.end();
    });
  } finally {
    instrumentation.disable();
    server.close();
  }
  await provider.forceFlush();
  const report = await pipeline.shutdown();

  const framework = kept.getFinishedSpans();
  const byId = new Map(framework.map((span) => [span.spanContext().spanId, span.name]));
  const parentOf = (span) => byId.get((span.parentSpanContext && span.parentSpanContext.spanId) || span.parentSpanId) || null;
  const spanTree = framework.map((span) => [span.name, parentOf(span)]).sort();
  assert.deepEqual(spanTree.map(([name]) => name), ['chat gpt-4o-mini', 'chat gpt-4o-mini', 'embeddings text-embedding-3-small', 'invoke_agent support']);
  const chat = framework.filter((span) => span.name === 'chat gpt-4o-mini');
  assert.ok(chat.every((span) => span.attributes['gen_ai.usage.output_tokens'] === USAGE.completion_tokens));

  // The scope tree is the span tree (every start event, by name and parent's name).
  const starts = [];
  for (const line of fs.readdirSync(atofDir).flatMap((name) => fs.readFileSync(path.join(atofDir, name), 'utf8').trim().split('\n'))) {
    const event = JSON.parse(line);
    if (event.kind === 'scope' && event.category === 'agent' && event.scope_category === 'start') starts.push(event);
  }
  const names = new Map(starts.map((event) => [event.uuid, event.name]));
  const scopeTree = starts.map((event) => [event.name, names.get(event.parent_uuid) || null]).sort();
  assert.deepEqual(scopeTree, spanTree);

  // Over OTLP: one wattline span per framework span, its child in the same trace, with
  // the GPU's energy.
  collector.close();
  const ours = new Map(collector.spans.map((span) => [span.parentSpanId, span]));
  assert.equal(collector.spans.length, framework.length);
  for (const span of framework) {
    const step = ours.get(span.spanContext().spanId);
    assert.ok(step, `a wattline span under ${span.name}`);
    assert.equal(step.name, span.name);
    assert.equal(step.traceId, span.spanContext().traceId);
    assert.ok(step.attributes['wattline.energy.window_gpu_joules'] > 0, span.name);
  }
  for (const step of report.agentScopes) assert.ok(step.gpuEnergyKwh > 0, `${step.name} has the GPU's energy`);

  // The instrumentation names the server (127.0.0.1): these model calls were served
  // on this machine, so they are measured and get no remote estimate.
  assert.ok(chat.every((span) => span.attributes['server.address'] === '127.0.0.1'));
  assert.ok(report.agentScopes.every((scope) => scope.remoteCall === undefined));
  assert.equal(report.remoteEstimates, undefined);
});
