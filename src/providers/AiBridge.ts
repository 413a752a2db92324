/**
 * A bridge from any `@effect/ai` provider to the `Model` port (§11):
 * `fromLanguageModel(options)` reads the `LanguageModel` in context (e.g. `@effect/ai-openai`'s
 * `OpenAiLanguageModel`, the OpenAI Responses API) and returns a `ModelService`. Each `respond`
 * maps the request to an `@effect/ai` `Prompt`, runs `LanguageModel.streamText` with tool call
 * resolution disabled, and pushes every stream part into the sink as it arrives: `text-delta`,
 * `reasoning-delta` (with a `providerState`, below), `tool-call`, `response`, `usage` and one
 * `finish`. Every failure is a typed `ModelError`. Tools are validated and run by the loop
 * (§8), never by `@effect/ai`. Imported as `effect-agent-loop/ai-bridge`, not from the
 * main entry: `@effect/ai` is an optional peer dependency that only this module loads.
 *
 * Mapping of the request (§11 rules):
 * - `instructions` → one `system` message, first; nothing else becomes a system message.
 * - Each user-role message (direct prompt, context, steer) → its own `user` message, in log
 *   order: `text` blocks → text parts, `image` blocks → file parts (`Uint8Array` data).
 * - An assistant message → one `assistant` message: `text`, `reasoning` and `tool-call` parts in
 *   block order (empty text skipped). Tool-call `params` are the raw argument string parsed when
 *   it is a JSON object, else `{}` (the loop's `INVALID_ARGUMENTS` result tells the model).
 * - Its calls' results → one `tool` message per call, in call order, directly after it and before
 *   any user message (a result logged after a context message is moved up). `result` is the
 *   result's text blocks joined with "\n" (a string), `isFailure` its `isError`, `name` the
 *   call's tool name. A call without a result gets a synthetic error result saying its outcome
 *   is unknown; a result that answers no call of the preceding assistant message is sent as a
 *   user text `Result of tool call <id>: …`, as in the Anthropic adapter.
 * - Tools → `@effect/ai` tools whose parameters schema is `Struct({}, Record(String, Unknown))`
 *   annotated with the definition's JSON Schema (`jsonSchema`), so providers send that schema
 *   as is and any JSON object decodes; `toolChoice: "auto"`.
 * - Converted messages are cached per message object; the tools per tools array.
 *
 * Mapping of the response:
 * - `text-delta` → `text-delta`; `reasoning-delta` → `reasoning-delta` (text only). When a run
 *   of consecutive reasoning items ends (at the next text or tool call, or at the finish), one
 *   `reasoning-delta` with empty text carries `providerState: ReasoningState`: each item's text
 *   and its provider metadata (for `@effect/ai-openai`: `{openai: {itemId, encryptedContent}}`),
 *   plus the metadata of the item that followed it. The loop keeps it on the `reasoning` block,
 *   and the next request sends the items back as reasoning parts with those `options`, and the
 *   following text or tool call with its own (OpenAI wants a reasoning item's following item
 *   back with it). Nothing is attached when the provider gave no metadata.
 * - `tool-call` → `tool-call`, `rawArguments` = the concatenated `tool-params-delta`s of that
 *   call (the provider's own string); a call that streamed no deltas gets
 *   `JSON.stringify(params)` (a re-serialization: whitespace, key order of duplicates and number
 *   spelling may differ from the wire). Provider-executed calls and their results are skipped.
 * - `response-metadata` → `response` (its `id` and `modelId` as `model`, when either is set; for
 *   `@effect/ai-openai` the `response.created` event's `id` and `model`).
 * - `finish` → `usage` (when any count is known, below) then `finish`: `stop`, `length`,
 *   `content-filter` kept; `tool-calls`, `pause`, `other`, `unknown` → `tool-calls` when the
 *   response had tool calls, else `stop`; `error` fails with `PROVIDER_ERROR`. Reading stops at
 *   the first `finish`.
 * - Usage (§18): `@effect/ai`'s `Usage` of the `finish` part → `inputTokens`,
 *   `outputTokens`, `reasoningTokens` as given, `cachedInputTokens` → `cacheReadTokens`,
 *   `cacheWriteTokens` 0 (`@effect/ai` has no such count), 0 for any count not given;
 *   `totalTokens` as given alongside an input or output count. `@effect/ai-openai` (Responses
 *   API) fills them from `usage.input_tokens` (the whole prompt: OpenAI counts
 *   `input_tokens_details.cached_tokens` inside it, so cached tokens are counted once),
 *   `output_tokens` (reasoning included), `output_tokens_details.reasoning_tokens`,
 *   `input_tokens_details.cached_tokens`, and a total it computes as input + output (not the
 *   wire's `total_tokens`). The wire's usage object does not reach the bridge (`@effect/ai`
 *   keeps only these counts), so the part's `raw` is `@effect/ai`'s `Usage` as plain JSON, e.g.
 *   `{inputTokens: 12, outputTokens: 5, totalTokens: 17, reasoningTokens: 0,
 *   cachedInputTokens: 0}`.
 * - A request longer than the model's context window (an HTTP 400/413 or an `error` part that
 *   says so, read as in `OpenAICompat`) fails with `CONTEXT_OVERFLOW`, so that the loop compacts
 *   and retries (§17).
 *
 * Limitations (found in `@effect/ai` 0.37.0 and `@effect/ai-openai` 0.41.0):
 * - **Cost**: every call runs an Effect `Stream`, and `@effect/ai` builds a new decoding schema
 *   for the response parts (a union over the request's tools) and decodes each chunk with it.
 *   Measured here (2 vCPU, a five-part scripted response): 2.3 ms per call without tools,
 *   3.6 ms with two, of which a bare `LanguageModel.streamText` takes 1–2 ms; `ScriptedModel.make`
 *   answers the same request in 15–25 µs (§11). Network time dwarfs it; a step
 *   through the bridge is not on the loop's µs budget.
 * - **Tool calls are decoded by `@effect/ai`** even with resolution disabled: a call naming a
 *   tool that is not in the request, or whose arguments are not a JSON object, fails the whole
 *   stream (`MALFORMED_OUTPUT`) instead of reaching the loop's `UNKNOWN_TOOL` /
 *   `INVALID_ARGUMENTS` results. Decoding is per stream chunk, so the parts that arrived in the
 *   same chunk as the bad call are lost too. `@effect/ai-openai` already fails the stream on
 *   arguments that are not JSON (an empty string included) or hold a `__proto__` key (its
 *   secure parse). `MALFORMED_OUTPUT` is not retryable.
 * - **Tool results** reach the provider as `@effect/ai` sees them: `@effect/ai-openai` sends
 *   `JSON.stringify(result)` (a text result arrives quoted, `"\"ok\""`) and drops `isFailure`;
 *   images inside tool results are not sent. Assistant tool-call arguments are re-serialized
 *   from the parsed object by the provider.
 * - **providerState coverage**: only reasoning blocks carry state, so the metadata of a text or
 *   tool-call item survives only when it directly follows reasoning. Whether a provider accepts
 *   its own response metadata back as prompt `options` is the provider's contract; it holds for
 *   `@effect/ai-openai` (reasoning `itemId`/`encryptedContent`, text and call `itemId`), others
 *   are unverified, and nothing was checked against the live OpenAI API.
 * - **Settings**: `@effect/ai` has no per-call settings; `request.settings` reaches the
 *   provider only through `options.configure` (e.g. `OpenAiLanguageModel.withConfigOverride`).
 * - **OpenAI specifics** (`@effect/ai-openai`): tools are sent with `strict: true` unless the
 *   model's config says `strict: false` (strict mode rejects schemas with optional properties,
 *   which most tool schemas have); refusals are not streamed (no `response.refusal.delta`
 *   handling), so a refusal arrives as an empty answer; a `response.failed` event becomes an
 *   ordinary `finish` (reason `stop`) and its error is lost; stream events it cannot decode are
 *   skipped silently.
 * - **Secrets**: `@effect/ai`'s `HttpRequestError`/`HttpResponseError` keep the request headers
 *   (the API key) unredacted outside a logger, so a `ModelError` never keeps them as `cause`:
 *   only the transport's own error (network failures) or nothing (HTTP statuses).
 *
 * @since 0.1.0
 */
