const wattline = require('wattline');

const plan = () => new Promise((resolve) => setTimeout(resolve, 200)); // the step's real work

(async () => {
  const snapshot = await wattline.collect(); // the process tree rooted here
  console.log(snapshot.cpu.totalTime.value, snapshot.cpu.totalTime.unit); // e.g. 60 milliseconds
  await plan();
  const rate = (await wattline.collect()).cpu.consumptionRate; // one series: rates from the 2nd call
  console.log(rate.value, rate.unit, snapshot.timestamp); // e.g. 0.01 logical_processors 2026-…Z
  const pipeline = await wattline.Pipeline.start({ intervalMs: 1000 });
  const step = await pipeline.agentScope('planner'); // or `await using step = ...`
  await plan();
  await step.end();
  console.log(String(await pipeline.flush())); // the CLI's table
  const report = await pipeline.shutdown(); // camelCase: report.total.energyKwh
  console.log(report.agentScopes.map((scope) => scope.name), report.currency);
})();

// Traced with OpenTelemetry? Its GenAI spans (agents, model and tool calls) become steps:
//     new BasicTracerProvider({ spanProcessors: [new (require('wattline/spans').GenAISpanProcessor)()] });
