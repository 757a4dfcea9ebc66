'use strict';
// Per-call cost of collect() from Node.js: wall and CPU time per call, medians, for a
// running pipeline's collect() and the one-shot collect(). Not a test: figures to read
// on a quiet machine.   node node/bench/collect_cost.js [calls]
const wattline = require('..');

async function perCall(collect, calls) {
  await collect(); // the first sample of a series starts its baselines
  const walls = [];
  const cpus = [];
  for (let i = 0; i < calls; i += 1) {
    const wall = process.hrtime.bigint();
    const cpu = process.cpuUsage();
    await collect();
    walls.push(Number(process.hrtime.bigint() - wall) / 1000);
    const used = process.cpuUsage(cpu);
    cpus.push(used.user + used.system);
  }
  const median = (values) => values.sort((a, b) => a - b)[Math.floor(values.length / 2)];
  return [median(walls), median(cpus)];
}

(async () => {
  const calls = Number(process.argv[2] || 50);
  const pipeline = await wattline.Pipeline.start({ gpu: false });
  const running = await perCall(() => pipeline.collect(), calls);
  await pipeline.shutdown();
  const oneShot = await perCall(() => wattline.collect(), Math.max(Math.floor(calls / 5), 5));
  console.log(`collect() per call, process-tree scope of this process, median of ${calls}`);
  console.log(`${''.padEnd(52)} ${'wall µs'.padStart(10)} ${'CPU µs'.padStart(10)}`);
  for (const [name, [wall, cpu]] of [
    ['Pipeline.collect() (running pipeline)', running],
    ['wattline.collect() (starts and stops a pipeline)', oneShot],
  ]) {
    console.log(`${name.padEnd(52)} ${wall.toFixed(0).padStart(10)} ${cpu.toFixed(0).padStart(10)}`);
  }
})();