import type * as AiError from "@effect/ai/AiError"
import * as LanguageModel from "@effect/ai/LanguageModel"
import * as Prompt from "@effect/ai/Prompt"
import type * as Response from "@effect/ai/Response"
import * as Tool from "@effect/ai/Tool"
import type * as Toolkit from "@effect/ai/Toolkit"
import { Duration, Effect, Layer, Option, Schema, Stream } from "effect"
import { type ContentBlock, textOf, type ToolResultBlock } from "../Message.js"
import {
  Model,
  ModelError,
  type ModelPart,
  type ModelRequest,
  type ModelService,
  type ModelSink,
  type ToolDefinition
} from "../Model.js"
import type { FinishReason } from "../SessionEvent.js"
import { fromAiError, streamError } from "./internal/aiError.js"
import * as History from "./internal/history.js"
import { DEFAULT_IDLE_TIMEOUT_MS, opaqueError, redactError } from "./internal/http.js"
import { isRecord, normalizedUsage, num, objectArguments, perObject, responsePart, stopOrToolCalls } from "./internal/wire.js"

/**
 * Options of the bridge.
 *
 * - `provider`: the provider name recorded in `request/header` (default `"effect-ai"`).
 * - `model`: the model name recorded in `request/header` (default `"unknown"`: a
 *   `LanguageModel` does not tell its model).
 * - `idleTimeoutMs`: how long to wait for the first part of the response, and then for each
 *   next one, before failing with `TIMEOUT` (retryable). Default 120,000 (as the HTTP adapters).
 *   Uses the Effect `Clock`.
 * - `configure`: wraps each call, given its request: the way to pass `request.settings` to a
 *   provider, e.g. `(request) => OpenAiLanguageModel.withConfigOverride({ max_output_tokens:
 *   request.settings?.maxTokens as number | undefined })`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly provider?: string | undefined
  readonly model?: string | undefined
  readonly idleTimeoutMs?: number | undefined
  /**
   * Values never to show in an error message (the provider's API key): every `ModelError` the
   * bridge fails with has them, `Bearer …` tokens and key-shaped tokens (`sk-…`, `gsk_…`,
   * `xai-…`) replaced by `[redacted]`, as the HTTP providers do (a server may echo the key).
   */
  readonly secrets?: ReadonlyArray<string> | undefined
  readonly configure?:
    | ((request: ModelRequest) => <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>)
    | undefined
}

