'use strict';
// wattline for Node.js: resource snapshots, a measuring pipeline with Agent scopes, and
// the energy/cost/CO2 report, over the same Rust crate as the `wattline` CLI. The native
// addon (src/lib.rs) returns JSON; this file gives it the spec's JavaScript shape:
// camelCase names, `bigint` above Number.MAX_SAFE_INTEGER, string enums, `Date`s.

const path = require('node:path');

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
// Timestamps, made Dates.
const DATE_KEYS = new Set(['timestamp', 'started_at', 'ended_at', 'recorded_at', 'taken_at', 'last_observed_at', 'observed_at']);

function parseTagged(text, bigint) {
  return JSON.parse(text, (key, value) => {
    if (value && typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length === 1 && typeof value.$bigint === 'string') {
      return bigint ? BigInt(value.$bigint) : Number(value.$bigint);
    }
    return value;
  });
}

function camelize(value, key) {
  if (Array.isArray(value)) return value.map((item) => camelize(item, key));
  if (value && typeof value === 'object' && typeof value !== 'bigint') {
    const out = {};
    for (const [name, item] of Object.entries(value)) {
      out[DATA_KEYS.has(key) ? name : toCamel(name)] = DATA_KEYS.has(key) ? item : camelize(item, name);
    }
    return out;
  }
  if (typeof value === 'string' && DATE_KEYS.has(key)) return new Date(value);
  return value;
}

function withJson(object, text) {
  Object.defineProperty(object, 'toJSON', {
    value: () => parseTagged(text, false),
    enumerable: false,
  });
  return object;
}

/** A snapshot object from the native tagged JSON. */
function snapshotOf(text) {
  return withJson(camelize(parseTagged(text, true), ''), text);
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

/** One snapshot, as `wattline collect` takes it. Default scope: this process's tree. */
async function collect(options = {}) {
  return snapshotOf(await call(native.collectJson(nativeOptions(options))));
}

class AgentScope {
  constructor(name, end) {
    this.name = name;
    this.ended = false;
    this._end = end;
  }

  /** Ends the step; a second call does nothing. */
  async end() {
    if (this.ended) return;
    this.ended = true;
    await call(this._end());
  }
}
if (Symbol.asyncDispose) {
  AgentScope.prototype[Symbol.asyncDispose] = function dispose() {
    return this.end();
  };
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

/** The caller's span of `{ traceparent }` (a W3C string), else the active one's. */
function traceparentOf(options = {}) {
  const { traceparent } = options;
  if (traceparent === undefined || traceparent === null) return currentTraceparent();
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
    return new Pipeline(await call(native.startPipeline(nativeOptions(options))));
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
   * Starts an Agent scope; `await step.end()` (or `await using step = ...`).
   * `{ weight }`: its share among the steps live beside it (1 when absent);
   * `{ traceparent }`: its span's parent (default: the active OpenTelemetry span).
   */
  async agentScope(name, options) {
    checkName(name);
    const weight = weightOf(options);
    const traceparent = traceparentOf(options);
    const inner = this._running();
    // Starting and ending wait for no device read and no poll: called in place.
    const uuid = callNow(() => inner.startScope(name, weight, traceparent));
    const step = new AgentScope(name, async () => callNow(() => inner.endScope(uuid)));
    step.uuid = uuid;
    return step;
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

/**
 * An Agent scope for this program: under `wattline run` it marks the step in the run's
 * pipeline over its host endpoint; elsewhere in a process-wide default pipeline.
 */
async function agentScope(name, options) {
  checkName(name);
  const weight = weightOf(options);
  const traceparent = traceparentOf(options);
  if (underWattlineRun()) {
    const id = await call(native.hostStartScope(name, weight, traceparent));
    return new AgentScope(name, () => native.hostEndScope(id));
  }
  if (!defaultPipeline) defaultPipeline = Pipeline.start();
  return (await defaultPipeline).agentScope(name, { weight, traceparent });
}

/** Stops the process-wide pipeline and returns its report (`null` if none ran). */
async function defaultPipelineReport() {
  if (!defaultPipeline) return null;
  const pipeline = await defaultPipeline;
  defaultPipeline = undefined;
  return pipeline.shutdown();
}

module.exports = {
  AgentScope,
  ConfigError,
  Pipeline,
  WattlineError,
  agentScope,
  collect,
  defaultPipelineReport,
  toCamel,
  toSnake,
  underWattlineRun,
  // For the package's own tests: the decoding every answer goes through.
  _decode: (json) => camelize(parseTagged(native.encodeJson(json), true), ''),
};
