'use strict';
// Per-scope cost from Node.js: an Agent scope started and ended, without a GPU source
// and with one (a stand-in nvidia-smi first on PATH, answering in the real CSV format
// as a 250 W H200, its power stream included), beside an OpenTelemetry SDK span
// started and ended in the same process (a BatchSpanProcessor in front of an exporter
// that discards), and that span again with `GenAISpanProcessor` (wattline/spans)
// making it a step: medians of wall time, one run, and the ratio to the span. Not a
// test: figures to read.
//   npm install --prefix /tmp/otel @opentelemetry/sdk-trace-base   # the yardstick, once
//   NODE_PATH=/tmp/otel/node_modules node node/bench/scope_cost.js [rounds]
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const wattline = require('..');

// A stand-in nvidia-smi in the real CSV format: one H200 at 250 W, and its loop mode
// for the power stream.
const STAND_IN_NVIDIA_SMI = `#!/bin/sh
case "$*" in
  *-L*) echo "GPU 0: NVIDIA H200 (UUID: GPU-3f2b9c1e-8a4d-4b7e-9c21-5d6e7f8a9b0c)";;
  *--loop-ms=*) while :; do echo "0, GPU-3f2b9c1e-8a4d-4b7e-9c21-5d6e7f8a9b0c, 250.00"; sleep 0.1; done;;
  *) echo "0, GPU-3f2b9c1e-8a4d-4b7e-9c21-5d6e7f8a9b0c, NVIDIA H200, 7, 3, 1377, 143771, 46, 250.00, 700.00, 1980, 3201, [N/A], P0, Not Active, Not Active, Not Active, Not Active, 0, 0, 250.00";;
esac
`;

async function perRound(body, rounds) {
  for (let i = 0; i < Math.max(rounds / 10, 1); i += 1) await body();
  const walls = [];
  const started = process.cpuUsage();
  for (let i = 0; i < rounds; i += 1) {
    const wall = process.hrtime.bigint();
    await body();
    walls.push(Number(process.hrtime.bigint() - wall) / 1000);
  }
  const used = process.cpuUsage(started);
  walls.sort((a, b) => a - b);
  return [walls[Math.floor(walls.length / 2)], (used.user + used.system) / rounds];
}

function spanRow(rounds, extraProcessor, label = 'OpenTelemetry SDK span') {
  let sdk;
  try {
    sdk = require('@opentelemetry/sdk-trace-base');
  } catch {
    console.error('@opentelemetry/sdk-trace-base not installed: no span yardstick (see the header)');
    return null;
  }
  const discard = { export: (_spans, done) => done({ code: 0 }), shutdown: async () => {} };
  const processors = [new sdk.BatchSpanProcessor(discard)];
  if (extraProcessor) processors.unshift(extraProcessor);
  const provider = new sdk.BasicTracerProvider({ spanProcessors: processors });
  const tracer = provider.getTracer('bench');
  const attributes = { 'gen_ai.operation.name': 'chat' };
  return perRound(async () => {
    tracer.startSpan('chat model', { attributes }).end();
  }, rounds).then(async (row) => {
    await provider.forceFlush();
    return [label, row];
  });
}

(async () => {
  const rounds = Number(process.argv[2] || 5000);
  const rows = [];
  const span = await spanRow(rounds);
  if (span) rows.push(span);
  const scopeRow = async (pipeline, label) => [
    `wattline agentScope + end${label}`,
    await perRound(async () => {
      const step = await pipeline.agentScope('step');
      await step.end();
    }, rounds),
  ];
  const withoutGpu = await wattline.Pipeline.start({ gpu: false });
  rows.push(await scopeRow(withoutGpu, ', no GPU'));
  // The same span with wattline/spans making it a step: the processor's cost is this
  // row less the span's.
  const { GenAISpanProcessor } = require('../spans');
  const processed = await spanRow(rounds, new GenAISpanProcessor({ pipeline: withoutGpu }), 'SDK span made a step, no GPU');
  if (processed) rows.push(processed);
  await withoutGpu.shutdown();
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'wattline-bench-'));
  fs.writeFileSync(path.join(folder, 'nvidia-smi'), STAND_IN_NVIDIA_SMI, { mode: 0o755 });
  process.env.PATH = `${folder}${path.delimiter}${process.env.PATH}`;
  const withGpu = await wattline.Pipeline.start();
  rows.push(await scopeRow(withGpu, ', GPU'));
  const report = await withGpu.shutdown();
  fs.rmSync(folder, { recursive: true, force: true });
  const reference = span ? span[1][0] : null;
  console.log(`one scope started and ended, median wall and mean CPU of ${rounds} rounds`);
  console.log(`${''.padEnd(40)} ${'wall µs'.padStart(9)} ${'CPU µs'.padStart(9)} ${'× span'.padStart(7)}`);
  for (const [name, [wall, cpu]] of rows) {
    const ratio = reference ? (wall / reference).toFixed(1) : '-';
    console.log(`${name.padEnd(40)} ${wall.toFixed(1).padStart(9)} ${cpu.toFixed(1).padStart(9)} ${ratio.padStart(7)}`);
  }
  console.log(`GPU source of the GPU row: ${report && report.gpuSource}`);
})();