/**
 * The `providerState` of a `reasoning` block streamed through the bridge: the reasoning items
 * of the block, each with its text and the provider metadata it is sent back with (as prompt
 * `options`), and the metadata of the text or tool call that directly followed them.
 *
 * @since 0.1.0
 * @category models
 */
export interface ReasoningState {
  readonly kind: "effect-ai"
  readonly parts: ReadonlyArray<{ readonly text: string; readonly options: Prompt.ProviderOptions }>
  readonly next?: {
    readonly type: "text" | "tool-call"
    /** The tool call id (for `type: "tool-call"`). */
    readonly id?: string | undefined
    readonly options: Prompt.ProviderOptions
  } | undefined
}

/**
 * Builds the `ModelService` from the `LanguageModel` in context (§11).
 *
 * `respond` fails with `ModelError`, `code`:
 * - `HTTP_<status>` for a non-2xx answer: `message` is the body's `error.message`, prefixed with
 *   its `error.type` (else the body text, else `HTTP <status>`); `status` set; retryable for 408,
 *   409, 429 and 5xx; `retryAfterMs` from `retry-after-ms` or `retry-after`;
 * - `CONTEXT_OVERFLOW` (not retryable; §17): the request is longer than the model's context
 *   window: a 400 or 413 answer, or an `error` part of the stream, whose error has `code`
 *   `context_length_exceeded` (OpenAI) or `type` `exceed_context_size_error` (llama.cpp), or
 *   whose message says `maximum context length is N tokens` (OpenAI, DeepSeek, vLLM) or
 *   `prompt is too long: N tokens > M maximum` (Anthropic); `message` and `status` as for
 *   `HTTP_<status>` (no `status` for a stream part). The loop compacts the history and
 *   retries once;
 * - `NETWORK` (retryable): the request could not be sent, or the body broke off;
 * - `INVALID_URL`, `INVALID_REQUEST`: the request could not be built or encoded;
 * - `MALFORMED_INPUT`: the provider cannot express the prompt (e.g. a media type it rejects);
 * - `MALFORMED_OUTPUT`: the response could not be decoded, including a tool call naming an
 *   unknown tool or with arguments that are not a JSON object (see the module's limitations);
 * - `PROVIDER_ERROR`: an error part in the stream (retryable when its code or type names a rate
 *   limit, overload, timeout or server error), a `finish` with reason `error`, or an
 *   `@effect/ai` `UnknownError`;
 * - `STREAM_INCOMPLETE` (retryable): the stream ended without a `finish`;
 * - `TIMEOUT` (retryable): nothing arrived within `idleTimeoutMs`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromLanguageModel = (
  options?: Options
): Effect.Effect<ModelService, never, LanguageModel.LanguageModel> =>
  Effect.map(LanguageModel.LanguageModel, (languageModel) => make(languageModel, options ?? {}))

/**
 * The bridge as the `Model` service, leaving `LanguageModel` as a requirement:
 * `AiBridge.layer({ model: "gpt-5" }).pipe(Layer.provide(OpenAiLanguageModel.layer({ model:
 * "gpt-5" })), Layer.provide(OpenAiClient.layer({ apiKey })), Layer.provide(NodeHttpClient.layerUndici))`.
 *
 * @example
 * ```ts
 * import { OpenAiClient, OpenAiLanguageModel } from "@effect/ai-openai"
 * import { NodeHttpClient } from "@effect/platform-node"
 * import { Config, Layer } from "effect"
 * import * as AiBridge from "effect-agent-loop/ai-bridge"
 *
 * const model = AiBridge.layer().pipe(
 *   Layer.provide(OpenAiLanguageModel.layer({ model: "gpt-5-mini" })),
 *   Layer.provide(OpenAiClient.layerConfig({ apiKey: Config.redacted("OPENAI_API_KEY") })),
 *   Layer.provide(NodeHttpClient.layerUndici)
 * )
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options?: Options): Layer.Layer<Model, never, LanguageModel.LanguageModel> =>
  Layer.effect(Model, fromLanguageModel(options))

// ---------------------------------------------------------------------------------------------
// Service
// ---------------------------------------------------------------------------------------------

type Tools = Record<string, Tool.Any>
type StreamPart = Response.StreamPart<Tools>

const make = (languageModel: LanguageModel.Service, options: Options): ModelService => {
  const provider = options.provider ?? "effect-ai"
  const configure = options.configure
  const idleTimeoutMs = options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS
  const secrets = options.secrets ?? []

  const respond = Effect.fn("AiBridge.respond")(function*(request: ModelRequest, sink: ModelSink) {
    const prompt = Prompt.fromMessages(assemblePrompt(request))
    const toolkit = toolkitFor(request.tools)
    const stream: Stream.Stream<StreamPart, AiError.AiError> = toolkit === undefined
      ? languageModel.streamText({ prompt })
      : languageModel.streamText({ prompt, toolkit, toolChoice: "auto", disableToolCallResolution: true })
    const state = new StreamState(sink, provider)
    // Nothing for idleTimeoutMs (before the first part, or between two parts): TIMEOUT.
    const guarded = Stream.timeoutFail(
      stream,
      () =>
        new ModelError({
          code: "TIMEOUT",
          message: `${provider}: nothing arrived for ${idleTimeoutMs} ms`,
          retryable: true
        }),
      Duration.millis(idleTimeoutMs)
    )
    let run: Effect.Effect<void, AiError.AiError | ModelError> = Effect.zipRight(
      Stream.runForEachWhile(guarded, (part) => state.onPart(part)),
      Effect.suspend(() => state.end())
    )
    if (configure !== undefined) run = configure(request)(run)
    return yield* Effect.catchAll(
      run,
      (error) =>
        error._tag === "ModelError"
          ? Effect.fail(redactError(error, secrets))
          : Effect.flatMap(fromAiError(error, provider, request.tools), (e) => Effect.fail(redactError(e, secrets)))
    )
  })

  return Model.of({ provider, model: options.model ?? "unknown", respond })
}

// ---------------------------------------------------------------------------------------------
// Request: Prompt mapping (§11), cached per message object
// ---------------------------------------------------------------------------------------------

interface ResultEntry {
  readonly block: ToolResultBlock
  /** The tool message, built once the call's name is known. */
  message?: { readonly name: string; readonly message: Prompt.ToolMessage } | undefined
  /** The user text message it becomes when it answers no call. */
  stray?: Prompt.UserMessage | undefined
}

