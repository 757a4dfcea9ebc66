// Type declarations of the wattline package (written beside index.js). The snapshot's
// records between the `generated` lines are written from the Rust model by
// `WATTLINE_UPDATE_BINDINGS=1 cargo test --test model_languages`.

export type Integer = number | bigint;

export type DurationUnit = 'microseconds' | 'milliseconds' | 'seconds' | 'minutes';
export type ByteUnit = 'bytes' | 'kilobytes' | 'megabytes' | 'gigabytes' | 'terabytes' | 'kibibytes' | 'mebibytes' | 'gibibytes' | 'tebibytes';
export type CapacityUnit = ByteUnit;
export type DataUnit = ByteUnit;
export type BandwidthUnit = 'bytes_per_second' | 'kibibytes_per_second' | 'mebibytes_per_second' | 'gibibytes_per_second' | 'bits_per_second' | 'megabits_per_second' | 'gigabits_per_second';
export type CpuUnit = 'logical_processors' | 'millicores';
export type UtilizationUnit = 'percentage' | 'fraction';
export type CountUnit = 'processes' | 'threads' | 'file_descriptors' | 'handles' | 'events' | 'operations' | 'packets' | 'errors';
export type OperatingSystem = 'linux' | 'macos' | 'windows' | 'unsupported';
export type MeasurementScope = 'global' | 'application_process' | 'process_tree';
export type AcceleratorVendor = 'nvidia' | 'amd' | 'intel' | 'apple' | 'other';
export type LimitResource = 'cpu' | 'memory' | 'processes';
export type LimitEventKind = 'throttled' | 'high' | 'maximum' | 'out_of_memory' | 'terminated';

/** One available reading; an unavailable one is `null`, never 0. */
export interface Measurement<U extends string> {
  /** A `number` up to Number.MAX_SAFE_INTEGER, a `bigint` above it. */
  value: Integer;
  unit: U;
}
type M<U extends string> = Measurement<U> | null;

// --- begin generated from model/src (snapshot records): do not edit ---

/** A cumulative limit-event count. */
export interface LimitEvent {
  /** The limited resource. */
  resource: LimitResource;
  /** The event. */
  event: LimitEventKind;
  /** The cumulative count, in `events`. */
  count: M<CountUnit>;
}

/** How many processes each process-summed field covers. */
export interface ProcessSampling {
  /** Processes listed when collection began. */
  visibleProcesses: Integer;
  /** Processes whose base query succeeded. */
  sampledProcesses: Integer;
  /**
   * Readable values per process-summed field, keyed by canonical path
   * (`cpu.total_time`, as is in every language: data, not a field name); a missing
   * key means the sum was not attempted.
   */
  fieldSampledProcesses: Record<string, Integer>;
}

/** The CPU category. */
export interface CpuMetrics {
  /** User-mode CPU time of the scope. Default unit milliseconds. */
  userTime: M<DurationUnit>;
  /** Kernel-mode CPU time of the scope. */
  systemTime: M<DurationUnit>;
  /** User plus system time. */
  totalTime: M<DurationUnit>;
  /**
   * Average CPU use since the previous sample of the same series, in logical
   * processors by default; `null` on a series' first sample.
   */
  consumptionRate: M<CpuUnit>;
  /** Time the environment was throttled (exclusive cgroup only). */
  throttledTime: M<DurationUnit>;
  /** CPU capacity available to the environment. */
  effectiveLimit: M<CpuUnit>;
  /** Time some work stalled on CPU. */
  somePressureStallTime: M<DurationUnit>;
  /** Time all work stalled on CPU. */
  fullPressureStallTime: M<DurationUnit>;
  /** Supported cumulative CPU limit-event counts. */
  limitEvents: LimitEvent[];
}

/** The memory category. */
export interface MemoryMetrics {
  /** System memory in use. Default unit KiB. */
  systemUsed: M<CapacityUnit>;
  /** Total system memory. */
  systemTotal: M<CapacityUnit>;
  /** System memory available. */
  systemAvailable: M<CapacityUnit>;
  /** Resident memory of the scope. */
  resident: M<CapacityUnit>;
  /** Private memory of the scope. */
  private: M<CapacityUnit>;
  /** macOS physical footprint. */
  physicalFootprint: M<CapacityUnit>;
  /** Virtual address space. */
  virtualMemory: M<CapacityUnit>;
  /** Peak resident memory of one process; `null` for trees. */
  peakResident: M<CapacityUnit>;
  /** Memory limit of the environment. */
  limit: M<CapacityUnit>;
  /** Memory charged to the environment. */
  environmentAccounted: M<CapacityUnit>;
  /** Time some work stalled on memory. */
  somePressureStallTime: M<DurationUnit>;
  /** Time all work stalled on memory. */
  fullPressureStallTime: M<DurationUnit>;
  /** Cumulative OOM events. */
  outOfMemoryEventCount: M<CountUnit>;
  /** Supported cumulative memory limit-event counts. */
  limitEvents: LimitEvent[];
}

