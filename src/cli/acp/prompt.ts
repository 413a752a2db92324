/**
 * The content of an ACP prompt (`session/prompt`, `_session/steer`, `_session/inject`) as the
 * content of one `UserMessage` (§22). ACP v1's baseline is `text`
 * and `resource_link`; we also take `image` (base64 data; `promptCapabilities.image`) and embedded
 * text resources (`promptCapabilities.embeddedContext`):
 *
 * - `text` → a text block, as it is.
 * - `image {data, mimeType}` → an image block `{mediaType: mimeType, data}` (an image given only by
 *   `uri`, without data, is refused: the runtime sends images, it does not fetch them).
 * - `resource_link {uri, name}` → a text block `[name](uri)` (the model sees the link, the file is
 *   not read for it).
 * - `resource {resource: {uri, text}}` → a text block `<resource uri="URI">\nTEXT\n</resource>`.
 *
 * Refused, naming the block (the caller answers -32602 and logs nothing): `audio`, an embedded
 * resource with binary content (`blob`), a block of another type, a block whose fields are not
 * the strings ACP says, and an empty prompt.
 *
 * @since 0.1.0
 */
import type { ContentBlock } from "../../Message.js"

/**
 * The converted content, or why the prompt is refused (one line naming the block and its index).
 *
 * @since 0.1.0
 * @category models
 */
export type PromptContent =
  | { readonly ok: true; readonly content: ReadonlyArray<ContentBlock> }
  | { readonly ok: false; readonly message: string }

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * Converts the blocks of an ACP prompt (already schema-checked for `session/prompt`; raw JSON for
 * the extension methods, hence the field checks) to the content of one `UserMessage`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const contentOf = (blocks: unknown): PromptContent => {
  if (!Array.isArray(blocks)) return { ok: false, message: "prompt: an array of content blocks is required" }
  if (blocks.length === 0) return { ok: false, message: "prompt: the prompt is empty" }
  const content: Array<ContentBlock> = []
  for (let i = 0; i < blocks.length; i++) {
    const block: unknown = blocks[i]
    const at = `prompt[${i}]`
    if (!isRecord(block) || typeof block.type !== "string") {
      return { ok: false, message: `${at}: not a content block (an object with a string type)` }
    }
    switch (block.type) {
      case "text":
        if (typeof block.text !== "string") return { ok: false, message: `${at}: a text block needs a string text` }
        content.push({ type: "text", text: block.text })
        break
      case "image":
        if (typeof block.data !== "string" || block.data === "" || typeof block.mimeType !== "string") {
          return {
            ok: false,
            message: `${at}: an image block needs base64 data and a mimeType (an image by uri only is not supported)`
          }
        }
        content.push({ type: "image", mediaType: block.mimeType, data: block.data })
        break
      case "resource_link":
        if (typeof block.uri !== "string" || typeof block.name !== "string") {
          return { ok: false, message: `${at}: a resource_link block needs a string uri and name` }
        }
        content.push({ type: "text", text: `[${block.name}](${block.uri})` })
        break
      case "resource": {
        const resource = block.resource
        if (!isRecord(resource) || typeof resource.uri !== "string") {
          return { ok: false, message: `${at}: a resource block needs a resource with a string uri` }
        }
        if (typeof resource.text !== "string") {
          return {
            ok: false,
            message: `${at}: content block type "resource" with binary content (blob, ${resource.uri}) is not supported`
          }
        }
        content.push({ type: "text", text: `<resource uri="${resource.uri}">\n${resource.text}\n</resource>` })
        break
      }
      default:
        return { ok: false, message: `${at}: content block type ${JSON.stringify(block.type)} is not supported` }
    }
  }
  return { ok: true, content }
}
