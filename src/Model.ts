/**
 * The model port (DESIGN.md §11): the project's own push-based `Model` service. A provider
 * adapter answers `respond(request, sink)` by pushing parts into the sink, in order:
 * `text-delta`, `reasoning-delta {text, providerState?}`, `tool-call {id, name, rawArguments}`,
 * `usage`, and one final `finish {reason}`. The port carries no Effect `Stream` on the per-step
 * path and does no decoding of tool arguments: the loop validates them (DESIGN.md §8).
 *
 * @since 0.1.0
 */
import { Context, Effect, Schema, Stream } from "effect"
import type { Message } from "./Message.js"
import type { FinishReason, Usage } from "./SessionEvent.js"

/**
 * A tool as the provider sees it: `parameters` is a JSON Schema object.
 *
 * @since 0.1.0
 * @category models
 */
export interface ToolDefinition {
  readonly name: string
  readonly description: string
  readonly parameters: unknown
}

/**
 * One model request (DESIGN.md §6.2): the session's `instructions`, the tool definitions, and
 * exactly the model-visible history derived from the log. `messages` is the agent's live,
 * append-only history: it is valid for the duration of `respond` (copy it to keep it). Adapters
 * that convert messages should cache the conversion per message object (e.g. a `WeakMap`) so
 * that nothing per step is O(history) beyond serialization.
 *
 * @since 0.1.0
 * @category models
 */
export interface ModelRequest {
  readonly sessionId: string
  readonly turn: number
  readonly step: number
  readonly instructions?: string | undefined
  readonly tools: ReadonlyArray<ToolDefinition>
  readonly messages: ReadonlyArray<Message>
  /** Provider settings such as `maxTokens`, `temperature` (passed through). */
  readonly settings?: { readonly [key: string]: unknown } | undefined
}

/**
 * A part of a streamed model response (DESIGN.md §11).
 *
 * @since 0.1.0
 * @category models
 */
export type ModelPart =
  | { readonly type: "text-delta"; readonly text: string }
  | { readonly type: "reasoning-delta"; readonly text: string; readonly providerState?: unknown }
  | { readonly type: "tool-call"; readonly id: string; readonly name: string; readonly rawArguments: string }
  | { readonly type: "usage"; readonly usage: Usage }
  | { readonly type: "finish"; readonly reason: FinishReason }

/**
 * Receives the parts of one response, in order.
 *
 * @since 0.1.0
 * @category models
 */
export interface ModelSink {
  readonly part: (part: ModelPart) => Effect.Effect<void>
}

/**
 * A model failure (DESIGN.md §11): `code` (e.g. `HTTP_429`, `PROVIDER_ERROR`,
 * `SCRIPT_EXHAUSTED`), `status` for HTTP errors, `retryable`, `retryAfterMs` when the provider
 * asked for a delay. A retryable error is retried inside the same step; a final failure ends the
 * turn `{kind:"error"}` with this code.
 *
 * @since 0.1.0
 * @category errors
 */
export class ModelError extends Schema.TaggedError<ModelError>()("ModelError", {
  code: Schema.String,
  message: Schema.String,
  status: Schema.optional(Schema.Number),
  retryable: Schema.Boolean,
  retryAfterMs: Schema.optional(Schema.Number),
  cause: Schema.optional(Schema.Defect)
}) {}

/**
 * @since 0.1.0
 * @category services
 */
export interface ModelService {
  /** Provider name recorded in `request/header` and in assistant message sources. */
  readonly provider: string
  /** Model name recorded in `request/header` and in assistant message sources. */
  readonly model: string
  /** Streams one response into `sink`. Interruption cancels the request. */
  readonly respond: (request: ModelRequest, sink: ModelSink) => Effect.Effect<void, ModelError>
}

/**
 * @since 0.1.0
 * @category services
 */
export class Model extends Context.Tag("effect-agent-loop/Model")<Model, ModelService>() {}

/**
 * The same parts as an Effect `Stream`, for users who want one (not used by the loop: any
 * `Stream` run costs far more than a whole model step, DESIGN.md §11).
 *
 * @since 0.1.0
 * @category combinators
 */
export const toStream = (model: ModelService, request: ModelRequest): Stream.Stream<ModelPart, ModelError> =>
  Stream.asyncPush<ModelPart, ModelError>((emit) =>
    Effect.forkScoped(
      model.respond(request, {
        part: (p) =>
          Effect.sync(() => {
            emit.single(p)
          })
      }).pipe(
        Effect.matchCause({
          onFailure: (cause) => emit.halt(cause),
          onSuccess: () => emit.end()
        })
      )
    )
  )