type Converted = History.Converted<Prompt.AssistantMessage, ResultEntry, Prompt.UserMessage>

/**
 * Each assistant message's tool messages in call order right after it, then the user messages
 * logged after it, in log order.
 */
const WIRE: History.Wire<Prompt.AssistantMessage, ResultEntry, Prompt.UserMessage, Prompt.Message> = {
  convert: (message) => convertMessage(message),
  callId: (entry) => entry.block.toolCallId,
  assistant: (message) => message,
  result: (entry, call) => toolMessage(entry, call.name),
  missing: (call) => missingResult(call),
  stray: (entry) => entry.stray ??= strayResult(entry.block),
  user: (message) => message
}

/** The prompt's messages: the system message, then the history (`History.orderHistory`). */
const assemblePrompt = (request: ModelRequest): Array<Prompt.Message> => {
  const out: Array<Prompt.Message> = []
  if (request.instructions !== undefined && request.instructions !== "") {
    out.push(Prompt.makeMessage("system", { content: request.instructions }))
  }
  return History.orderHistory(request.messages, WIRE, "call", out)
}

const convertAssistant = (content: ReadonlyArray<ContentBlock>): Converted => {
  const parts: Array<Prompt.AssistantMessagePart> = []
  const calls: Array<History.Call> = []
  let next: ReasoningState["next"] // the item that followed the last reasoning block
  for (const block of content) {
    switch (block.type) {
      case "reasoning": {
        const state = reasoningState(block.providerState)
        if (state !== undefined) {
          for (const part of state.parts) parts.push(Prompt.makePart("reasoning", { text: part.text, options: part.options }))
          next = state.next
        } else {
          if (block.text !== "") parts.push(Prompt.makePart("reasoning", { text: block.text }))
          next = undefined
        }
        break
      }
      case "text": {
        if (block.text !== "") {
          parts.push(Prompt.makePart("text", {
            text: block.text,
            ...(next?.type === "text" ? { options: next.options } : {})
          }))
        }
        next = undefined
        break
      }
      case "tool-call": {
        calls.push({ id: block.id, name: block.name })
        parts.push(Prompt.makePart("tool-call", {
          id: block.id,
          name: block.name,
          params: objectArguments(block.arguments),
          providerExecuted: false,
          ...(next?.type === "tool-call" && next.id === block.id ? { options: next.options } : {})
        }))
        next = undefined
        break
      }
    }
  }
  return {
    _tag: "assistant",
    message: parts.length === 0 ? undefined : Prompt.makeMessage("assistant", { content: parts }),
    calls
  }
}

