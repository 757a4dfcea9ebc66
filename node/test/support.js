'use strict';
// Shared by the tests: the built CLI, a stand-in nvidia-smi in the real CSV format, and
// a home without the developer's configuration.
const fs = require('node:fs');
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

module.exports = { pipelineOnStandInGpu, quietEnvironment, repository, scopeStarts, scratch, standInNvidiaSmi, wattlineBinary };
