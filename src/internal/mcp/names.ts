/**
 * The names of MCP tools as the model sees them (§28).
 */
import { createHash } from "node:crypto"

/** The providers' limit on a tool name (OpenAI: `^[a-zA-Z0-9_-]{1,64}$`). */
const MAX_NAME = 64

const clean = (part: string): string => part.replace(/[^A-Za-z0-9_-]/g, "_")

/**
 * `SERVER__TOOL`, each part with characters other than letters, digits, `_` and `-` replaced by
 * `_`; a name longer than 64 characters is cut to 55 and ends with `_` and 8 hex digits of the
 * SHA-256 of the full name, so that two long names stay apart.
 */
export const toolName = (server: string, tool: string): string => {
  const full = `${clean(server)}__${clean(tool)}`
  if (full.length <= MAX_NAME) return full
  const hash = createHash("sha256").update(`${server}\u0000${tool}`).digest("hex").slice(0, 8)
  return `${full.slice(0, MAX_NAME - 9)}_${hash}`
}
