'use strict';
// wattline for Node.js: resource snapshots, a measuring pipeline with Agent scopes, and
// the energy/cost/CO2 report, over the same Rust crate as the `wattline` CLI. The native
// addon (src/lib.rs) returns JSON; this file gives it the spec's JavaScript shape:
// camelCase names, `bigint` above Number.MAX_SAFE_INTEGER, string enums, a snapshot's
// `timestamp` as the spec's ISO string (`timestampDate` beside it), `Date`s in reports.

const path = require('node:path');
const { AsyncLocalStorage } = require('node:async_hooks');

let native;
try {
  native = require(path.join(__dirname, 'wattline.node'));
} catch (error) {
  throw new Error(
    `wattline: the native addon is not built (${error.message}); install the package with ` +
      '`npm install ./node` on a machine with a Rust toolchain, or run `node build.js` in node/',
  );
}

class WattlineError extends Error {
  constructor(message, code = 'WATTLINE_ERROR') {
    super(message);
    this.name = 'WattlineError';
    this.code = code;
  }
}

class ConfigError extends WattlineError {
  constructor(message) {
    super(message, 'WATTLINE_CONFIG');
    this.name = 'ConfigError';
  }
}

/** The native error's code prefix made an Error subclass with that `code`. */
function translate(error) {
  const match = /^\[([A-Z_]+)\] ([\s\S]*)$/.exec(String(error && error.message));
  if (!match) return error;
  const [, code, message] = match;
  return code === 'WATTLINE_CONFIG' ? new ConfigError(message) : new WattlineError(message, code);
}

async function call(promise) {
  try {
    return await promise;
  } catch (error) {
    throw translate(error);
  }
}

/** A native call that answers at once (no promise), its error translated as `call`'s. */
function callNow(native) {
  try {
    return native();
  } catch (error) {
    throw translate(error);
  }
}

// --- names: one rule, both directions ----------------------------------------------

// Names seen before, camelCased: a snapshot has about two hundred keys from a fixed
// set, and a regular expression per key per call was most of the conversion's cost.
// Bounded, since a report's keys include names users choose.
const CAMEL_NAMES = new Map();
const CAMEL_NAMES_KEPT = 4096;

/** `total_time` → `totalTime`. */
function toCamel(name) {
  let camel = CAMEL_NAMES.get(name);
  if (camel === undefined) {
    camel = name.replace(/_([a-z0-9])/g, (_, letter) => letter.toUpperCase());
    if (CAMEL_NAMES.size < CAMEL_NAMES_KEPT) CAMEL_NAMES.set(name, camel);
  }
  return camel;
}

/** `totalTime` → `total_time`. */
function toSnake(name) {
  return name.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
}

// Objects whose keys are data (canonical field paths), not names.
const DATA_KEYS = new Set(['field_sampled_processes']);
// Timestamps, made Dates (in reports; a snapshot keeps the spec's ISO string).
const DATE_KEYS = new Set(['timestamp', 'started_at', 'ended_at', 'recorded_at', 'taken_at', 'last_observed_at', 'observed_at']);
const NO_DATE_KEYS = new Set();

function parseTagged(text, bigint) {
  // A reviver costs a call per value (it was a third of a snapshot's conversion):
  // only for a text that holds a tagged integer.
  if (!text.includes('"$bigint"')) return JSON.parse(text);
  return JSON.parse(text, (key, value) => {
    if (value && typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length === 1 && typeof value.$bigint === 'string') {
      return bigint ? BigInt(value.$bigint) : Number(value.$bigint);
    }
    return value;
  });
}

function camelize(value, key, dateKeys = DATE_KEYS) {
  if (Array.isArray(value)) {
    const out = new Array(value.length);
    for (let index = 0; index < value.length; index += 1) out[index] = camelize(value[index], key, dateKeys);
    return out;
  }
  if (value !== null && typeof value === 'object') {
    // Keys that are data keep their names, and their values are plain numbers.
    if (DATA_KEYS.has(key)) return value;
    const out = {};
    for (const name in value) out[toCamel(name)] = camelize(value[name], name, dateKeys);
    return out;
  }
  if (typeof value === 'string' && dateKeys.has(key)) return new Date(value);
  return value;
}

function withJson(object, text) {
  Object.defineProperty(object, 'toJSON', {
    value: () => parseTagged(text, false),
    enumerable: false,
  });
  return object;
}

/** A snapshot object from the native tagged JSON: `timestamp` the ISO string, as the
 * spec gives it; `timestampDate` (not enumerable) the same instant as a `Date`. */
