'use strict';
// The reference's plugin-host shape (`nemo-relay-node/plugin`), for code written
// against it: `await initialize({ version: 1, components: [{ kind:
// 'resource_metrics', enabled: true }] })`, then `collectResourceMetrics()` from the
// main module, then `await activation.close()`. A thin facade over the crate's
// `wattline::plugin`: the activation is a wattline pipeline started from the
// configuration, the one process-wide host `collectResourceMetrics()` reads.

const { _hostSupport: host } = require('./index.js');

/** The owned lifetime of the process's plugin host. */
class PluginHostActivation {
  constructor(native) {
    this._native = native;
  }

  /** Whether it has not been closed. */
  get isActive() {
    return this._native.isActive;
  }

  /** Stops the host's pipeline; later `collectResourceMetrics()` calls are refused. Repeated calls are safe. */
  async close() {
    await host.close(this._native);
  }
}
if (Symbol.asyncDispose) {
  PluginHostActivation.prototype[Symbol.asyncDispose] = function dispose() {
    return this.close();
  };
}

/**
 * Starts the process's plugin host: the plugins.toml files (`additionalPluginsToml` in
 * place of the user's), then `config` over them. Refused while another activation is
 * active. Unknown fields and values are refused whatever `policy` says.
 */
async function initialize(config, additionalPluginsToml) {
  if (!config || typeof config !== 'object') {
    throw new host.ConfigError(`<config>: a plugin configuration object (got ${config === null ? 'null' : typeof config})`);
  }
  const { policy, ...document } = config; // eslint-disable-line no-unused-vars
  if (additionalPluginsToml !== undefined && additionalPluginsToml !== null && typeof additionalPluginsToml !== 'string') {
    throw new host.ConfigError(`additionalPluginsToml: a path (got ${typeof additionalPluginsToml})`);
  }
  return new PluginHostActivation(await host.start(JSON.stringify(document), additionalPluginsToml ?? undefined));
}

module.exports = { PluginHostActivation, initialize };