/** The bridge's own reasoning state, else `undefined` (another adapter's, or none). */
const reasoningState = (state: unknown): ReasoningState | undefined =>
  isRecord(state) && state.kind === "effect-ai" && Array.isArray(state.parts) ? state as unknown as ReasoningState : undefined

const convertUser = (content: ReadonlyArray<ContentBlock>): Converted => {
  const { parts, results } = History.splitUser(
    content,
    (block): ResultEntry => ({ block }),
    (block): Prompt.UserMessagePart =>
      block.type === "text"
        ? Prompt.makePart("text", { text: block.text })
        : Prompt.makePart("file", { mediaType: block.mediaType, data: Buffer.from(block.data, "base64") })
  )
  return {
    _tag: "user",
    results,
    message: parts.length === 0 ? undefined : Prompt.makeMessage("user", { content: parts })
  }
}

const toolMessage = (entry: ResultEntry, name: string): Prompt.ToolMessage => {
  if (entry.message === undefined || entry.message.name !== name) {
    const block = entry.block
    entry.message = {
      name,
      message: Prompt.makeMessage("tool", {
        content: [Prompt.makePart("tool-result", {
          id: block.toolCallId,
          name,
          isFailure: block.isError === true,
          result: textOf(block.content),
          providerExecuted: false
        })]
      })
    }
  }
  return entry.message.message
}

