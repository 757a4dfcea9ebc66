import type { Pipeline } from './index';

/** The `gen_ai.operation.name` values that become steps by default: every operation the GenAI conventions name. */
export const DEFAULT_OPERATIONS: readonly string[];

/** What a span processor is handed (the parts of an SDK span this one reads). */
export interface ProcessedSpan {
  name: string;
  attributes: Record<string, unknown>;
  spanContext(): { traceId: string; spanId: string; traceFlags: number };
  parentSpanContext?: { spanId: string };
  parentSpanId?: string;
}

export interface GenAISpanProcessorOptions {
  /** The pipeline the steps live in; default: `wattline run`'s under it, else the process-wide one. */
  pipeline?: Pipeline;
  /** The operation names that become steps (default DEFAULT_OPERATIONS). */
  operations?: Iterable<string>;
  /** Instead of `operations`: whether a span becomes a step. */
  predicate?: (span: ProcessedSpan) => boolean;
  /** An attribute whose positive number, when the span has it at its start, is the step's weight. */
  weightAttribute?: string;
}

/**
 * An `@opentelemetry/sdk-trace-base` span processor turning GenAI spans into Agent
 * scopes, nested as the spans nest, each one's energy span a child of the span.
 */
export class GenAISpanProcessor {
  constructor(options?: GenAISpanProcessorOptions);
  onStart(span: ProcessedSpan, parentContext?: unknown): void;
  onEnd(span: ProcessedSpan): void;
  forceFlush(): Promise<void>;
  shutdown(): Promise<void>;
}
