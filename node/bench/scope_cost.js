'use strict';
// Per-scope cost from Node.js: an Agent scope started and ended, beside an
// OpenTelemetry SDK span started and ended in the same process (a BatchSpanProcessor
// in front of an exporter that discards): medians of wall time, one run, and the ratio
// to the span. Not a test: figures to read.
//   npm install --prefix /tmp/otel @opentelemetry/sdk-trace-base   # the yardstick, once
//   NODE_PATH=/tmp/otel/node_modules node node/bench/scope_cost.js [rounds]
const wattline = require('..');

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

function spanRow(rounds) {
  let sdk;
  try {
    sdk = require('@opentelemetry/sdk-trace-base');
  } catch {
    console.error('@opentelemetry/sdk-trace-base not installed: no span yardstick (see the header)');
    return null;
  }
  const discard = { export: (_spans, done) => done({ code: 0 }), shutdown: async () => {} };
  const provider = new sdk.BasicTracerProvider({ spanProcessors: [new sdk.BatchSpanProcessor(discard)] });
  const tracer = provider.getTracer('bench');
  return perRound(async () => {
    tracer.startSpan('step').end();
  }, rounds).then((row) => ['OpenTelemetry SDK span', row]);
}

(async () => {
  const rounds = Number(process.argv[2] || 5000);
  const rows = [];
  const span = await spanRow(rounds);
  if (span) rows.push(span);
  const pipeline = await wattline.Pipeline.start({ gpu: false });
  rows.push([
    'wattline agentScope + end',
    await perRound(async () => {
      const step = await pipeline.agentScope('step');
      await step.end();
    }, rounds),
  ]);
  await pipeline.shutdown();
  const reference = span ? span[1][0] : null;
  console.log(`one scope started and ended, median wall and mean CPU of ${rounds} rounds`);
  console.log(`${''.padEnd(32)} ${'wall µs'.padStart(9)} ${'CPU µs'.padStart(9)} ${'× span'.padStart(7)}`);
  for (const [name, [wall, cpu]] of rows) {
    const ratio = reference ? (wall / reference).toFixed(1) : '-';
    console.log(`${name.padEnd(32)} ${wall.toFixed(1).padStart(9)} ${cpu.toFixed(1).padStart(9)} ${ratio.padStart(7)}`);
  }
})();
