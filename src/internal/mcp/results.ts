/**
 * An MCP tool result as our content blocks (§28): text and images as they are; audio, resources
 * and resource links as text that says what they are; structured content kept as JSON text when
 * the content has no text of its own; the text bounded (`maxBytes` UTF-8 bytes in all, the rest cut with a
 * note) and every secret replaced by `***`.
 */
import type { ContentBlock } from "../../Message.js"

/** The most base64 characters of one image a result keeps (about 5 MiB decoded). */
export const MAX_IMAGE_CHARS = 7 * 1024 * 1024

/** Replaces every occurrence of each secret (a value of `env` or `headers`) in `text` by `***`. */
export const redactor = (secrets: ReadonlyArray<string>): (text: string) => string => {
  // Longest first, so that a secret containing another is replaced whole. Values shorter than 3
  // characters ("1", "on") would blank ordinary text and hide nothing.
  const list = [...new Set(secrets.filter((s) => s.length >= 3))].sort((a, b) => b.length - a.length)
  if (list.length === 0) return (text) => text
  return (text) => {
    let out = text
    for (const secret of list) if (out.includes(secret)) out = out.split(secret).join("***")
    return out
  }
}

const byteLength = (s: string): number => Buffer.byteLength(s, "utf8")

/** `s` cut to at most `bytes` UTF-8 bytes, never inside a character. */
const cutToBytes = (s: string, bytes: number): string => {
  const buf = Buffer.from(s, "utf8")
  if (buf.length <= bytes) return s
  let end = bytes
  // Back up to the start of a character (a continuation byte is 10xxxxxx).
  while (end > 0 && (buf[end]! & 0xc0) === 0x80) end--
  return buf.subarray(0, end).toString("utf8")
}

const str = (u: unknown): string | undefined => (typeof u === "string" ? u : undefined)

/** One MCP content item as a text or image block (a text for what we cannot show). */
const blockOf = (item: unknown): ContentBlock => {
  const c = (typeof item === "object" && item !== null ? item : {}) as Record<string, unknown>
  switch (c.type) {
    case "text":
      return { type: "text", text: str(c.text) ?? "" }
    case "image": {
      const data = str(c.data) ?? ""
      const mediaType = str(c.mimeType) ?? "application/octet-stream"
      if (data.length > MAX_IMAGE_CHARS) {
        return { type: "text", text: `[image (${mediaType}) of ${data.length} base64 characters: too large, not shown]` }
      }
      return { type: "image", mediaType, data }
    }
    case "audio":
      return { type: "text", text: `[audio (${str(c.mimeType) ?? "unknown type"}): not shown]` }
    case "resource": {
      const r = (typeof c.resource === "object" && c.resource !== null ? c.resource : {}) as Record<string, unknown>
      const uri = str(r.uri) ?? "?"
      const mime = str(r.mimeType)
      const text = str(r.text)
      if (text !== undefined) return { type: "text", text: `[resource ${uri}${mime ? ` (${mime})` : ""}]\n${text}` }
      const blob = str(r.blob) ?? ""
      if (mime !== undefined && mime.startsWith("image/") && blob.length <= MAX_IMAGE_CHARS && blob.length > 0) {
        return { type: "image", mediaType: mime, data: blob }
      }
      return {
        type: "text",
        text: `[resource ${uri}${mime ? ` (${mime})` : ""}: ${blob.length} base64 characters of binary data, not shown]`
      }
    }
    case "resource_link": {
      const parts = [`[resource link: ${str(c.name) ?? str(c.title) ?? "?"} <${str(c.uri) ?? "?"}>`]
      if (str(c.mimeType) !== undefined) parts.push(` (${c.mimeType as string})`)
      if (str(c.description) !== undefined) parts.push(`: ${c.description as string}`)
      return { type: "text", text: parts.join("") + "]" }
    }
    default:
      return { type: "text", text: `[content of type ${JSON.stringify(String(c.type))}: not shown]` }
  }
}

/**
 * An MCP `tools/call` result as `{content, isError}`: `content` (or a legacy `toolResult`)
 * mapped block by block, `structuredContent` added as JSON text when no text block came from the
 * server (MCP asks a server to put it in a text block too; a server that writes its own text,
 * such as the filesystem server's `{content: TEXT}`, would otherwise give the model everything
 * twice, and the copy could be what `maxBytes` cuts), the text bounded to `maxBytes` and redacted.
 */
export const resultOf = (
  result: unknown,
  maxBytes: number,
  redact: (text: string) => string
): { readonly content: ReadonlyArray<ContentBlock>; readonly isError: boolean } => {
  const r = (typeof result === "object" && result !== null ? result : {}) as Record<string, unknown>
  const blocks: Array<ContentBlock> = Array.isArray(r.content) ? r.content.map(blockOf) : []
  if (!Array.isArray(r.content) && "toolResult" in r) blocks.push({ type: "text", text: JSON.stringify(r.toolResult) ?? "" })
  const texts = Array.isArray(r.content) &&
    r.content.some((item: unknown) => (item as { type?: unknown } | null)?.type === "text")
  if (r.structuredContent !== undefined && !texts) {
    const json = JSON.stringify(r.structuredContent)
    if (json !== undefined) blocks.push({ type: "text", text: json })
  }
  if (blocks.length === 0) blocks.push({ type: "text", text: "" })
  let left = maxBytes
  let total = 0
  const out: Array<ContentBlock> = []
  for (const b of blocks) {
    if (b.type !== "text") {
      out.push(b)
      continue
    }
    const text = redact(b.text)
    const size = byteLength(text)
    total += size
    if (left <= 0) continue
    if (size <= left) {
      out.push({ type: "text", text })
      left -= size
    } else {
      out.push({ type: "text", text: cutToBytes(text, left) })
      left = 0
    }
  }
  if (total > maxBytes) {
    out.push({ type: "text", text: `[result cut: ${total - maxBytes} of ${total} bytes of text not shown]` })
  }
  return { content: out, isError: r.isError === true }
}
