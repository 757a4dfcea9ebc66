// Type declarations of `wattline/plugin` (plugin.js): the reference's plugin-host shape.

/** One top-level component: its kind, whether it runs, its own fields (snake_case, as in plugins.toml). */
export interface ComponentSpec {
  kind: string;
  enabled?: boolean;
  config?: Record<string, unknown>;
}

/** The configuration given in code: it overrides the plugins.toml files. */
export interface PluginConfig {
  version: 1;
  components: ComponentSpec[];
  /** Accepted for its shape; wattline refuses every unknown component, field and value. */
  policy?: Record<string, unknown>;
}

/** The owned lifetime of the process's plugin host. */
export class PluginHostActivation {
  readonly isActive: boolean;
  /** Stops the host's pipeline; later `collectResourceMetrics()` calls are refused. Repeated calls are safe. */
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * Starts the process's plugin host: the plugins.toml files (`additionalPluginsToml` in
 * place of the user's), then `config` over them. Refused while another is active.
 */
export function initialize(config: PluginConfig, additionalPluginsToml?: string): Promise<PluginHostActivation>;