const missingResult = (call: History.Call): Prompt.ToolMessage =>
  Prompt.makeMessage("tool", {
    content: [Prompt.makePart("tool-result", {
      id: call.id,
      name: call.name,
      isFailure: true,
      result: History.MISSING_RESULT,
      providerExecuted: false
    })]
  })

const strayResult = (block: ToolResultBlock): Prompt.UserMessage =>
  Prompt.makeMessage("user", {
    content: [Prompt.makePart("text", {
      text: History.strayResultText(block)
    })]
  })

// ---------------------------------------------------------------------------------------------
// Request: tools
// ---------------------------------------------------------------------------------------------

/** A never-called handler: the bridge always disables tool call resolution (§8). */
const noHandler = (name: PropertyKey): Effect.Effect<never> =>
  Effect.dieMessage(`AiBridge: tool ${String(name)} cannot run inside @effect/ai (tool call resolution is disabled)`)

/**
 * The request's tools as a toolkit (`undefined` when there are none): each tool's parameters
 * schema accepts any JSON object and carries the definition's JSON Schema as its `jsonSchema`
 * annotation, which `Tool.getJsonSchema` returns as is (when it has a `type`).
 */
const toolkitFor = (definitions: ReadonlyArray<ToolDefinition>): Toolkit.WithHandler<Tools> | undefined =>
  definitions.length === 0 ? undefined : toolkitOf(definitions)

/** One toolkit per tools array. */
const toolkitOf = perObject((definitions: ReadonlyArray<ToolDefinition>): Toolkit.WithHandler<Tools> => {
  const tools: Tools = {}
  for (const definition of definitions) {
    const jsonSchema = isRecord(definition.parameters) ? definition.parameters : { type: "object", properties: {} }
    tools[definition.name] = Tool.make(definition.name, { description: definition.description }).setParameters(
      Schema.Struct({}, Schema.Record({ key: Schema.String, value: Schema.Unknown })).annotations({ jsonSchema })
    )
  }
  return { tools, handle: noHandler as Toolkit.WithHandler<Tools>["handle"] }
})

// ---------------------------------------------------------------------------------------------
// Response
// ---------------------------------------------------------------------------------------------

type Metadata = { [provider: string]: { [key: string]: unknown } }

interface Segment {
  text: string
  readonly metadata: Metadata
}

const CONTINUE: Effect.Effect<boolean> = Effect.succeed(true)
const STOP: Effect.Effect<boolean> = Effect.succeed(false)

/** The parts of one response, pushed as they arrive. */
class StreamState {
  private finished = false
  private calls = 0
  /** The reasoning items of the reasoning block being streamed (closed by the next text or call). */
  private run: Array<Segment> | undefined = undefined
  private readonly segments = new Map<string, Segment>()
  private readonly textMetadata = new Map<string, Metadata>()
  private readonly rawArguments = new Map<string, string>()

  constructor(private readonly sink: ModelSink, private readonly provider: string) {}

