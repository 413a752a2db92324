/**
 * The MCP configuration file of `--mcp-config FILE` (§28): the JSON format Claude Desktop,
 * Claude Code (`.mcp.json`), Cursor and Cline already write, read into `Mcp.ServerConfig`s.
 *
 * ```json
 * { "mcpServers": {
 *     "files": { "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."] },
 *     "issues": { "type": "http", "url": "https://example.com/mcp", "headers": { "Authorization": "Bearer …" } } } }
 * ```
 *
 * - The top-level `mcpServers` object maps each server's name to its entry. An entry with a
 *   `command` is a stdio server (`command`, `args`, `env`, `cwd`; `type: "stdio"` may be given); one
 *   with a `url` an HTTP server: `type` `"http"` (the default), `"streamable-http"` or
 *   `"streamableHttp"` (all three the streamable HTTP transport), or `"sse"` (the legacy HTTP+SSE
 *   one), with `headers`. Cline's `transportType` is read where `type` is absent. A relative
 *   `cwd` is relative to the file's directory.
 * - Our own keys, on any entry: `approval` (`"always"`, the default, or `"never"`: a server you
 *   trust), `autoApprove` (Cline's name) and `alwaysAllow` (Roo Code's) (tool names on the server whose calls need no
 *   approval; both may be given), `timeoutMs` (a call's limit, milliseconds), `connectTimeoutMs`,
 *   `maxRestarts` and `maxResultBytes` (as `Mcp.ServerOptions` has them).
 * - An entry with `disabled: true` is skipped (not checked). Other keys are ignored: real files
 *   carry the keys of other tools.
 * - Every problem is reported, each on a line naming the file and the exact key path
 *   (`mcp.json: mcpServers.files.args: expected an array of strings`; a name that is not a plain
 *   identifier is quoted: `mcpServers["my files"].env`). The values of `env` and `headers` are
 *   secrets, and a URL may carry one: no message prints a value of the file, nor the text of a
 *   JSON syntax error (only where it is: line and column).
 *
 * JSON with comments and trailing commas (as VS Code and Cursor write it) is read too.
 *
 * The module imports `Mcp` for its types only: reading a configuration loads nothing of the MCP SDK.
 *
 * @since 0.1.0
 */
import { FileSystem } from "@effect/platform"
import { Effect, Either, Schema } from "effect"
// The ES module build: the package's main is a UMD module whose requires a bundler cannot follow.
import * as Jsonc from "jsonc-parser/lib/esm/main.js"
import * as NodePath from "node:path"
import { fileErrorText } from "../internal/fsErrors.js"
import { toolName } from "../internal/mcp/names.js"
import { fileKind } from "../internal/store/common.js"
import type * as Mcp from "../Mcp.js"

/**
 * A configuration file that cannot be used: `problems`, each a key path and what is wrong with
 * it (or what kept the file from being read); the message is one line per problem, each
 * starting with the file as given.
 *
 * @since 0.1.0
 * @category errors
 */
export class McpConfigError extends Schema.TaggedError<McpConfigError>()("McpConfigError", {
  file: Schema.String,
  problems: Schema.Array(Schema.String)
}) {
  override get message(): string {
    return this.problems.map((problem) => `${this.file}: ${problem}`).join("\n")
  }
}

/** The transport an HTTP entry's `type` means, or `undefined` for any other value. */
const httpType = (type: unknown): "http" | "sse" | undefined =>
  type === "http" || type === "streamable-http" || type === "streamableHttp" ? "http" : type === "sse" ? "sse" : undefined

const TYPES = `"stdio", "http", "streamable-http", "streamableHttp" or "sse"`

type JsonObject = { readonly [key: string]: unknown }

const isObject = (value: unknown): value is JsonObject => typeof value === "object" && value !== null && !Array.isArray(value)

/** `path.name`, or `path["name"]` for a name that is not a plain identifier. */
const member = (path: string, name: string): string =>
  /^[A-Za-z_][A-Za-z0-9_-]*$/.test(name) ? `${path}.${name}` : `${path}[${JSON.stringify(name)}]`

/** What a JSON value is, in a word, for "got …" (never the value itself). */
const kindOf = (value: unknown): string =>
  value === null ? "null" : Array.isArray(value) ? "an array" : typeof value === "object" ? "an object" : `a ${typeof value}`

/**
 * The problems of one entry and, when it has none, its server (`undefined` for a disabled entry).
 */
