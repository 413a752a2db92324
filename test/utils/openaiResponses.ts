/**
 * Hand-written OpenAI Responses API streams (no recorded one is shared), in the shape
 * `@effect/ai-openai`'s decoder requires: for the bridge tests and the CLI's `--provider openai`.
 */

/** A `Response` object as the Responses API streams it (the fields the decoder requires). */
export const responseObject = (status: string, extra?: Record<string, unknown>) => ({
  id: "resp_1",
  object: "response",
  created_at: 1_700_000_000,
  status,
  error: null,
  incomplete_details: null,
  output: [],
  instructions: null,
  model: "gpt-5-mini",
  parallel_tool_calls: true,
  tools: [],
  tool_choice: "auto",
  metadata: null,
  temperature: null,
  top_p: null,
  ...extra
})

export const sse = (events: ReadonlyArray<Record<string, unknown>>): string =>
  events.map((event, i) => `event: ${event.type}\ndata: ${JSON.stringify({ ...event, sequence_number: i })}\n\n`).join("")

/** The usage of `textResponse` unless given: 12 in (0 cached), 5 out (0 reasoning), total 17. */
export const TEXT_RESPONSE_USAGE = {
  input_tokens: 12,
  input_tokens_details: { cached_tokens: 0 },
  output_tokens: 5,
  output_tokens_details: { reasoning_tokens: 0 },
  total_tokens: 17
}

/**
 * A whole streamed answer: one assistant message with `text` (in two deltas), then completed
 * with `usage` (a Responses API usage object, default `TEXT_RESPONSE_USAGE`).
 */
export const textResponse = (text: string, usage: Record<string, unknown> = TEXT_RESPONSE_USAGE): string => {
  const half = Math.floor(text.length / 2)
  return sse([
    { type: "response.created", response: responseObject("in_progress") },
    {
      type: "response.output_item.added",
      output_index: 0,
      item: { type: "message", id: "msg_1", role: "assistant", status: "in_progress", content: [] }
    },
    { type: "response.output_text.delta", output_index: 0, content_index: 0, item_id: "msg_1", delta: text.slice(0, half) },
    { type: "response.output_text.delta", output_index: 0, content_index: 0, item_id: "msg_1", delta: text.slice(half) },
    {
      type: "response.output_item.done",
      output_index: 0,
      item: {
        type: "message",
        id: "msg_1",
        role: "assistant",
        status: "completed",
        content: [{ type: "output_text", text, annotations: [] }]
      }
    },
    {
      type: "response.completed",
      response: responseObject("completed", { usage })
    }
  ])
}
