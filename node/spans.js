'use strict';
// Steps with no code: OpenTelemetry GenAI spans become Agent scopes. Add one processor
// to the program's tracer provider and every span carrying a `gen_ai.operation.name`
// (an agent invocation, a tool call, a model call) becomes a step, nested as the spans
// nest:
//
//   const { GenAISpanProcessor } = require('wattline/spans');
//   new BasicTracerProvider({ spanProcessors: [new GenAISpanProcessor()] });
//
// With no `pipeline` it uses the pipeline of `wattline run` when the program runs under
// it, else the process-wide one module-level `agentScope()` uses. Each step is named
// after its span, its energy span is a child of the framework's span, and it nests in
// the step of the nearest ancestor span that became one (else in the current step).
// It never throws into the traced program: a step it cannot start is logged, skipped.

const wattline = require('./index.js');

const { currentScope, defaultPipelineNow, native, RUN_PIPELINE } = wattline._spanSupport;

/** The `gen_ai.operation.name` values that become steps by default: all the conventions name. */
const DEFAULT_OPERATIONS = Object.freeze([
  'invoke_agent',
  'create_agent',
  'execute_tool',
  'chat',
  'text_completion',
  'embeddings',
  'generate_content',
]);

const OPERATION_ATTRIBUTE = 'gen_ai.operation.name';

/** The operations of a model call: the ones whose span may be a remote call. */
const MODEL_CALL_OPERATIONS = new Set(['chat', 'text_completion', 'embeddings', 'generate_content']);

/** The attributes wattline reads of a model call's span at its end (the core decides). */
const MODEL_CALL_ATTRIBUTES = [
  OPERATION_ATTRIBUTE,
  'server.address',
  'gen_ai.provider.name',
  'gen_ai.system',
  'gen_ai.response.model',
  'gen_ai.request.model',
  'gen_ai.usage.input_tokens',
  'gen_ai.usage.output_tokens',
  'gen_ai.usage.prompt_tokens',
  'gen_ai.usage.completion_tokens',
];

/**
 * A model call's span at its end, as the core reads it (JSON), so a call served by
 * another machine gets its estimate; undefined for any other span.
 */
function spanEndOf(span) {
  const attributes = span.attributes || {};
  if (!MODEL_CALL_OPERATIONS.has(attributes[OPERATION_ATTRIBUTE])) return undefined;
  const picked = {};
  for (const key of MODEL_CALL_ATTRIBUTES) {
    if (attributes[key] !== undefined) picked[key] = attributes[key];
  }
  return JSON.stringify({ attributes: picked });
}

/** The W3C `traceparent` of `span` itself: the step's span becomes its child. */
function traceparentOf(span) {
  const context = span.spanContext();
  return `00-${context.traceId}-${context.spanId}-${context.traceFlags.toString(16).padStart(2, '0')}`;
}

/** The span id of `span`'s parent (SDK 2's `parentSpanContext`, SDK 1's `parentSpanId`). */
function parentSpanId(span) {
  return (span.parentSpanContext && span.parentSpanContext.spanId) || span.parentSpanId;
}

class GenAISpanProcessor {
  /**
   * `{ pipeline, operations, predicate, weightAttribute }`, all optional: the pipeline
   * the steps live in; the operation names that become steps (default
   * DEFAULT_OPERATIONS); instead, a predicate of the span; an attribute whose
   * positive number, when the span has it at its start, is the step's weight.
   */
  constructor(options = {}) {
    const { pipeline, operations = DEFAULT_OPERATIONS, predicate, weightAttribute } = options;
    if (pipeline !== undefined && !(pipeline instanceof wattline.Pipeline)) {
      throw new wattline.WattlineError('GenAISpanProcessor: pipeline must be a wattline Pipeline');
    }
    if (predicate !== undefined && typeof predicate !== 'function') {
      throw new TypeError('GenAISpanProcessor: predicate must be a function');
    }
    this._pipeline = pipeline;
    this._operations = new Set(operations);
    this._predicate = predicate;
    this._weightAttribute = weightAttribute;
    // Per live span id: the step its descendants nest in, and whether that step is its
    // own. A step is { started: a promise of { id, end, ended } or null, children: the
    // promises of its children's starts }: a step ends after its children started.
    this._spans = new Map();
    // Ends on their way, for forceFlush and shutdown.
    this._pending = new Set();
  }

  _selected(span) {
    if (this._predicate) return Boolean(this._predicate(span));
    return this._operations.has((span.attributes || {})[OPERATION_ATTRIBUTE]);
  }

  _weight(span) {
    if (!this._weightAttribute) return undefined;
    const value = (span.attributes || {})[this._weightAttribute];
    return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : undefined;
  }

  /** How steps start and end now, and the pipeline they live in. */
  async _target() {
    if (this._pipeline) {
      const inner = this._pipeline._running();
      return { start: (...args) => inner.startScope(...args), end: (id, spanEnd) => inner.endScope(id, spanEnd), owner: inner };
    }
    if (wattline.underWattlineRun()) {
      return { start: native.hostStartScope, end: native.hostEndScope, owner: RUN_PIPELINE };
    }
    const inner = (await defaultPipelineNow())._running();
    return { start: (...args) => inner.startScope(...args), end: (id, spanEnd) => inner.endScope(id, spanEnd), owner: inner };
  }

  onStart(span) {
    const id = span.spanContext().spanId;
    const parent = this._spans.get(parentSpanId(span));
    if (!this._selected(span)) {
      // Not a step: its descendants nest where it does.
      if (parent) this._spans.set(id, { step: parent.step, own: false });
      return;
    }
    const current = currentScope();
    const name = span.name;
    const started = Promise.all([this._target(), parent ? parent.step.started : null])
      .then(async ([target, parentStep]) => {
        let parentId = parentStep && !parentStep.ended ? parentStep.id : undefined;
        if (!parent && current && !current.ended && current._entry.owner === target.owner) parentId = current.uuid;
        const stepId = await target.start(name, this._weight(span), traceparentOf(span), parentId);
        return { id: stepId, end: target.end, ended: false };
      })
      .catch((error) => {
        console.warn(`wattline: span ${name} did not become a step: ${error.message}`);
        return null;
      });
    if (parent) parent.step.children.push(started);
    this._spans.set(id, { step: { started, children: [] }, own: true });
  }

  onEnd(span) {
    const id = span.spanContext().spanId;
    const entry = this._spans.get(id);
    this._spans.delete(id);
    if (!entry || !entry.own) return;
    const { started, children } = entry.step;
    const spanEnd = spanEndOf(span);
    const ending = Promise.all([started, ...children])
      .then(async ([step]) => {
        if (!step) return;
        step.ended = true;
        await step.end(step.id, spanEnd);
      })
      .catch((error) => console.warn(`wattline: the step of span ${span.name} did not end: ${error.message}`))
      .finally(() => this._pending.delete(ending));
    this._pending.add(ending);
  }

  /** Resolves once the steps of spans ended so far have ended. */
  async forceFlush() {
    await Promise.all([...this._pending]);
  }

  /** Ends the steps of spans still open, then as forceFlush. */
  async shutdown() {
    const open = [...this._spans.values()].filter((entry) => entry.own);
    this._spans.clear();
    for (const entry of open) {
      this._pending.add(entry.step.started.then((step) => step && !step.ended && step.end(step.id)).catch(() => {}));
    }
    await this.forceFlush();
  }
}

module.exports = { DEFAULT_OPERATIONS, GenAISpanProcessor };
