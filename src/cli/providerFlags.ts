/**
 * The provider flags of the commands that call a model (`run`, `chat`, `resume
 * --continue-pending`, `runner`; §14): `--provider`, `--base-url`, `--model`,
 * `--api-key-env`, `--max-steps` (`runOptions`), and the model layer they name (`modelLayer`),
 * the HTTP providers loaded on first use; and the compaction flags of the same commands (§17):
 * `--context-window`, `--compaction-reserve`, `--keep-recent-tokens` (`compactionOptions`),
 * and the `Compaction` layer they name (`compactionLayer`).
 *
 * @since 0.1.0
 */
import { HelpDoc, Options, ValidationError } from "@effect/cli"
import type { HttpClient } from "@effect/platform"
import { Effect, Layer, Option, Redacted } from "effect"
import * as Compaction from "../Compaction.js"
import * as Model from "../Model.js"
import type * as Anthropic from "../providers/Anthropic.js"
import * as Offline from "../providers/Offline.js"
import type * as OpenAICompat from "../providers/OpenAICompat.js"
import { type CliExit, exit } from "./exit.js"

const providerOption = Options.choice("provider", ["offline", "openai-compat", "anthropic", "openai"]).pipe(
  Options.withDefault("offline" as const),
  Options.withDescription(
    "model provider: offline (the rule-based model), openai-compat (a Chat Completions server: DeepSeek, OpenAI, vLLM, llama.cpp, Ollama), anthropic (the Messages API) or openai (the Responses API, through @effect/ai-openai)"
  )
)
const baseUrlOption = Options.text("base-url").pipe(
  Options.optional,
  Options.withDescription(
    "base URL of the provider: for openai-compat and openai the root the API paths follow (e.g. https://api.deepseek.com/v1; openai: default $OPENAI_BASE_URL, else https://api.openai.com/v1); for anthropic the API origin (default $ANTHROPIC_BASE_URL, else https://api.anthropic.com)"
  )
)
const modelOption = Options.text("model").pipe(Options.optional, Options.withDescription("model name"))
const apiKeyEnvOption = Options.text("api-key-env").pipe(
  Options.optional,
  Options.withDescription(
    "name of the environment variable that holds the API key (default: ANTHROPIC_API_KEY for anthropic, OPENAI_API_KEY for openai)"
  )
)

/** The providers of `--provider` (§14). */
type Provider = "offline" | "openai-compat" | "anthropic" | "openai"

/** Defaults of the providers with a home API: base URL, and the variables of URL and key. */
const HOSTED = {
  anthropic: { url: "https://api.anthropic.com", urlEnv: "ANTHROPIC_BASE_URL", keyEnv: "ANTHROPIC_API_KEY" },
  openai: { url: "https://api.openai.com/v1", urlEnv: "OPENAI_BASE_URL", keyEnv: "OPENAI_API_KEY" }
} as const

/**
 * The OpenAI Responses API through `@effect/ai-openai` and our bridge (`AiBridge`), loaded on
 * first use (so that other providers never load `@effect/ai`). The build bundles them into
 * chunks of `dist/cli/` (`scripts/build-cli.js`), so the installed CLI needs no `@effect/ai`
 * package (the library's `effect-agent-loop/ai-bridge` does: an optional peer). Tool schemas are
 * sent without strict mode (ours have optional properties); `settings.maxTokens` becomes
 * `max_output_tokens`.
 */
const openAiLayer = (baseUrl: string, model: string, apiKey: Redacted.Redacted<string> | undefined): Layer.Layer<Model.Model> =>
  Layer.unwrapEffect(Effect.promise(async () => {
    const [OpenAiClient, OpenAiLanguageModel, AiBridge, NodeHttpClient] = await Promise.all([
      import("@effect/ai-openai/OpenAiClient"),
      import("@effect/ai-openai/OpenAiLanguageModel"),
      import("../providers/AiBridge.js"),
      import("@effect/platform-node/NodeHttpClient")
    ])
    return AiBridge.layer({
      provider: "openai",
      model,
      secrets: apiKey === undefined ? [] : [Redacted.value(apiKey)],
      configure: (request) => {
        const maxTokens = request.settings?.maxTokens
        return OpenAiLanguageModel.withConfigOverride(typeof maxTokens === "number" ? { max_output_tokens: maxTokens } : {})
      }
    }).pipe(
      Layer.provide(OpenAiLanguageModel.layer({ model, config: { strict: false } })),
      Layer.provide(OpenAiClient.layer({ apiKey, apiUrl: baseUrl })),
      Layer.provide(NodeHttpClient.layerUndici)
    )
  }))

