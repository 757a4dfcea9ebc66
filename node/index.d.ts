// Type declarations of the wattline package (written beside index.js).

export type Integer = number | bigint;

export type DurationUnit = 'microseconds' | 'milliseconds' | 'seconds' | 'minutes';
export type ByteUnit = 'bytes' | 'kilobytes' | 'megabytes' | 'gigabytes' | 'terabytes' | 'kibibytes' | 'mebibytes' | 'gibibytes' | 'tebibytes';
export type CapacityUnit = ByteUnit;
export type DataUnit = ByteUnit;
export type BandwidthUnit = 'bytes_per_second' | 'kibibytes_per_second' | 'mebibytes_per_second' | 'gibibytes_per_second' | 'bits_per_second' | 'megabits_per_second' | 'gigabits_per_second';
export type CpuUnit = 'logical_processors' | 'millicores';
export type UtilizationUnit = 'percentage' | 'fraction';
export type CountUnit = 'processes' | 'threads' | 'file_descriptors' | 'handles' | 'events' | 'operations' | 'packets' | 'errors';

/** One available reading; an unavailable one is `null`, never 0. */
export interface Measurement<U extends string> {
  /** A `number` up to Number.MAX_SAFE_INTEGER, a `bigint` above it. */
  value: Integer;
  unit: U;
}
type M<U extends string> = Measurement<U> | null;

export interface LimitEvent {
  resource: 'cpu' | 'memory' | 'processes';
  event: 'throttled' | 'high' | 'maximum' | 'out_of_memory' | 'terminated';
  count: M<CountUnit>;
}

export interface ProcessSampling {
  visibleProcesses: Integer;
  sampledProcesses: Integer;
  /** Keyed by canonical field path, e.g. `cpu.total_time` (data, not renamed). */
  fieldSampledProcesses: Record<string, Integer>;
}

export interface CpuMetrics {
  userTime: M<DurationUnit>; systemTime: M<DurationUnit>; totalTime: M<DurationUnit>;
  consumptionRate: M<CpuUnit>; throttledTime: M<DurationUnit>; effectiveLimit: M<CpuUnit>;
  somePressureStallTime: M<DurationUnit>; fullPressureStallTime: M<DurationUnit>;
  limitEvents: LimitEvent[];
}

export interface MemoryMetrics {
  systemUsed: M<CapacityUnit>; systemTotal: M<CapacityUnit>; systemAvailable: M<CapacityUnit>;
  resident: M<CapacityUnit>; private: M<CapacityUnit>; physicalFootprint: M<CapacityUnit>;
  virtualMemory: M<CapacityUnit>; peakResident: M<CapacityUnit>; limit: M<CapacityUnit>;
  environmentAccounted: M<CapacityUnit>; somePressureStallTime: M<DurationUnit>;
  fullPressureStallTime: M<DurationUnit>; outOfMemoryEventCount: M<CountUnit>;
  limitEvents: LimitEvent[];
}

export interface ProcessMetrics {
  activeCount: M<CountUnit>; descendantCount: M<CountUnit>; threadCount: M<CountUnit>;
  lifetimeCreationCount: M<CountUnit>; openFileDescriptorCount: M<CountUnit>;
  windowsHandleCount: M<CountUnit>; limitEvents: LimitEvent[];
}

export interface FilesystemMetrics {
  path: string; totalCapacity: M<CapacityUnit>; availableCapacity: M<CapacityUnit>; freeCapacity: M<CapacityUnit>;
}

export interface DiskMetrics {
  readData: M<DataUnit>; writeData: M<DataUnit>; readThroughput: M<BandwidthUnit>;
  writeThroughput: M<BandwidthUnit>; readOperations: M<CountUnit>; writeOperations: M<CountUnit>;
  filesystems: FilesystemMetrics[];
}

export type AcceleratorVendor = 'nvidia' | 'amd' | 'intel' | 'apple' | 'other';

export interface AcceleratorDeviceMetrics {
  vendor: AcceleratorVendor; deviceIdentifier: string; deviceIndex: number | null;
  memoryUsed: M<CapacityUnit>; computeUtilization: M<UtilizationUnit>;
}

export interface AcceleratorProcessMetrics extends AcceleratorDeviceMetrics {
  processId: number;
}

export interface GpuMetrics {
  deviceMetrics: AcceleratorDeviceMetrics[] | null;
  processMetrics: AcceleratorProcessMetrics[] | null;
}

export interface NetworkTrafficMetrics {
  receivedData: M<DataUnit>; transmittedData: M<DataUnit>; receiveThroughput: M<BandwidthUnit>;
  transmitThroughput: M<BandwidthUnit>; receivedPackets: M<CountUnit>; transmittedPackets: M<CountUnit>;
  receiveErrors: M<CountUnit>; transmitErrors: M<CountUnit>;
}

export interface NetworkInterfaceMetrics {
  name: string;
  traffic: NetworkTrafficMetrics;
}

export interface NetworkMetrics {
  measurementScope: 'global';
  system: NetworkTrafficMetrics;
  interfaces: NetworkInterfaceMetrics[];
}

export interface Snapshot {
  timestamp: Date;
  operatingSystem: 'linux' | 'macos' | 'windows' | 'unsupported';
  measurementScope: 'global' | 'application_process' | 'process_tree';
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

/** The energy/cost report: every field of the JSON report, camelCase. */
export interface EnergyReport {
  startedAt: Date;
  endedAt: Date;
  gpuSource: string | null;
  total: {
    energyKwh: number | null; gpuEnergyKwh: number | null; cpuEnergyKwh: number | null;
    dramEnergyKwh: number | null; cost: number | null; co2Grams: number | null;
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
  }[];
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
  end(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** How a step is started beyond its name. */
export interface ScopeOptions {
  /** Its share among the steps live beside it (tokens, batch size): positive, finite; 1 when absent. */
  weight?: number;
}

export class Pipeline {
  static start(options?: Options): Promise<Pipeline>;
  collect(): Promise<Snapshot>;
  agentScope(name: string, options?: ScopeOptions): Promise<AgentScope>;
  flush(): Promise<EnergyReport>;
  shutdown(): Promise<EnergyReport | null>;
  readonly report: EnergyReport | null | undefined;
  [Symbol.asyncDispose](): Promise<EnergyReport | null>;
}

export function collect(options?: Pick<Options, 'config' | 'scope' | 'pid'>): Promise<Snapshot>;
export function agentScope(name: string, options?: ScopeOptions): Promise<AgentScope>;
export function defaultPipelineReport(): Promise<EnergyReport | null>;
export function underWattlineRun(): boolean;
export function toCamel(name: string): string;
export function toSnake(name: string): string;