function snapshotOf(text) {
  const snapshot = withJson(camelize(parseTagged(text, true), '', NO_DATE_KEYS), text);
  Object.defineProperty(snapshot, 'timestampDate', {
    get() {
      return new Date(this.timestamp);
    },
    enumerable: false,
  });
  return snapshot;
}

/** A report object; `toString()` is the CLI's table. */
function reportOf(text) {
  const report = withJson(camelize(parseTagged(text, true), ''), text);
  Object.defineProperty(report, 'toString', {
    value: () => native.reportTable(JSON.stringify(parseTagged(text, false))),
    enumerable: false,
  });
  return report;
}

function nativeOptions(options = {}) {
  const known = ['config', 'scope', 'pid', 'intervalMs', 'atofDir', 'otlpEndpoint', 'gpu'];
  for (const name of Object.keys(options)) {
    if (!known.includes(name)) throw new ConfigError(`${name}: unknown option (expected one of ${known.join(', ')})`);
  }
  const out = {
    scope: options.scope,
    pid: options.pid,
    intervalMs: options.intervalMs,
    atofDir: options.atofDir,
    otlpEndpoint: options.otlpEndpoint,
    gpu: options.gpu,
  };
  const { config } = options;
  if (typeof config === 'string') out.configPath = config;
  else if (config !== undefined && config !== null) {
    if (typeof config !== 'object') throw new ConfigError(`config: must be a path or an object (got ${typeof config})`);
    out.configJson = JSON.stringify(config);
  }
  if (out.intervalMs !== undefined && !(Number.isInteger(out.intervalMs) && out.intervalMs >= 0 && out.intervalMs <= 0xffffffff)) {
    throw new ConfigError(`intervalMs: must be a whole number of milliseconds (got ${out.intervalMs})`);
  }
  for (const [name, value] of Object.entries(out)) if (value === undefined) delete out[name];
  return out;
}

// --- GPU source hook ------------------------------------------------------------------

let gpuSourceFactory;

/**
 * Replaces GPU source selection for every pipeline started from now on (`collect()`'s,
 * `Pipeline.start`, `plugin.initialize`): `factory()` is called at each start and
 * returns a source (`sample(): Promise<GpuSample[] | undefined>`), or `undefined`,
 * which turns GPU reading off. `setGpuSource(undefined)` restores wattline's own.
 */
function setGpuSource(factory) {
  if (factory !== undefined && factory !== null && typeof factory !== 'function') {
    throw new TypeError(`setGpuSource: a factory returning a source, or undefined (got ${typeof factory})`);
  }
  gpuSourceFactory = factory || undefined;
}

/** A device record as the native side reads it: snake_case names. */
function snakeRecord(device) {
  const out = {};
  for (const [name, value] of Object.entries(device || {})) out[toSnake(name)] = value;
  return out;
}

/** What a pipeline start passes for the GPU: `{ gpu: false }`, `{ sampler, name }`, or nothing. */
function gpuHook() {
  if (!gpuSourceFactory) return {};
  const source = gpuSourceFactory();
  if (source === undefined || source === null) return { gpu: false };
  if (typeof source.sample !== 'function') throw new TypeError('setGpuSource: the source needs a sample() method');
  const sampler = (id) => {
    Promise.resolve()
      .then(() => source.sample())
      .then(
        (devices) => native.deliverGpuSample(id, devices == null ? null : JSON.stringify(Array.from(devices, snakeRecord)), null),
        (error) => native.deliverGpuSample(id, null, String((error && error.message) || error)),
      );
  };
  return { sampler, name: typeof source.name === 'string' ? source.name : undefined };
}

/** Starts a native pipeline with the GPU hook applied. */
function startNativePipeline(options) {
  const hook = options.gpu === false ? {} : gpuHook();
  const settings = hook.gpu === false ? { ...options, gpu: false } : options;
  return native.startPipeline(settings, hook.sampler, hook.name);
}

// --- module-level collect(): one series per set of options -----------------------

// Started pipelines of module-level collect(), by their options; the one without
// options is the one module-level agentScope() uses.
const seriesPipelines = new Map();

function seriesKey(settings) {
  return JSON.stringify(Object.keys(settings).sort().map((name) => [name, settings[name]]));
}

/**
 * One snapshot on this process's on-demand series for these options, as `wattline
 * collect` takes it. The first call starts a pipeline (kept for the process), later
 * calls with the same options continue its series: rates and GPU process use from the
 * second call on. Default scope: this process's tree.
 */