/**
 * A provider over HTTP (`openai-compat`, `anthropic`) on Node's HTTP client (undici), loaded on
 * first use (a chunk of the CLI bundle): the commands that call no model (`transcript`, `check`,
 * `--help`, the offline model) never parse the providers or undici, which alone is about 750 KB
 * of bundled code, a third of what such a command would load otherwise (§25).
 */
const httpLayer = (
  make: (providers: { readonly OpenAICompat: typeof OpenAICompat; readonly Anthropic: typeof Anthropic }) => Layer.Layer<
    Model.Model,
    never,
    HttpClient.HttpClient
  >
): Layer.Layer<Model.Model> =>
  Layer.unwrapEffect(Effect.promise(async () => {
    const [OpenAICompat, Anthropic, NodeHttpClient] = await Promise.all([
      import("../providers/OpenAICompat.js"),
      import("../providers/Anthropic.js"),
      import("@effect/platform-node/NodeHttpClient")
    ])
    return make({ OpenAICompat, Anthropic }).pipe(Layer.provide(NodeHttpClient.layerUndici))
  }))

/** A base URL checked to be http(s), or a bad-arguments exit. */
const checkUrl = (value: string): Effect.Effect<string, CliExit> => {
  let url: URL
  try {
    url = new URL(value)
  } catch {
    return exit(2, `--base-url: not a URL: ${value}`)
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    return exit(2, `--base-url: only http and https URLs are supported, not ${url.protocol}`)
  }
  return Effect.succeed(value)
}

/** Whether a would-be variable name looks like an API key: a key prefix, or 24+ characters of mixed case with digits. */
const looksLikeKey = (value: string): boolean =>
  /^(?:sk|gsk|xai|pk|rk)_/.test(value) ||
  (value.length >= 24 && /[a-z]/.test(value) && /[A-Z]/.test(value) && /\d/.test(value))

/** The API key named by `--api-key-env` (else `fallbackEnv` when set), as `Redacted`. */
const readApiKey = (
  apiKeyEnv: Option.Option<string>,
  fallbackEnv: string | undefined
): Effect.Effect<Redacted.Redacted<string> | undefined, CliExit> => {
  if (Option.isNone(apiKeyEnv)) {
    const value = fallbackEnv === undefined ? undefined : process.env[fallbackEnv]
    return Effect.succeed(value === undefined || value === "" ? undefined : Redacted.make(value))
  }
  // A value that is not a variable name, or one that looks like a key (`gsk_…`, `sk_…`, or long
  // and of mixed case with digits), is likely the key itself: refused without echoing it.
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(apiKeyEnv.value)) {
    return exit(2, "--api-key-env takes the NAME of an environment variable (letters, digits, _), not the key itself")
  }
  if (looksLikeKey(apiKeyEnv.value)) {
    return exit(2, "--api-key-env: the value looks like an API key, not the NAME of an environment variable (not shown)")
  }
  const value = process.env[apiKeyEnv.value]
  if (value === undefined) return exit(2, `--api-key-env: the environment variable ${apiKeyEnv.value} is not set`)
  if (value === "") return exit(2, `--api-key-env: the environment variable ${apiKeyEnv.value} is empty`)
  return Effect.succeed(Redacted.make(value))
}

/**
 * The model layer for the provider flags, or a bad-arguments exit. Keys are read from the
 * environment only (`--api-key-env VAR`; for anthropic `ANTHROPIC_API_KEY` by default) and held
 * as `Redacted`, never printed.
 */
export const modelLayer = (options: {
  readonly provider: Provider
  readonly baseUrl: Option.Option<string>
  readonly model: Option.Option<string>
  readonly apiKeyEnv: Option.Option<string>
}): Effect.Effect<Layer.Layer<Model.Model>, CliExit> =>
  Effect.gen(function*() {
    const provider = options.provider
    if (provider === "offline") {
      if (Option.isSome(options.baseUrl) || Option.isSome(options.model) || Option.isSome(options.apiKeyEnv)) {
        return yield* exit(2, "--base-url, --model and --api-key-env need --provider openai-compat, anthropic or openai")
      }
      return Model.layer(Offline.make())
    }
    if (Option.isNone(options.model) || options.model.value.trim() === "") {
      return yield* exit(2, `--provider ${provider} needs --model NAME`)
    }
    const model = options.model.value
    if (provider === "openai-compat") {
      if (Option.isNone(options.baseUrl)) return yield* exit(2, "--provider openai-compat needs --base-url URL")
      const baseUrl = yield* checkUrl(options.baseUrl.value)
      const apiKey = yield* readApiKey(options.apiKeyEnv, undefined)
      return httpLayer(({ OpenAICompat }) => OpenAICompat.layer({ baseUrl, model, apiKey }))
    }
    const hosted = HOSTED[provider]
    const envUrl = process.env[hosted.urlEnv]
    const baseUrl = yield* checkUrl(
      Option.getOrElse(options.baseUrl, () => envUrl === undefined || envUrl === "" ? hosted.url : envUrl)
    )
    const apiKey = yield* readApiKey(options.apiKeyEnv, hosted.keyEnv)
    if (apiKey === undefined && baseUrl.replace(/\/+$/, "") === hosted.url) {
      return yield* exit(2, `--provider ${provider} needs an API key: set ${hosted.keyEnv} or pass --api-key-env VAR`)
    }
    if (provider === "openai") return openAiLayer(baseUrl, model, apiKey)
    return httpLayer(({ Anthropic }) => Anthropic.layer({ baseUrl, model, apiKey }))
  })