/** The process category. */
export interface ProcessMetrics {
  /** Process IDs found when collection began. */
  activeCount: M<CountUnit>;
  /** Live descendants, excluding the root. */
  descendantCount: M<CountUnit>;
  /** Threads across the scope. */
  threadCount: M<CountUnit>;
  /** Windows Job Object creations. */
  lifetimeCreationCount: M<CountUnit>;
  /** Open file descriptors across the scope. */
  openFileDescriptorCount: M<CountUnit>;
  /** Windows kernel handles. */
  windowsHandleCount: M<CountUnit>;
  /** Supported cumulative process-limit event counts. */
  limitEvents: LimitEvent[];
}

/** Capacity of the filesystem holding one configured path. */
export interface FilesystemMetrics {
  /** The configured path. */
  path: string;
  /** Total capacity. Default unit bytes. */
  totalCapacity: M<CapacityUnit>;
  /** Space available to the calling user. */
  availableCapacity: M<CapacityUnit>;
  /** Free space including reserved blocks. */
  freeCapacity: M<CapacityUnit>;
}

/** The disk category. */
export interface DiskMetrics {
  /** Storage bytes read by the scope. */
  readData: M<DataUnit>;
  /** Storage bytes written by the scope. */
  writeData: M<DataUnit>;
  /** Read rate since the previous sample. */
  readThroughput: M<BandwidthUnit>;
  /** Write rate since the previous sample. */
  writeThroughput: M<BandwidthUnit>;
  /** Read system calls. */
  readOperations: M<CountUnit>;
  /** Write system calls. */
  writeOperations: M<CountUnit>;
  /** One entry per configured path; `[]` when none are configured. */
  filesystems: FilesystemMetrics[];
}

/** A whole-device GPU record. */
export interface AcceleratorDeviceMetrics {
  /** The vendor. */
  vendor: AcceleratorVendor;
  /** The backend's device ID (NVML: the UUID). */
  deviceIdentifier: string;
  /** The backend-local index, when supplied. */
  deviceIndex: number | null;
  /** Device memory in use. Default unit KiB. */
  memoryUsed: M<CapacityUnit>;
  /** Device activity. Default unit percentage. */
  computeUtilization: M<UtilizationUnit>;
}

/** A per-process GPU record. */
export interface AcceleratorProcessMetrics {
  /** The vendor. */
  vendor: AcceleratorVendor;
  /** The backend's device ID. */
  deviceIdentifier: string;
  /** The backend-local index, when supplied. */
  deviceIndex: number | null;
  /** The owning process. */
  processId: number;
  /** GPU memory used by the process. */
  memoryUsed: M<CapacityUnit>;
  /** The process's GPU activity since the previous sample of the same series. */
  computeUtilization: M<UtilizationUnit>;
}

/**
 * The GPU category: each group `null` when disabled (or GPU reading is turned off),
 * a list otherwise: empty when no backend answered, as the reference gives it (why
 * nothing answered is in diagnostics, `doctor` and the report).
 */
export interface GpuMetrics {
  /** Device records. */
  deviceMetrics: AcceleratorDeviceMetrics[] | null;
  /** Process records. */
  processMetrics: AcceleratorProcessMetrics[] | null;
}

/** Traffic counters of one network record. */
export interface NetworkTrafficMetrics {
  /** Bytes received. */
  receivedData: M<DataUnit>;
  /** Bytes sent. */
  transmittedData: M<DataUnit>;
  /** Receive rate since the previous sample. */
  receiveThroughput: M<BandwidthUnit>;
  /** Send rate since the previous sample. */
  transmitThroughput: M<BandwidthUnit>;
  /** Packets received. */
  receivedPackets: M<CountUnit>;
  /** Packets sent. */
  transmittedPackets: M<CountUnit>;
  /** Receive errors. */
  receiveErrors: M<CountUnit>;
  /** Send errors. */
  transmitErrors: M<CountUnit>;
}

/** One selected interface. */
export interface NetworkInterfaceMetrics {
  /** Interface name. */
  name: string;
  /** Its counters. */
  traffic: NetworkTrafficMetrics;
}

/** The network category: always system-wide. */
export interface NetworkMetrics {
  /** Always `global`. */
  measurementScope: MeasurementScope;
  /** The aggregate of the selected interfaces. */
  system: NetworkTrafficMetrics;
  /** One record per selected visible interface. */
  interfaces: NetworkInterfaceMetrics[];
}