async function collect(options = {}) {
  const settings = nativeOptions(options);
  const key = seriesKey(settings);
  if (key === seriesKey({})) return (await defaultPipelineNow()).collect();
  let started = seriesPipelines.get(key);
  if (!started) {
    started = call(startNativePipeline(settings)).then((inner) => new Pipeline(inner));
    seriesPipelines.set(key, started);
    started.catch(() => seriesPipelines.delete(key));
  }
  const pipeline = await started;
  try {
    return await pipeline.collect();
  } catch (error) {
    if (error instanceof ConfigError && seriesPipelines.get(key) === started) {
      // Nothing to collect with this configuration: no series to keep.
      seriesPipelines.delete(key);
      await pipeline.shutdown().catch(() => {});
    }
    throw error;
  }
}

// The current step: AsyncLocalStorage, so promises, timers and callbacks started inside
// `withAgentScope` (or `step.run`) see it; an entry names its step, the pipeline that
// holds it, the entry current when it began, and the span active then.
const currentEntry = new AsyncLocalStorage();

class AgentScope {
  constructor(name, end, uuid, owner, parentEntry, spanAtEntry) {
    this.name = name;
    this.ended = false;
    this.uuid = uuid;
    this._end = end;
    this._entry = { step: this, owner, parent: parentEntry, spanAtEntry };
  }

  /** Ends the step; a second call does nothing. */
  async end() {
    if (this.ended) return;
    this.ended = true;
    await call(this._end());
  }

  /**
   * Calls `fn()` with this step current: a step started inside it (and in the
   * promises and callbacks it starts) without an explicit `parent` is this one's
   * child. Returns what `fn` returns.
   */
  run(fn) {
    if (typeof fn !== 'function') throw new TypeError('run(fn): fn must be a function');
    return currentEntry.run(this._entry, fn);
  }
}
if (Symbol.asyncDispose) {
  AgentScope.prototype[Symbol.asyncDispose] = function dispose() {
    return this.end();
  };
}

/** The innermost live entry current here, of `owner` when given. */
function liveEntry(owner) {
  let entry = currentEntry.getStore();
  while (entry && (entry.step.ended || (owner !== undefined && entry.owner !== owner))) entry = entry.parent;
  return entry;
}

/** The step current here (inside `withAgentScope` or `step.run`), if any. */
function currentScope() {
  const entry = liveEntry();
  return entry ? entry.step : undefined;
}

/** Where a step starting now nests (`{ parent }`, else the current step of `owner`), and its span. */
function placement(name, options = {}, owner) {
  const { parent } = options;
  let parentEntry;
  if (parent !== undefined && parent !== null) {
    if (!(parent instanceof AgentScope)) throw new WattlineError(`agent scope ${name}: parent must be an AgentScope`);
    if (parent.ended) throw new WattlineError(`agent scope ${name}: its parent ${parent.name} has ended`);
    if (parent._entry.owner !== owner) {
      throw new WattlineError(`agent scope ${name}: its parent ${parent.name} belongs to another pipeline`);
    }
    parentEntry = parent._entry;
  } else {
    parentEntry = liveEntry(owner);
  }
  const spanNow = currentTraceparent();
  let traceparent = traceparentOf(options, spanNow);
  // No span opened since the parent began: the parent step's span is the nearer parent.
  if (options.traceparent == null && parentEntry && spanNow === parentEntry.spanAtEntry) traceparent = undefined;
  return { parentEntry, traceparent, spanNow };
}

/** `start(name, options)` then `fn(step)` with the step current; ends it when `fn` settles. */
async function withStep(start, name, options, fn) {
  if (typeof options === 'function') [options, fn] = [undefined, options];
  if (typeof fn !== 'function') throw new TypeError('withAgentScope(name, [options], fn): fn must be a function');
  const step = await start(name, options);
  try {
    return await step.run(() => fn(step));
  } finally {
    await step.end();
  }
}

function checkName(name) {
  if (typeof name !== 'string' || name.trim() === '') throw new WattlineError('agent scope name must be a non-blank string');
}

/** The `weight` of `{ weight }` (tokens, batch size), checked; `undefined` means 1. */
function weightOf(options = {}) {
  const { weight } = options;
  if (weight === undefined || weight === null) return undefined;
  if (typeof weight !== 'number' || !Number.isFinite(weight) || weight <= 0) {
    throw new WattlineError(`agent scope weight ${weight}: a positive, finite number`);
  }
  return weight;
}