/**
 * The compaction flags (§17), as text so that a bad value is named with its flag: a
 * positive integer of tokens each. `--context-window` turns compaction by pressure (and on the
 * provider's `CONTEXT_OVERFLOW`) on, with the default summarizing policy; the other two need it.
 */
export const compactionOptions = {
  contextWindow: Options.text("context-window").pipe(
    Options.optional,
    Options.withDescription(
      "the model's context window in tokens: the agent compacts its history (summarizes the older part with the model) when a request would pass it minus --compaction-reserve, or when the provider refuses a request as too long (default: no automatic compaction; chat's /compact still works)"
    )
  ),
  compactionReserve: Options.text("compaction-reserve").pipe(
    Options.optional,
    Options.withDescription(
      "tokens kept free for the response, with --context-window (default: the smaller of 16384 and a quarter of the window)"
    )
  ),
  keepRecentTokens: Options.text("keep-recent-tokens").pipe(
    Options.optional,
    Options.withDescription(
      "tokens of the most recent history a compaction keeps verbatim, with --context-window (default: the smaller of 20000 and a quarter of the window)"
    )
  )
}

/** A flag's value as a positive integer (digits only), or a bad-arguments exit naming it. */
const positiveInteger = (flag: string, value: Option.Option<string>): Effect.Effect<number | undefined, CliExit> => {
  if (Option.isNone(value)) return Effect.succeed(undefined)
  const text = value.value.trim()
  const n = /^\d+$/.test(text) ? Number(text) : Number.NaN
  return Number.isSafeInteger(n) && n > 0
    ? Effect.succeed(n)
    : exit(2, `--${flag}: not a positive integer (tokens): ${JSON.stringify(value.value)}`)
}

/**
 * The `Compaction` layer of the compaction flags (`Compaction.layer` with the window, reserve
 * and kept tokens given), undefined without `--context-window`; or a bad-arguments exit: a value
 * that is not a positive integer, `--compaction-reserve` not below `--context-window`,
 * `--compaction-reserve`/`--keep-recent-tokens` without `--context-window`.
 */
export const compactionLayer = (options: {
  readonly contextWindow: Option.Option<string>
  readonly compactionReserve: Option.Option<string>
  readonly keepRecentTokens: Option.Option<string>
}): Effect.Effect<Layer.Layer<Compaction.Compaction> | undefined, CliExit> =>
  Effect.gen(function*() {
    const contextWindow = yield* positiveInteger("context-window", options.contextWindow)
    const reserve = yield* positiveInteger("compaction-reserve", options.compactionReserve)
    const keepRecentTokens = yield* positiveInteger("keep-recent-tokens", options.keepRecentTokens)
    if (contextWindow === undefined) {
      if (reserve !== undefined || keepRecentTokens !== undefined) {
        return yield* exit(
          2,
          `--${reserve !== undefined ? "compaction-reserve" : "keep-recent-tokens"} needs --context-window N`
        )
      }
      return undefined
    }
    if (reserve !== undefined && reserve >= contextWindow) {
      return yield* exit(
        2,
        `--compaction-reserve: ${reserve} must be less than --context-window ${contextWindow} (it is the part of the window kept free)`
      )
    }
    // The flags were checked above: a refusal here is a bug.
    return Layer.orDie(Compaction.layer({ contextWindow, reserve, keepRecentTokens }))
  })

/** The provider flags (`chat` has these without `--max-steps`) and the compaction flags. */
export const providerOptions = {
  provider: providerOption,
  baseUrl: baseUrlOption,
  model: modelOption,
  apiKeyEnv: apiKeyEnvOption,
  ...compactionOptions
}

/** The options of the commands that run turns (`run`, `resume --continue-pending`): the provider and the step limit. */
export const runOptions = {
  ...providerOptions,
  maxSteps: Options.integer("max-steps").pipe(
    Options.withDefault(100),
    Options.withDescription("the most steps a turn may run (it ends error MAX_STEPS beyond)"),
    Options.mapEffect((n) =>
      n >= 1 ? Effect.succeed(n) : Effect.fail(ValidationError.invalidValue(HelpDoc.p("--max-steps: must be at least 1")))
    )
  )
}