// --- end generated ---

export interface Snapshot {
  /** When collection finished: the spec's ISO 8601 string in UTC (`...Z`). */
  timestamp: string;
  /** The same instant as a `Date` (not enumerable: not in `toJSON()` nor `Object.keys`). */
  readonly timestampDate: Date;
  operatingSystem: OperatingSystem;
  measurementScope: MeasurementScope;
  processSampling: ProcessSampling | null;
  cpu: CpuMetrics | null;
  memory: MemoryMetrics | null;
  process: ProcessMetrics | null;
  disk: DiskMetrics | null;
  gpu: GpuMetrics | null;
  network: NetworkMetrics | null;
  /** The snake_case JSON of `wattline collect` (numbers; above 2^53 as JSON.parse gives them). */
  toJSON(): Record<string, unknown>;
}

/**
 * How good an energy figure is: how it was obtained, the 95% interval the true energy
 * lies in (kWh), and `unresolved` for a window shorter than its sources can see.
 */
export interface EnergyReceipt {
  method: 'counter' | 'instant_power' | 'averaged_power' | 'mixed' | 'attributed';
  lowKwh: number;
  highKwh: number;
  resolution: 'resolved' | 'unresolved';
}

/** A model call a step made to another machine, with its estimated energy there. */
export interface RemoteCall {
  operation: string;
  provider?: string;
  model?: string;
  inputTokens?: number;
  outputTokens?: number;
  /** Never part of a measured figure; absent for a model with no factor. */
  estimate?: { lowKwh: number; highKwh: number; method: 'estimated'; estimator: string; source: string };
}

/** The energy/cost report: every field of the JSON report, camelCase. */
export interface EnergyReport {
  startedAt: Date;
  endedAt: Date;
  gpuSource: string | null;
  total: {
    energyKwh: number | null; gpuEnergyKwh: number | null; cpuEnergyKwh: number | null;
    dramEnergyKwh: number | null; cost: number | null; co2Grams: number | null;
    receipt?: EnergyReceipt;
    [field: string]: unknown;
  };
  /**
   * Per step: window figures (`gpuEnergyKwh`, `energyKwh`, `cost`: the device's energy
   * while the step was live; concurrent steps each count all of it) and attributed ones
   * (`attributed*`: the step's part; with each domain's `unattributedKwh` they add up).
   */
  agentScopes: {
    uuid: string; name: string; parentUuid: string | null; processId: number | null; weight: number | null;
    gpuEnergyKwh: number | null; energyKwh: number | null; cost: number | null;
    attributedGpuEnergyKwh: number | null; attributedEnergyKwh: number | null; attributedCost: number | null;
    startedAt: Date; endedAt: Date | null;
    receipt?: EnergyReceipt; attributedReceipt?: EnergyReceipt; remoteCall?: RemoteCall;
  }[];
  /** The remote model calls' estimates, summed: never part of `total`. */
  remoteEstimates?: {
    calls: number; estimatedCalls: number; lowKwh: number; highKwh: number; modelsWithoutEstimate: string[];
  };
  /** How attributed energy was divided (`process-share-then-weight`). */
  scopeAttribution: string | null;
  [field: string]: unknown;
  /** The CLI's table. */
  toString(): string;
  /** The snake_case JSON of `wattline run --report json`. */
  toJSON(): Record<string, unknown>;
}

export interface Options {
  /** A plugins.toml path, or an object of the same shape. */
  config?: string | Record<string, unknown>;
  scope?: 'global' | 'application_process' | 'process_tree' | 'runtime_default';
  pid?: number;
  intervalMs?: number;
  atofDir?: string;
  otlpEndpoint?: string;
  gpu?: boolean;
}

export class WattlineError extends Error {
  /** `WATTLINE_ERROR`, `WATTLINE_CONFIG` or `WATTLINE_HOST`. */
  code: string;
}
export class ConfigError extends WattlineError {
  code: 'WATTLINE_CONFIG';
}

export class AgentScope {
  readonly name: string;
  readonly ended: boolean;
  /** Its UUID (the `parent_uuid` of its children in the event file); under `wattline run`, the host's scope id. */
  readonly uuid: string;
  end(): Promise<void>;
  /**
   * Calls `fn()` with this step current: a step started inside it, or in the promises,
   * timers and callbacks it starts, without an explicit `parent` is this one's child.
   */
  run<T>(fn: () => T): T;
  [Symbol.asyncDispose](): Promise<void>;
}