  onPart(part: StreamPart): Effect.Effect<boolean, ModelError> {
    switch (part.type) {
      case "text-start": {
        if (hasMetadata(part.metadata)) this.textMetadata.set(part.id, mergeMetadata({}, part.metadata))
        return CONTINUE
      }
      case "text-delta": {
        if (part.delta === "") return CONTINUE
        return this.push({ type: "text-delta", text: part.delta }, { type: "text", metadata: this.textMetadata.get(part.id) })
      }
      case "reasoning-start": {
        this.segment(part.id, part.metadata)
        return CONTINUE
      }
      case "reasoning-delta": {
        const segment = this.segment(part.id, part.metadata)
        if (part.delta === "") return CONTINUE
        segment.text += part.delta
        return Effect.as(this.sink.part({ type: "reasoning-delta", text: part.delta }), true)
      }
      case "reasoning-end": {
        const segment = this.segments.get(part.id)
        if (segment !== undefined) mergeMetadata(segment.metadata, part.metadata)
        return CONTINUE
      }
      case "tool-params-start": {
        this.rawArguments.set(part.id, "")
        return CONTINUE
      }
      case "tool-params-delta": {
        const raw = this.rawArguments.get(part.id)
        this.rawArguments.set(part.id, raw === undefined ? part.delta : raw + part.delta)
        return CONTINUE
      }
      case "tool-call": {
        if (part.providerExecuted) return CONTINUE
        this.calls++
        const raw = this.rawArguments.get(part.id)
        return this.push(
          {
            type: "tool-call",
            id: part.id,
            name: part.name,
            rawArguments: raw === undefined || raw === "" ? JSON.stringify(part.params ?? {}) : raw
          },
          { type: "tool-call", id: part.id, metadata: part.metadata }
        )
      }
      case "response-metadata": {
        const response = responsePart(Option.getOrUndefined(part.id), Option.getOrUndefined(part.modelId))
        return response === undefined ? CONTINUE : Effect.as(this.sink.part(response), true)
      }
      case "error":
        return Effect.fail(streamError(part.error, this.provider))
      case "finish":
        return this.finish(part)
      default:
        // text-end, tool-params-end, tool-result (provider-executed), file, source
        return CONTINUE
    }
  }

  /** The stream ended: without a `finish`, the response is incomplete. */
  end(): Effect.Effect<void, ModelError> {
    return this.finished ? Effect.void : Effect.fail(
      new ModelError({
        code: "STREAM_INCOMPLETE",
        message: `${this.provider}: the response stream ended without a finish`,
        retryable: true
      })
    )
  }

  private segment(id: string, metadata: Response.ProviderMetadata): Segment {
    let segment = this.segments.get(id)
    if (segment === undefined) {
      segment = { text: "", metadata: {} }
      this.segments.set(id, segment)
      ;(this.run ??= []).push(segment)
    }
    mergeMetadata(segment.metadata, metadata)
    return segment
  }

  /** Pushes `part`, after the state of the reasoning block it closes, if any. */
  private push(
    part: ModelPart,
    next: { readonly type: "text" | "tool-call"; readonly id?: string; readonly metadata: Response.ProviderMetadata | undefined }
  ): Effect.Effect<boolean> {
    const state = this.closeRun(next)
    const push = Effect.as(this.sink.part(part), true)
    return state === undefined ? push : Effect.zipRight(this.sink.part(state), push)
  }

  /**
   * Ends the reasoning run: a `reasoning-delta` with empty text whose `providerState` holds the
   * run's items and what followed them, or `undefined` when the provider gave no metadata.
   */
  private closeRun(
    next:
      | { readonly type: "text" | "tool-call"; readonly id?: string; readonly metadata: Response.ProviderMetadata | undefined }
      | undefined
  ): ModelPart | undefined {
    const run = this.run
    if (run === undefined) return undefined
    this.run = undefined
    if (!run.some((s) => hasMetadata(s.metadata))) return undefined
    const providerState: ReasoningState = {
      kind: "effect-ai",
      parts: run.map((s) => ({ text: s.text, options: plainJson(s.metadata) })),
      ...(next !== undefined && next.metadata !== undefined && hasMetadata(next.metadata)
        ? {
          next: {
            type: next.type,
            ...(next.id !== undefined ? { id: next.id } : {}),
            options: plainJson(next.metadata)
          }
        }
        : {})
    }
    return { type: "reasoning-delta", text: "", providerState }
  }

