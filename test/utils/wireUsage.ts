/**
 * The token usage and response id/model of every recorded wire fixture that carries usage
 * (`../shared/fixtures/wire/`, §18), read by hand from the fixture bytes and written here
 * as literals: `raw` is the provider's usage object as the adapter must keep it (for Anthropic,
 * `message_start`'s usage with `message_delta`'s fields merged over it), `usage` the normalized
 * counts (all five; `totalTokens` only where the wire sends a total), `response` the wire's
 * response id and model. Pinned by the provider contract (test/ProviderContract.test.ts) and by
 * each adapter's own test file.
 */
import type { Usage } from "../../src/SessionEvent.js"

/** What one recorded response reports. */
export interface WireUsage {
  readonly usage: Usage
  readonly raw: unknown
  readonly response: { readonly id: string; readonly model: string }
}

const GPT_4O = "gpt-4o-2024-08-06"

/** By fixture file name. */
export const WIRE_USAGE = {
  // The usage-only chunk (`choices: []`) before [DONE]; no prompt_tokens_details: cacheRead 0.
  "openai-stream-tool-calls-parallel.sse": {
    usage: { inputTokens: 149, outputTokens: 60, cacheReadTokens: 0, cacheWriteTokens: 0, reasoningTokens: 0, totalTokens: 209 },
    raw: { prompt_tokens: 149, completion_tokens: 60, total_tokens: 209, completion_tokens_details: { reasoning_tokens: 0 } },
    response: { id: "chatcmpl-ABfwAwrNePHUgBBezonVC6MX3zd63", model: GPT_4O }
  },
  "openai-stream-refusal.sse": {
    usage: { inputTokens: 79, outputTokens: 11, cacheReadTokens: 0, cacheWriteTokens: 0, reasoningTokens: 0, totalTokens: 90 },
    raw: { prompt_tokens: 79, completion_tokens: 11, total_tokens: 90, completion_tokens_details: { reasoning_tokens: 0 } },
    response: { id: "chatcmpl-ABfw4IfQfCCrcuybFm41wJyxjbkz7", model: GPT_4O }
  },
  "openai-stream-finish-length.sse": {
    usage: { inputTokens: 79, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, reasoningTokens: 0, totalTokens: 80 },
    raw: { prompt_tokens: 79, completion_tokens: 1, total_tokens: 80, completion_tokens_details: { reasoning_tokens: 0 } },
    response: { id: "chatcmpl-ABfw3Oqj8RD0z6aJiiX37oTjV2HFh", model: GPT_4O }
  },
  "openai-stream-text-then-tool-call.chunks.jsonl": {
    usage: { inputTokens: 58, outputTokens: 12, cacheReadTokens: 0, cacheWriteTokens: 0, reasoningTokens: 0, totalTokens: 70 },
    raw: {
      prompt_tokens: 58,
      completion_tokens: 12,
      total_tokens: 70,
      prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
      completion_tokens_details: {
        reasoning_tokens: 0,
        audio_tokens: 0,
        accepted_prediction_tokens: 0,
        rejected_prediction_tokens: 0
      }
    },
    response: { id: "chatcmpl-E6yvi7cuDcHZEHTMxcLDyf3CMKIO2", model: GPT_4O }
  },
  "openai-nonstream-tool-calls-parallel.json": {
    usage: { inputTokens: 149, outputTokens: 60, cacheReadTokens: 0, cacheWriteTokens: 0, reasoningTokens: 0, totalTokens: 209 },
    raw: { prompt_tokens: 149, completion_tokens: 60, total_tokens: 209, completion_tokens_details: { reasoning_tokens: 0 } },
    response: { id: "chatcmpl-ABfvyvfNWKcl7Ohqos4UFrmMs1v4C", model: GPT_4O }
  },
  // vLLM 0.24: cached_tokens reported (0), no completion_tokens_details: reasoning 0.
  "vllm-stream-text-usage-chunk.sse": {
    usage: { inputTokens: 46, outputTokens: 14, cacheReadTokens: 0, cacheWriteTokens: 0, reasoningTokens: 0, totalTokens: 60 },
    raw: { prompt_tokens: 46, total_tokens: 60, completion_tokens: 14, prompt_tokens_details: { cached_tokens: 0 } },
    response: { id: "chatcmpl-bcfbe349402eb3d2", model: "meta-llama/Llama-3.3-70B-Instruct" }
  },
  // DeepSeek: usage on the finish chunk; prompt_tokens 339 = hit 320 + miss 19 (cached inside).
  "deepseek-reasoner-stream-tool-call.chunks.jsonl": {
    usage: {
      inputTokens: 339,
      outputTokens: 83,
      cacheReadTokens: 320,
      cacheWriteTokens: 0,
      reasoningTokens: 39,
      totalTokens: 422
    },
    raw: {
      prompt_tokens: 339,
      completion_tokens: 83,
      total_tokens: 422,
      prompt_tokens_details: { cached_tokens: 320 },
      completion_tokens_details: { reasoning_tokens: 39 },
      prompt_cache_hit_tokens: 320,
      prompt_cache_miss_tokens: 19
    },
    response: { id: "cca85624-4056-401f-b220-d77601d1f70d", model: "deepseek-reasoner" }
  },
  "deepseek-reasoner-tool-call.json": {
    usage: {
      inputTokens: 339,
      outputTokens: 92,
      cacheReadTokens: 320,
      cacheWriteTokens: 0,
      reasoningTokens: 48,
      totalTokens: 431
    },
    raw: {
      prompt_tokens: 339,
      completion_tokens: 92,
      total_tokens: 431,
      prompt_tokens_details: { cached_tokens: 320 },
      completion_tokens_details: { reasoning_tokens: 48 },
      prompt_cache_hit_tokens: 320,
      prompt_cache_miss_tokens: 19
    },
    response: { id: "7a630f5b-b7e6-4878-82f8-d77db164d42b", model: "deepseek-reasoner" }
  },
  // message_start: input 377, cache 0 + 0, output_tokens 1; message_delta: output_tokens 65.
  "anthropic-stream-tool-use.sse": {
    usage: { inputTokens: 377, outputTokens: 65, cacheReadTokens: 0, cacheWriteTokens: 0, reasoningTokens: 0 },
    raw: {
      input_tokens: 377,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
      output_tokens: 65,
      service_tier: "standard"
    },
    response: { id: "msg_019Q1hrJbZG26Fb9BQhrkHEr", model: "claude-sonnet-4-20250514" }
  },
  // message_start: input 450, output_tokens 1; message_delta (max_tokens): output_tokens 124.
  "anthropic-stream-tool-use-truncated-max-tokens.sse": {
    usage: { inputTokens: 450, outputTokens: 124, cacheReadTokens: 0, cacheWriteTokens: 0, reasoningTokens: 0 },
    raw: {
      input_tokens: 450,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
      output_tokens: 124,
      service_tier: "standard"
    },
    response: { id: "msg_01UdjYBBipA9omjYhicnevgq", model: "claude-3-7-sonnet-20250219" }
  },
  // message_delta repeats input_tokens 43 and the cache counts, output_tokens 282; thinking is
  // inside output_tokens (not reported apart): reasoningTokens 0.
  "anthropic-stream-thinking.sse": {
    usage: { inputTokens: 43, outputTokens: 282, cacheReadTokens: 0, cacheWriteTokens: 0, reasoningTokens: 0 },
    raw: {
      input_tokens: 43,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
      cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 0 },
      output_tokens: 282,
      service_tier: "standard",
      inference_geo: "not_available"
    },
    response: { id: "msg_01ALwQ87pTS7hH1PjSdC9wJD", model: "claude-sonnet-4-20250514" }
  }
} satisfies Record<string, WireUsage>

/** A fixture file that carries usage. */
export type WireUsageFile = keyof typeof WIRE_USAGE
