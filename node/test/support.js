'use strict';

// Shared by the tests: the built CLI, a stand-in nvidia-smi in the real CSV format, a
// home without the developer's configuration, and an OTLP/HTTP receiver of spans.
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');

const repository = path.resolve(__dirname, '..', '..');
const wattlineBinary = process.env.WATTLINE_BINARY || path.join(repository, 'target', 'debug', 'wattline');

// The same stand-in the Rust tests use (tests/support/mod.rs): one H200 at 250 W.
const FAKE_NVIDIA_SMI = `#!/bin/sh
case "$*" in
  *-L*) echo "GPU 0: NVIDIA H200 (UUID: GPU-3f2b9c1e-8a4d-4b7e-9c21-5d6e7f8a9b0c)";;
  *--loop-ms=*) while :; do echo "0, GPU-3f2b9c1e-8a4d-4b7e-9c21-5d6e7f8a9b0c, 250.00"; sleep 0.1; done;;
  *) echo "0, GPU-3f2b9c1e-8a4d-4b7e-9c21-5d6e7f8a9b0c, NVIDIA H200, 7, 3, 1377, 143771, 46, 250.00, 700.00, 1980, 3201, [N/A], P0, Not Active, Not Active, Not Active, Not Active, 0, 0, 250.00";;
esac
`;

function scratch() {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'wattline-node-'));
}

/** A directory holding the stand-in nvidia-smi, and PATH with it first. */
function standInNvidiaSmi() {
  const directory = scratch();
  const program = path.join(directory, 'nvidia-smi');
  fs.writeFileSync(program, FAKE_NVIDIA_SMI, { mode: 0o755 });
  return { directory, path: `${directory}${path.delimiter}${process.env.PATH}` };
}

/** An environment without the developer's plugins.toml or GENAI_* settings. */
function quietEnvironment(extra = {}) {
  const home = scratch();
  const environment = { ...process.env, HOME: home, XDG_CONFIG_HOME: path.join(home, 'xdg') };
  for (const name of Object.keys(environment)) if (name.startsWith('GENAI_') || name.startsWith('WATTLINE_HOST')) delete environment[name];
  return { ...environment, ...extra };
}

/** Each Agent scope's first start event in the event files of `directory`, by name. */
function scopeStarts(directory) {
  const found = {};
  for (const name of fs.readdirSync(directory).sort()) {
    for (const line of fs.readFileSync(path.join(directory, name), 'utf8').trim().split('\n')) {
      const event = JSON.parse(line);
      if (event.kind === 'scope' && event.category === 'agent' && event.scope_category === 'start') found[event.name] ??= event;
    }
  }
  return found;
}

/**
 * A pipeline of `wattline` (with `options`, polling every 100 ms by default) whose GPU
 * is the stand-in nvidia-smi (250 W): PATH and the GPU interval set only while it starts.
 */
async function pipelineOnStandInGpu(wattline, options = {}) {
  const smi = standInNvidiaSmi();
  const saved = { PATH: process.env.PATH, interval: process.env.GENAI_GPU_COLLECTION_INTERVAL };
  process.env.PATH = smi.path;
  process.env.GENAI_GPU_COLLECTION_INTERVAL = '0.1';
  try {
    return await wattline.Pipeline.start({ intervalMs: 100, ...options });
  } finally {
    process.env.PATH = saved.PATH;
    if (saved.interval === undefined) delete process.env.GENAI_GPU_COLLECTION_INTERVAL;
    else process.env.GENAI_GPU_COLLECTION_INTERVAL = saved.interval;
  }
}

// --- the protobuf wire format, for the fields of opentelemetry/proto/trace/v1 used here:
// ExportTraceServiceRequest.resource_spans = 1; ResourceSpans.scope_spans = 2;
// ScopeSpans.spans = 2; Span.trace_id = 1, span_id = 2, parent_span_id = 4, name = 5,
// attributes = 9; KeyValue.key = 1, value = 2; AnyValue.string_value = 1, double_value = 4.
// (The official JavaScript OTLP packages encode requests but do not decode them.)

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

/** A KeyValue as [key, its string or double value (undefined for other kinds)]. */
function attributeOf(keyValue) {
  const key = field(keyValue, 1)[0].toString('utf8');
  const value = field(keyValue, 2)[0] || Buffer.alloc(0);
  const text = field(value, 1)[0];
  const double = field(value, 4)[0];
  return [key, text !== undefined ? text.toString('utf8') : double !== undefined ? double.readDoubleLE(0) : undefined];
}

function spansOf(requestBody) {
  return field(requestBody, 1)
    .flatMap((resourceSpans) => field(resourceSpans, 2))
    .flatMap((scopeSpans) => field(scopeSpans, 2))
    .map((span) => ({
      traceId: (field(span, 1)[0] || Buffer.alloc(0)).toString('hex'),
      spanId: (field(span, 2)[0] || Buffer.alloc(0)).toString('hex'),
      parentSpanId: (field(span, 4)[0] || Buffer.alloc(0)).toString('hex'),
      name: (field(span, 5)[0] || Buffer.alloc(0)).toString('utf8'),
      attributes: Object.fromEntries(field(span, 9).map(attributeOf)),
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

module.exports = { pipelineOnStandInGpu, receiver, spansOf, quietEnvironment, repository, scopeStarts, scratch, standInNvidiaSmi, wattlineBinary };