  private finish(part: Response.FinishPart): Effect.Effect<boolean, ModelError> {
    this.finished = true
    if (part.reason === "error") {
      return Effect.fail(opaqueError(`${this.provider}: the response finished with reason "error"`))
    }
    const parts: Array<ModelPart> = []
    const state = this.closeRun(undefined)
    if (state !== undefined) parts.push(state)
    const usage = mapUsage(part.usage)
    if (usage !== undefined) parts.push(usage)
    parts.push({ type: "finish", reason: mapFinishReason(part.reason, this.calls > 0) })
    let effect: Effect.Effect<boolean> = STOP
    for (let i = parts.length - 1; i >= 0; i--) effect = Effect.zipRight(this.sink.part(parts[i]!), effect)
    return effect
  }
}

const hasMetadata = (metadata: Response.ProviderMetadata | Metadata): boolean => {
  for (const key in metadata) {
    const value = metadata[key]
    if (value !== undefined && Object.keys(value).length > 0) return true
  }
  return false
}

/** Merges provider metadata into `target`, field by field; `undefined` fields are skipped. */
const mergeMetadata = (target: Metadata, metadata: Response.ProviderMetadata): Metadata => {
  for (const key in metadata) {
    const value = metadata[key]
    if (value === undefined) continue
    const into = target[key] ??= {}
    for (const field in value) {
      if (value[field] !== undefined) into[field] = value[field]
    }
  }
  return target
}

/** The value as plain JSON (the loop freezes and logs `providerState`). */
const plainJson = (value: Response.ProviderMetadata): Prompt.ProviderOptions => JSON.parse(JSON.stringify(value))

/**
 * `stop`, `length`, `content-filter` are kept; `tool-calls`, `pause`, `other` and `unknown`
 * become `tool-calls` when the response had tool calls, else `stop` (`error` fails earlier).
 */
const mapFinishReason = (reason: Response.FinishReason, hasToolCalls: boolean): FinishReason => {
  switch (reason) {
    case "length":
      return "length"
    case "content-filter":
      return "content-filter"
    default:
      return stopOrToolCalls(hasToolCalls)
  }
}

/**
 * The `usage` part of a finish (the module's notes): `inputTokens`, `outputTokens`,
 * `reasoningTokens` as given, `cachedInputTokens` → `cacheReadTokens`, `cacheWriteTokens` 0
 * (`@effect/ai` has no such count); `totalTokens` only alongside an input or output count
 * (`@effect/ai-openai` reports a total of 0 when the response had no usage). `raw` is
 * `@effect/ai`'s `Usage` as plain JSON (its fields that are numbers, as given): the provider's
 * own object does not reach the bridge. `undefined` when nothing is known.
 */
const mapUsage = (u: Response.Usage): ModelPart | undefined => {
  const inputTokens = num(u.inputTokens)
  const outputTokens = num(u.outputTokens)
  const totalTokens = inputTokens !== undefined || outputTokens !== undefined ? num(u.totalTokens) : undefined
  const cachedInputTokens = num(u.cachedInputTokens)
  const reasoningTokens = num(u.reasoningTokens)
  const usage = normalizedUsage({ inputTokens, outputTokens, cacheReadTokens: cachedInputTokens, reasoningTokens, totalTokens })
  if (usage === undefined) return undefined
  const raw: Record<string, number> = {}
  if (inputTokens !== undefined) raw.inputTokens = inputTokens
  if (outputTokens !== undefined) raw.outputTokens = outputTokens
  const givenTotal = num(u.totalTokens)
  if (givenTotal !== undefined) raw.totalTokens = givenTotal
  if (reasoningTokens !== undefined) raw.reasoningTokens = reasoningTokens
  if (cachedInputTokens !== undefined) raw.cachedInputTokens = cachedInputTokens
  return { type: "usage", usage, raw }
}

const convertMessage = History.convertOnce<Converted>(convertAssistant, convertUser)