/** How a step is started beyond its name. */
export interface ScopeOptions {
  /** Its share among the steps live beside it (tokens, batch size): positive, finite; 1 when absent. */
  weight?: number;
  /**
   * Its span's parent, a W3C `traceparent` (spans are sent when the `opentelemetry`
   * component's `spans` is on); default: the span active in `@opentelemetry/api`, if
   * the program has it.
   */
  traceparent?: string;
  /**
   * The step it nests in (not ended, of the same pipeline); default: the current step
   * (`withAgentScope`, `step.run`), if any. Explicit always wins.
   */
  parent?: AgentScope;
}

export class Pipeline {
  static start(options?: Options): Promise<Pipeline>;
  collect(): Promise<Snapshot>;
  agentScope(name: string, options?: ScopeOptions): Promise<AgentScope>;
  /**
   * Runs `fn(step)` in a new step, current for everything `fn` starts; ends it when
   * `fn` settles and returns what `fn` returns.
   */
  withAgentScope<T>(name: string, fn: (step: AgentScope) => T | Promise<T>): Promise<T>;
  withAgentScope<T>(name: string, options: ScopeOptions, fn: (step: AgentScope) => T | Promise<T>): Promise<T>;
  flush(): Promise<EnergyReport>;
  /** Sends what its exporters hold (with or without the energy component). */
  flushTelemetry(): Promise<void>;
  shutdown(): Promise<EnergyReport | null>;
  readonly report: EnergyReport | null | undefined;
  [Symbol.asyncDispose](): Promise<EnergyReport | null>;
}

/**
 * One snapshot on this process's on-demand series for these options: the first call
 * starts a pipeline (kept for the process), later calls with the same options continue
 * its series, so rates appear from the second call on.
 */
export function collect(options?: Pick<Options, 'config' | 'scope' | 'pid'>): Promise<Snapshot>;
/**
 * The reference's `collectResourceMetrics()`: one snapshot on the active plugin host's
 * series (`require('wattline/plugin').initialize`); refused without an active
 * `resource_metrics` component.
 */
export function collectResourceMetrics(): Promise<Snapshot>;
/** Sends what the module's pipelines (plugin host, `collect()`, `agentScope()`) hold for their exporters. */
export function flushTelemetry(): Promise<void>;

/**
 * One device as a GPU source's `sample()` answers it, in the `gen_ai.gpu.*` units;
 * every field optional (absent or `null`: not read, never 0). Other names are refused
 * (the sample then observes nothing, and the log says which record and field).
 */
export interface GpuSample {
  index?: number;
  /** The device's identifier; default `gpu-<index>`. */
  uuid?: string;
  name?: string;
  /** Default `nvidia`. */
  vendor?: AcceleratorVendor;
  /** % */
  utilization?: number | null;
  /** % */
  memoryUtilization?: number | null;
  /** MiB */
  memoryUsed?: number | null;
  /** MiB */
  memoryTotal?: number | null;
  /** °C */
  temperature?: number | null;
  /** W */
  powerDraw?: number | null;
  /** W */
  powerLimit?: number | null;
  /** MHz */
  smClock?: number | null;
  /** MHz */
  memoryClock?: number | null;
  /** % */
  fanSpeed?: number | null;
}

/** A source of GPU readings: a vendor tool, an exporter already running. */
export interface GpuSource {
  /** The devices now, or `undefined` when it observed nothing. Waited for at most 10 s. */
  sample(): Promise<GpuSample[] | undefined>;
  /** Its name in reports (`gpu_source`); default `node`. */
  name?: string;
}

/**
 * Replaces nvidia-smi, NVML and DRM for every pipeline started from now on: `factory()`
 * is called at each start; a factory returning `undefined` turns GPU reading off (the
 * `gpu` category is then `null`). `setGpuSource(undefined)` restores wattline's own.
 */
export function setGpuSource(factory: (() => GpuSource | undefined) | undefined): void;
export function agentScope(name: string, options?: ScopeOptions): Promise<AgentScope>;
/** Module-level `agentScope()` as `Pipeline.withAgentScope` runs it. */
export function withAgentScope<T>(name: string, fn: (step: AgentScope) => T | Promise<T>): Promise<T>;
export function withAgentScope<T>(name: string, options: ScopeOptions, fn: (step: AgentScope) => T | Promise<T>): Promise<T>;
/** The step current here (inside `withAgentScope` or `step.run`), if any. */
export function currentScope(): AgentScope | undefined;
export function defaultPipelineReport(): Promise<EnergyReport | null>;
/**
 * The report rebuilt from an event file written with `atofDir` (or by `wattline run
 * --atof`): plain, zstd-compressed or any part of a rotated set, as `wattline report
 * FILE` rebuilds it.
 */
export function reportFromAtof(path: string): Promise<EnergyReport>;
export function underWattlineRun(): boolean;
export function toCamel(name: string): string;
export function toSnake(name: string): string;