// `@opentelemetry/api`, when the program has it: the span current at a scope's start
// is its span's parent. Looked up once; no hard dependency.
let opentelemetryApi;

/** The W3C `traceparent` of the OpenTelemetry span active now, if any. */
function currentTraceparent() {
  if (opentelemetryApi === undefined) {
    opentelemetryApi = null;
    // Beside this package (an application's node_modules, NODE_PATH), else the
    // program's own directory.
    for (const load of [
      () => require('@opentelemetry/api'),
      () => require(require.resolve('@opentelemetry/api', { paths: [process.cwd()] })),
    ]) {
      try {
        opentelemetryApi = load();
        break;
      } catch {
        // Not installed there.
      }
    }
  }
  if (!opentelemetryApi) return undefined;
  const span = opentelemetryApi.trace.getActiveSpan();
  const context = span && span.spanContext();
  if (!context || !opentelemetryApi.isSpanContextValid(context)) return undefined;
  return `00-${context.traceId}-${context.spanId}-${context.traceFlags.toString(16).padStart(2, '0')}`;
}

/** The caller's span of `{ traceparent }` (a W3C string), else the active one (`active`). */
function traceparentOf(options = {}, active = currentTraceparent()) {
  const { traceparent } = options;
  if (traceparent === undefined || traceparent === null) return active;
  if (typeof traceparent !== 'string') {
    throw new WattlineError(`agent scope traceparent ${traceparent}: a W3C traceparent string`);
  }
  return traceparent;
}

class Pipeline {
  constructor(inner) {
    this._inner = inner;
    this._report = undefined;
    this._stopped = false;
  }

  /** Starts measuring: `{ config, scope, intervalMs, atofDir, otlpEndpoint, gpu }`. */
  static async start(options = {}) {
    return new Pipeline(await call(startNativePipeline(nativeOptions(options))));
  }

  _running() {
    if (this._stopped) throw new WattlineError('the pipeline is not running');
    return this._inner;
  }

  /** One on-demand snapshot (no mark). */
  async collect() {
    return snapshotOf(await call(this._running().collectJson()));
  }

  /**
   * Starts an Agent scope; `await step.end()` (or `await using step = ...`). It nests
   * in the current step of this pipeline (see `withAgentScope`), or in `{ parent }`.
   * `{ weight }`: its share among the steps live beside it (1 when absent);
   * `{ traceparent }`: its span's parent (default: the active OpenTelemetry span, else
   * its parent step's span).
   */
  async agentScope(name, options) {
    checkName(name);
    const weight = weightOf(options);
    const inner = this._running();
    const { parentEntry, traceparent, spanNow } = placement(name, options, inner);
    const parentUuid = parentEntry ? parentEntry.step.uuid : undefined;
    // Starting and ending wait for no device read and no poll: called in place.
    const uuid = callNow(() => inner.startScope(name, weight, traceparent, parentUuid));
    return new AgentScope(name, async () => callNow(() => inner.endScope(uuid)), uuid, inner, parentEntry, spanNow);
  }

  /**
   * Runs `fn(step)` inside a new step that is current for everything `fn` starts
   * (promises, timers, callbacks), ending it when `fn` settles; what `fn` returns.
   */
  withAgentScope(name, options, fn) {
    return withStep((stepName, stepOptions) => this.agentScope(stepName, stepOptions), name, options, fn);
  }

  /** Sends what the exporters hold (with or without the energy component). */
  async flushTelemetry() {
    await call(this._running().flushTelemetry());
  }

  /** The energy report so far. */
  async flush() {
    return reportOf(await call(this._running().flushJson()));
  }

  /** Stops measuring, ending live scopes; the final report (also `report`). */
  async shutdown() {
    if (this._stopped) return this._report;
    const text = await call(this._inner.shutdownJson());
    this._stopped = true;
    this._report = text == null ? null : reportOf(text);
    return this._report;
  }

  get report() {
    return this._report;
  }
}
if (Symbol.asyncDispose) {
  Pipeline.prototype[Symbol.asyncDispose] = function dispose() {
    return this.shutdown();
  };
}

/** Whether this process was started by `wattline run` (its host endpoint is set). */
function underWattlineRun() {
  return Boolean(process.env.WATTLINE_HOST_SOCKET);
}

let defaultPipeline;