const entryOf = (
  name: string,
  entry: unknown,
  path: string,
  directory: string,
  problems: Array<string>
): Mcp.ServerConfig | undefined => {
  const start = problems.length
  const bad = (at: string, what: string) => void problems.push(`${at}: ${what}`)
  if (!isObject(entry)) {
    bad(path, `expected an object (a command or a url, and their settings), got ${kindOf(entry)}`)
    return undefined
  }
  if (entry.disabled !== undefined && typeof entry.disabled !== "boolean") {
    bad(member(path, "disabled"), "expected true or false")
  } else if (entry.disabled === true) return undefined
  if (name.trim() === "") bad(path, "the server name is empty")

  const string = (key: string): string | undefined => {
    const value = entry[key]
    if (value === undefined) return undefined
    if (typeof value === "string" && value.trim() !== "") return value
    bad(member(path, key), typeof value === "string" ? "the string is empty" : `expected a string, got ${kindOf(value)}`)
    return undefined
  }
  const strings = (key: string): ReadonlyArray<string> | undefined => {
    const value = entry[key]
    if (value === undefined) return undefined
    if (!Array.isArray(value)) {
      bad(member(path, key), `expected an array of strings, got ${kindOf(value)}`)
      return undefined
    }
    value.forEach((item, i) => {
      if (typeof item !== "string") bad(`${member(path, key)}[${i}]`, `expected a string, got ${kindOf(item)}`)
    })
    return value as ReadonlyArray<string>
  }
  // The values are secrets: a message names the key, never the value.
  const secrets = (key: string): { readonly [name: string]: string } | undefined => {
    const value = entry[key]
    if (value === undefined) return undefined
    if (!isObject(value)) {
      bad(member(path, key), `expected an object of strings, got ${kindOf(value)}`)
      return undefined
    }
    for (const [k, v] of Object.entries(value)) {
      if (typeof v !== "string") bad(member(member(path, key), k), `expected a string, got ${kindOf(v)}`)
    }
    return value as { readonly [name: string]: string }
  }

  const typeKey = entry.type !== undefined || entry.transportType === undefined ? "type" : "transportType"
  const type = entry[typeKey]
  if (type !== undefined && type !== "stdio" && httpType(type) === undefined) {
    bad(member(path, typeKey), `expected ${TYPES}`)
  }
  const options: { -readonly [K in keyof Mcp.ServerOptions]: Mcp.ServerOptions[K] } = {}
  const approval = entry.approval
  if (approval !== undefined) {
    if (approval === "always" || approval === "never") options.approval = approval
    else bad(member(path, "approval"), `expected "always" or "never"`)
  }
  const allowed = [...(strings("autoApprove") ?? []), ...(strings("alwaysAllow") ?? [])]
  if (allowed.length > 0) options.autoApprove = [...new Set(allowed)]
  // The numbers of `Mcp.ServerOptions`, each checked as the library takes it.
  const positive = (key: "timeoutMs" | "connectTimeoutMs" | "maxResultBytes", unit: string) => {
    const value = entry[key]
    if (value === undefined) return
    if (typeof value === "number" && Number.isFinite(value) && value > 0) options[key] = value
    else bad(member(path, key), `expected a positive number of ${unit}`)
  }
  positive("timeoutMs", "milliseconds")
  positive("connectTimeoutMs", "milliseconds")
  positive("maxResultBytes", "bytes")
  const maxRestarts = entry.maxRestarts
  if (maxRestarts !== undefined) {
    if (typeof maxRestarts === "number" && Number.isInteger(maxRestarts) && maxRestarts >= 0) options.maxRestarts = maxRestarts
    else bad(member(path, "maxRestarts"), "expected a whole number ≥ 0")
  }

  const hasCommand = entry.command !== undefined
  const hasUrl = entry.url !== undefined
  if (hasCommand && hasUrl) {
    bad(path, `has both "command" and "url": give one (a command for a stdio server, a url for an HTTP one)`)
    return undefined
  }
  if (!hasCommand && !hasUrl) {
    bad(path, `has neither "command" nor "url": give one (a command for a stdio server, a url for an HTTP one)`)
    return undefined
  }
  if (hasCommand) {
    if (httpType(type) !== undefined) {
      bad(member(path, typeKey), `"${String(type)}" needs a "url", not a "command"`)
    }
    const command = string("command")
    const args = strings("args")
    const env = secrets("env")
    const cwd = string("cwd")
    if (problems.length > start || command === undefined) return undefined
    return {
      type: "stdio",
      name,
      command,
      ...(args === undefined ? {} : { args }),
      ...(env === undefined ? {} : { env }),
      ...(cwd === undefined ? {} : { cwd: NodePath.resolve(directory, cwd) }),
      ...options
    }
  }
  if (type === "stdio") bad(member(path, typeKey), `"stdio" needs a "command", not a "url"`)
  const url = entry.url
  let valid = false
  if (typeof url !== "string") bad(member(path, "url"), `expected a string, got ${kindOf(url)}`)
  else {
    try {
      const protocol = new URL(url).protocol
      valid = protocol === "http:" || protocol === "https:"
    } catch {
      valid = false
    }
    // The URL is not printed: it may carry a token.
    if (!valid) bad(member(path, "url"), "expected an http or https URL")
  }
  const headers = secrets("headers")
  if (problems.length > start || !valid) return undefined
  return {
    type: httpType(type) ?? "http",
    name,
    url: url as string,
    ...(headers === undefined ? {} : { headers }),
    ...options
  }
}

/**
 * What each syntax error of `jsonc-parser` means, in words. Its codes, not V8's messages: those
 * differ between Node versions and some quote the text, which may hold a secret.
 */
