/**
 * The model port (§11): the project's own push-based `Model` service. A provider
 * adapter answers `respond(request, sink)` by pushing parts into the sink, in order:
 * `text-delta`, `reasoning-delta {text, providerState?}`, `tool-call {id, name, rawArguments}`,
 * `usage`, and one final `finish {reason}`. The port carries no Effect `Stream` on the per-step
 * path and does no decoding of tool arguments: the loop validates them (§8).
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer, Schema, Stream } from "effect"
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
 * One model request (§6.2): the session's `instructions`, the tool definitions, and
 * exactly the model-visible history derived from the log. `messages` is the agent's live
 * history, append-only between compactions (a compaction gives the agent a new array, §17):
 * it is valid for the duration of `respond` (copy it to keep it). Adapters
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
  /**
   * `"compaction"` for a compaction's summarization request (§17; `step` is 0 there and
   * `turn` 0 between turns); absent for a step's request.
   */
  readonly purpose?: "compaction" | undefined
  readonly instructions?: string | undefined
  readonly tools: ReadonlyArray<ToolDefinition>
  readonly messages: ReadonlyArray<Message>
  /** Provider settings such as `maxTokens`, `temperature` (passed through). */
  readonly settings?: { readonly [key: string]: unknown } | undefined
}

/**
 * A part of a streamed model response (§11).
 *
 * @since 0.1.0
 * @category models
 */
export type ModelPart =
  | { readonly type: "text-delta"; readonly text: string }
  | { readonly type: "reasoning-delta"; readonly text: string; readonly providerState?: unknown }
  | { readonly type: "tool-call"; readonly id: string; readonly name: string; readonly rawArguments: string }
  | { readonly type: "usage"; readonly usage: Usage; readonly raw?: unknown }
  | { readonly type: "response"; readonly id?: string | undefined; readonly model?: string | undefined }
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
 * The codes of a `ModelError` (§11), each in one place with its meaning and whether the
 * error is retryable (`retryable` on the error says so for each failure; the loop retries a
 * retryable error inside the same step, and a final one ends the turn `{kind:"error"}` with its
 * code):
 *
 * | code | retryable | meaning |
 * |---|---|---|
 * | `HTTP_<status>` | 408, 409, 429, 5xx | a non-2xx answer whose body names no code the adapter keeps (`OpenAICompat`, `AiBridge`; `Anthropic` when the body is not its error envelope) |
 * | `CONTEXT_OVERFLOW` | no | the provider refused the request as longer than the model's context window (all three adapters): the turn compacts once and retries the request once (§17) |
 * | `PROVIDER_ERROR` | when the provider's error type names a transient failure (overload, rate limit, timeout, server error) | an error the provider reported inside a 200 response, or one with nothing more to read than its message |
 * | `NETWORK` | yes | the server could not be reached, or the connection broke while reading the response |
 * | `TIMEOUT` | yes | no response headers, or no next piece of the body, within `idleTimeoutMs` |
 * | `STREAM_INCOMPLETE` | yes | the stream ended before the provider's end of response |
 * | `DEADLINE_EXCEEDED` | no | the request, its retries included, outlasted `requestTimeoutMs` |
 * | `RESPONSE_TOO_LARGE` | no | the body is larger than `maxResponseBytes` |
 * | `BAD_RESPONSE` | no | a body or event that is not JSON or not the provider's shape, or an empty body |
 * | `INVALID_URL` | no | `baseUrl` is not a URL |
 * | `INVALID_REQUEST` | no | the request could not be encoded (`AiBridge`) |
 * | `MALFORMED_INPUT` | no | `@effect/ai` could not build the request (`AiBridge`) |
 * | `MALFORMED_OUTPUT` | no | `@effect/ai` rejected the response: a tool call of an unknown tool, or arguments that are not a JSON object (`AiBridge`) |
 * | `MODEL_FAILED` | no | the model port died with a defect instead of failing (the loop's code) |
 * | `SCRIPT_EXHAUSTED` | no | a scripted model was asked past the end of its script |
 * | `invalid_request_error`, `authentication_error`, `billing_error`, `permission_error`, `not_found_error`, `request_too_large`, `rate_limit_error`, `api_error`, `timeout_error`, `overloaded_error` | rate limit, API, timeout and overload errors; for an HTTP answer, its status decides unless `x-should-retry` says otherwise | Anthropic's error types, kept as Anthropic names them (`Anthropic`; an error type not in this list is `HTTP_<status>`, or `PROVIDER_ERROR` inside a stream) |
 *
 * A scripted model fails with the code its script gives, retryable as the script says.
 *
 * @since 0.1.0
 * @category errors
 */
export const ModelErrorCode = Schema.Union(
  Schema.TemplateLiteral(Schema.Literal("HTTP_"), Schema.Number),
  Schema.Literal(
    "CONTEXT_OVERFLOW",
    "PROVIDER_ERROR",
    "NETWORK",
    "TIMEOUT",
    "STREAM_INCOMPLETE",
    "DEADLINE_EXCEEDED",
    "RESPONSE_TOO_LARGE",
    "BAD_RESPONSE",
    "INVALID_URL",
    "INVALID_REQUEST",
    "MALFORMED_INPUT",
    "MALFORMED_OUTPUT",
    "MODEL_FAILED",
    "SCRIPT_EXHAUSTED"
  ),
  Schema.Literal(
    "invalid_request_error",
    "authentication_error",
    "billing_error",
    "permission_error",
    "not_found_error",
    "request_too_large",
    "rate_limit_error",
    "api_error",
    "timeout_error",
    "overloaded_error"
  )
)
/**
 * @since 0.1.0
 * @category errors
 */
export type ModelErrorCode = typeof ModelErrorCode.Type

/**
 * A model failure (§11): `code` (a `ModelErrorCode`: its table gives each code's
 * meaning and whether it is retryable), `message`, `status` for HTTP errors, `retryable`,
 * `retryAfterMs` when the provider asked for a delay. A retryable error is retried inside the
 * same step; a final failure ends the turn `{kind:"error"}` with this code.
 *
 * @since 0.1.0
 * @category errors
 */
export class ModelError extends Schema.TaggedError<ModelError>()("ModelError", {
  code: ModelErrorCode,
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
 * `Stream` run costs far more than a whole model step, §11).
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

/**
 * `Model` as a layer from a model service (a scripted model, the offline model, a provider's).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (model: ModelService): Layer.Layer<Model> => Layer.succeed(Model, model)