/** The process-wide pipeline module-level `agentScope()` and `collect()` share. */
function defaultPipelineNow() {
  if (!defaultPipeline) {
    const started = Pipeline.start();
    defaultPipeline = started;
    started.catch(() => {
      if (defaultPipeline === started) defaultPipeline = undefined;
    });
  }
  return defaultPipeline;
}

// Module-level steps under `wattline run` all live in the run's pipeline.
const RUN_PIPELINE = Symbol('the pipeline of wattline run');

/**
 * An Agent scope for this program: under `wattline run` it marks the step in the run's
 * pipeline over its host endpoint; elsewhere in a process-wide default pipeline. It
 * nests in the current step (see `withAgentScope`) or in `{ parent }`.
 */
async function agentScope(name, options) {
  checkName(name);
  const weight = weightOf(options);
  if (underWattlineRun()) {
    const { parentEntry, traceparent, spanNow } = placement(name, options, RUN_PIPELINE);
    const parentId = parentEntry ? parentEntry.step.uuid : undefined;
    const id = await call(native.hostStartScope(name, weight, traceparent, parentId));
    return new AgentScope(name, () => native.hostEndScope(id), id, RUN_PIPELINE, parentEntry, spanNow);
  }
  return (await defaultPipelineNow()).agentScope(name, options);
}

/** Module-level `agentScope()` as `Pipeline.withAgentScope` runs it. */
function withAgentScope(name, options, fn) {
  return withStep(agentScope, name, options, fn);
}

/** Stops the process-wide pipeline and returns its report (`null` if none ran). */
async function defaultPipelineReport() {
  if (!defaultPipeline) return null;
  const pipeline = await defaultPipeline;
  defaultPipeline = undefined;
  return pipeline.shutdown();
}

/**
 * The report rebuilt from an event file written with `atofDir` (or by `wattline run
 * --atof`): plain, zstd-compressed, or any part of a rotated set, as `wattline report
 * FILE` rebuilds it. Rejects with a `WattlineError` naming the file and line when it
 * cannot be read.
 */
async function reportFromAtof(path) {
  if (typeof path !== 'string') throw new TypeError('reportFromAtof(path): path must be a string');
  return reportOf(await call(native.reportFromAtofJson(path)));
}

// --- the reference's shape: collectResourceMetrics(), flushTelemetry(), plugin ------

/** The active plugin host (`require('wattline/plugin').initialize`), if any. */
let activeHost;

/**
 * One snapshot on the active plugin host's on-demand series (no mark): the first has
 * no rates, later ones do. Needs an active `resource_metrics` component, as in the
 * reference.
 */
async function collectResourceMetrics() {
  return snapshotOf(await call(native.hostCollectJson()));
}

/**
 * Sends what every pipeline this module holds has for its exporters: the active plugin
 * host's, `collect()`'s and `agentScope()`'s (each took its first GPU reading when it
 * started). Resolves when they are sent.
 */
async function flushTelemetry() {
  const pending = [];
  if (activeHost && activeHost.isActive) pending.push(call(activeHost.flushTelemetry()));
  const pipelines = [defaultPipeline, ...seriesPipelines.values()].filter(Boolean);
  for (const started of pipelines) {
    pending.push(started.then((pipeline) => (pipeline._stopped ? undefined : pipeline.flushTelemetry())).catch(() => {}));
  }
  await Promise.all(pending);
}

/** The plugin host facade's hooks for `plugin.js` (one implementation, here). */
const hostSupport = {
  async start(configJson, additionalPluginsToml) {
    const hook = gpuHook();
    const host = await call(native.startPluginHost(configJson, additionalPluginsToml, hook.gpu !== false, hook.sampler, hook.name));
    activeHost = host;
    return host;
  },
  async close(host) {
    await call(host.close());
    if (activeHost === host) activeHost = undefined;
  },
  ConfigError,
};

module.exports = {
  AgentScope,
  ConfigError,
  Pipeline,
  WattlineError,
  agentScope,
  collect,
  collectResourceMetrics,
  currentScope,
  defaultPipelineReport,
  flushTelemetry,
  reportFromAtof,
  setGpuSource,
  toCamel,
  toSnake,
  underWattlineRun,
  withAgentScope,
  _hostSupport: hostSupport,
  // For spans.js: the module's pipelines and the current step.
  _spanSupport: { currentScope, defaultPipelineNow: () => defaultPipelineNow(), native, RUN_PIPELINE },
  // For the package's own tests: the decoding every answer goes through.
  _decode: (json) => camelize(parseTagged(native.encodeJson(json), true), ''),
};