const SYNTAX: { readonly [code: string]: string } = {
  InvalidSymbol: "a character that starts no JSON value",
  InvalidNumberFormat: "a number that is not a JSON number",
  PropertyNameExpected: "expected a property name in double quotes",
  ValueExpected: "expected a value (an object, an array, a string, a number, true, false or null)",
  ColonExpected: "expected ':' after a property name",
  CommaExpected: "expected ','",
  CloseBraceExpected: "expected '}'",
  CloseBracketExpected: "expected ']'",
  EndOfFileExpected: "more text after the JSON value",
  InvalidCommentToken: "a comment that is not // or /* */",
  UnexpectedEndOfComment: "a comment that does not end",
  UnexpectedEndOfString: "a string that does not end",
  UnexpectedEndOfNumber: "a number that does not end",
  InvalidUnicode: "a bad \\u escape in a string",
  InvalidEscapeCharacter: "a bad escape in a string",
  InvalidCharacter: "a control character in a string (write it as an escape such as \\n)"
}

/**
 * The value of a configuration's text: JSON, or JSON with comments and trailing commas as VS
 * Code and Cursor write it (read with `jsonc-parser`); or where it stops being either, and why.
 */
const jsonOf = (text: string): Either.Either<unknown, { readonly at: number; readonly what: string }> => {
  try {
    return Either.right(JSON.parse(text))
  } catch {
    const errors: Array<Jsonc.ParseError> = []
    const value: unknown = Jsonc.parse(text, errors, { allowTrailingComma: true, disallowComments: false })
    const first = errors[0]
    if (first === undefined) return Either.right(value)
    const code = Jsonc.printParseErrorCode(first.error)
    return Either.left({
      at: first.offset,
      what: first.offset >= text.length ? "the file ends before the JSON does" : SYNTAX[code] ?? `not JSON (${code})`
    })
  }
}

/** `offset` of `text` as `line L, column C` (1-based; columns in code points). */
const where = (text: string, offset: number): string => {
  const before = text.slice(0, offset)
  const line = before.split("\n").length
  const column = Array.from(before.slice(before.lastIndexOf("\n") + 1)).length + 1
  return `line ${line}, column ${column}`
}

/**
 * The servers of a configuration's text (see the module comment), `file` naming it in errors
 * and its directory (`directory`, default: `file`'s) resolving relative `cwd`s.
 *
 * @since 0.1.0
 * @category constructors
 */
export const parse = (
  file: string,
  text: string,
  options?: { readonly directory?: string | undefined }
): Either.Either<ReadonlyArray<Mcp.ServerConfig>, McpConfigError> => {
  const fail = (...problems: ReadonlyArray<string>) => Either.left(new McpConfigError({ file, problems }))
  const body = text.startsWith("\uFEFF") ? text.slice(1) : text
  if (body.trim() === "") return fail(`the file is empty (expected a JSON object with "mcpServers")`)
  const parsed = jsonOf(body)
  if (Either.isLeft(parsed)) return fail(`not JSON: ${where(body, parsed.left.at)}: ${parsed.left.what}`)
  const json = parsed.right
  if (!isObject(json)) return fail(`expected a JSON object with "mcpServers", got ${kindOf(json)}`)
  const servers = json.mcpServers
  if (servers === undefined) {
    return fail(`mcpServers: missing (the file needs a top-level "mcpServers" object: server names to their entries)`)
  }
  if (!isObject(servers)) {
    return fail(`mcpServers: expected an object (server names to their entries), got ${kindOf(servers)}`)
  }
  const directory = options?.directory ?? NodePath.dirname(NodePath.resolve(file))
  const problems: Array<string> = []
  const configs: Array<Mcp.ServerConfig> = []
  // Two names the tool names cannot tell apart (`a.b` and `a_b` both give `a_b__TOOL`).
  const prefixes = new Map<string, string>()
  for (const [name, entry] of Object.entries(servers)) {
    const path = member("mcpServers", name)
    const config = entryOf(name, entry, path, directory, problems)
    if (config === undefined) continue
    const prefix = toolName(name, "")
    const other = prefixes.get(prefix)
    if (other !== undefined) {
      problems.push(`${path}: its tools would have the names of server ${JSON.stringify(other)}'s (${prefix}TOOL): rename one`)
      continue
    }
    prefixes.set(prefix, name)
    configs.push(config)
  }
  return problems.length > 0 ? fail(...problems) : Either.right(configs)
}

/**
 * Reads and checks the configuration file `file` (see the module comment): its servers, or an
 * `McpConfigError` naming every problem (a file that is missing, unreadable or not a regular
 * file: `mcp.json: cannot read: no such file`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const read = (file: string): Effect.Effect<ReadonlyArray<Mcp.ServerConfig>, McpConfigError, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const unreadable = (e: unknown) => new McpConfigError({ file, problems: [`cannot read: ${fileErrorText(e, "read")}`] })
    // Stat first: opening a fifo blocks, and a device such as /dev/zero never ends.
    const info = yield* Effect.mapError(fs.stat(file), unreadable)
    if (info.type !== "File") {
      return yield* new McpConfigError({ file, problems: [`cannot read: not a regular file (${fileKind(info.type)})`] })
    }
    const text = yield* Effect.mapError(fs.readFileString(file), unreadable)
    return yield* parse(file, text)
  })
