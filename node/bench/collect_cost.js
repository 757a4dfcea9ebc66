'use strict';
// Per-call cost of collect() from Node.js: wall and CPU time per call, medians, for a
// running pipeline's collect() and the one-shot collect(), beside the reference
// system's (nemo-relay) resource_metrics.collect() measured in the same run by its
// Python (python/benches/collect_cost.py --reference-json; the interpreter from
// WATTLINE_REFERENCE_PYTHON, else python3), once before and once after wattline's
// calls, its figure the mean of the two, so drift in the machine's load hits both
// alike. Each measures its own process's tree. A third row measures, from Node.js, the
// tree of an idle Python process with the reference's plugin active (the same
// --idle-reference script), so that both sides read a process of the same kind: most
// of a call is the kernel walking the measured process's page tables for its private
// memory (`smaps_rollup`), and a Node.js process maps several times what a Python one
// does. Not a test: figures to read on a quiet machine.
//   node node/bench/collect_cost.js [calls]
const { execFileSync, spawn } = require('node:child_process');
const path = require('node:path');
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

const python = process.env.WATTLINE_REFERENCE_PYTHON || 'python3';
const script = path.join(__dirname, '..', '..', 'python', 'benches', 'collect_cost.py');

/** An idle Python process with the reference's plugin active, once it is ready; null when it cannot run. */
async function idleReferenceProcess() {
  const child = spawn(python, [script, '--idle-reference'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const ready = await new Promise((resolve) => {
    child.stdout.on('data', (data) => {
      if (String(data).includes('ready')) resolve(true);
    });
    child.on('exit', () => resolve(false));
    child.on('error', () => resolve(false));
  });
  return ready ? child : null;
}

/** The reference's [wall µs, CPU µs] per call, or null (with the reason) when it cannot run. */
function referencePerCall(calls) {
  let output;
  try {
    output = execFileSync(python, [script, String(calls), '--reference-json'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (error) {
    // The reference's interpreter sometimes dies at exit (SIGSEGV in its native
    // teardown) after printing its figures: they stand.
    output = String(error.stdout || '');
    if (!output.includes('wall_us')) {
      const said = String(error.stderr || error.message).trim().split('\n').pop();
      console.error(`no reference figure (${python}): ${said}`);
      return null;
    }
  }
  const figures = JSON.parse(output.trim().split('\n').pop());
  return [figures.wall_us, figures.cpu_us];
}

(async () => {
  const calls = Number(process.argv[2] || 50);
  const before = referencePerCall(calls);
  const pipeline = await wattline.Pipeline.start({ gpu: false });
  const running = await perCall(() => pipeline.collect(), calls);
  await pipeline.shutdown();
  // The reference reads `private` memory (a page walk) at every call; wattline's
  // default reads it again only as its CPU budget allows. This one reads it at every
  // call, like for like.
  const everyReadConfig = {
    version: 1,
    components: [{ kind: 'resource_metrics', config: { memory: { private_max_cpu_share: 1 } } }],
  };
  const everyRead = await wattline.Pipeline.start({ gpu: false, config: everyReadConfig });
  const runningEveryRead = await perCall(() => everyRead.collect(), calls);
  await everyRead.shutdown();
  let alike = null;
  const idle = before && (await idleReferenceProcess());
  if (idle) {
    const measuring = await wattline.Pipeline.start({
      gpu: false,
      scope: 'process_tree',
      pid: idle.pid,
      config: everyReadConfig,
    });
    alike = await perCall(() => measuring.collect(), calls);
    await measuring.shutdown();
    idle.stdin.end();
  }
  const after = before && referencePerCall(calls);
  const reference = after && [0, 1].map((index) => (before[index] + after[index]) / 2);
  const oneShot = await perCall(() => wattline.collect(), Math.max(Math.floor(calls / 5), 5));
  console.log(`collect() per call, process-tree scope of the calling process, median of ${calls}`);
  console.log(`${''.padEnd(56)} ${'wall µs'.padStart(10)} ${'CPU µs'.padStart(10)} ${'wall ratio'.padStart(11)}`);
  const rows = [
    ['wattline Pipeline.collect() (running pipeline)', running],
    ['  the same, private read at every call (share 1)', runningEveryRead],
    ['wattline.collect() (starts and stops a pipeline)', oneShot],
  ];
  if (alike) rows.splice(2, 0, ['wattline Pipeline.collect() (reference-like tree, share 1)', alike]);
  if (reference) rows.unshift(['nemo-relay resource_metrics.collect() (Python)', reference]);
  for (const [name, [wall, cpu]] of rows) {
    const ratio = reference ? (wall / reference[0]).toFixed(2) : '-';
    console.log(
      `${name.padEnd(56)} ${wall.toFixed(0).padStart(10)} ${cpu.toFixed(0).padStart(10)} ${ratio.padStart(11)}`,
    );
  }
})();
