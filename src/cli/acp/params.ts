/**
 * The params of `agent-loop acp`'s requests that the SDK does not check (§22), and the errors of
 * bad ones: the extension methods' (`_session/steer`, `_session/inject`, with the sources an
 * injection may have), `session/new`'s and `session/load`'s (parsed here in place of the SDK's,
 * `mcpServers` entry by entry: `mcpServers.ts`) and their `cwd`. A bad param is -32602 naming
 * it (`invalidParams`); the handlers' other failures are -32603 (`internal`).
 *
 * @since 0.1.0
 */
import * as acp from "@agentclientprotocol/sdk"
import * as FileSystem from "@effect/platform/FileSystem"
import { Effect, Either, Schema } from "effect"
import * as NodePath from "node:path"
import { MessageSource } from "../../Message.js"

/**
 * -32602 `Invalid params: MESSAGE`, `data {message}`.
 *
 * @since 0.1.0
 * @category errors
 */
export const invalidParams = (message: string) => new acp.RequestError(-32602, `Invalid params: ${message}`, { message })

/**
 * -32603 with `message`.
 *
 * @since 0.1.0
 * @category errors
 */
export const internal = (message: string) => new acp.RequestError(-32603, message)

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * The kinds of source an injection takes (§2), with the field each requires: `plugin`
 * (`plugin`), `hook` (`hook`), `user`. The others are the runtime's own (`tool` results and
 * contexts, `session-reference`, `model`); `MessageSource` is an open union, so a kind outside
 * this list would be logged as it came.
 */
const INJECT_KINDS: Readonly<Record<string, string | undefined>> = { plugin: "plugin", hook: "hook", user: undefined }

/** A `_session/inject` source: a `MessageSource` (Message.ts) of a kind in `INJECT_KINDS`, else -32602 naming the problem. */
const injectSource = (source: unknown): MessageSource => {
  const decoded = Schema.decodeUnknownEither(MessageSource)(source)
  if (Either.isLeft(decoded)) {
    throw invalidParams("source: an object with a string kind is required ({kind: \"plugin\", plugin: NAME})")
  }
  const { kind } = decoded.right
  if (!Object.hasOwn(INJECT_KINDS, kind)) {
    const kinds = Object.keys(INJECT_KINDS).map((k) => JSON.stringify(k))
    throw invalidParams(
      `source.kind: ${JSON.stringify(kind)} is not a source an injection can have (${kinds.slice(0, -1).join(", ")} or ${
        kinds.at(-1)
      })`
    )
  }
  const field = INJECT_KINDS[kind]
  if (field !== undefined) {
    const value = decoded.right[field]
    if (typeof value !== "string" || value === "") {
      throw invalidParams(`source.${field}: a non-empty string is required for a source of kind ${JSON.stringify(kind)}`)
    }
  }
  return source as MessageSource
}

/**
 * The params of the extension methods (the SDK checks only the standard methods').
 *
 * @since 0.1.0
 * @category models
 */
export interface ExtensionParams {
  readonly sessionId: string
  readonly prompt: unknown
  readonly source?: MessageSource | undefined
}

/**
 * The params parser of an extension method: `sessionId` a string, `prompt` an array, and
 * `source` (only `withSource`: `_session/inject`) a `MessageSource` an injection can have; else
 * -32602 naming the problem (thrown, for the SDK to answer).
 *
 * @since 0.1.0
 * @category constructors
 */
export const extensionParams = (withSource: boolean) => (params: unknown): ExtensionParams => {
  if (!isRecord(params) || typeof params.sessionId !== "string") throw invalidParams("sessionId: a string is required")
  if (!Array.isArray(params.prompt)) throw invalidParams("prompt: an array of content blocks is required")
  const source = params.source
  if (source !== undefined && source !== null) {
    if (!withSource) throw invalidParams("source: not a parameter of this method")
    return { sessionId: params.sessionId, prompt: params.prompt, source: injectSource(source) }
  }
  return { sessionId: params.sessionId, prompt: params.prompt }
}

/**
 * The params parser of `session/new` or `session/load` (in place of the SDK's check of them):
 * `mcpServers` checked entry by entry and converted (`mcpServers.ts`), -32602 naming the entry
 * that is wrong.
 *
 * @since 0.1.0
 * @category constructors
 */
export const sessionParams = <A>(
  read: (params: unknown) => { readonly ok: true; readonly params: A } | { readonly ok: false; readonly message: string }
) =>
(params: unknown): A => {
  const result = read(params)
  if (!result.ok) throw invalidParams(result.message)
  return result.params
}

/**
 * `cwd` must be an absolute path of an existing directory (links followed), else -32602.
 *
 * @since 0.1.0
 * @category constructors
 */
export const checkCwd = (cwd: string): Effect.Effect<string, acp.RequestError, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    if (!NodePath.isAbsolute(cwd)) {
      return yield* Effect.fail(invalidParams(`cwd: an absolute path is required, got ${JSON.stringify(cwd)}`))
    }
    const fs = yield* FileSystem.FileSystem
    const info = yield* fs.stat(cwd).pipe(Effect.mapError((e) =>
      invalidParams(
        e._tag === "SystemError" && e.reason === "NotFound"
          ? `cwd: no such directory ${JSON.stringify(cwd)}`
          : `cwd: cannot read ${JSON.stringify(cwd)}: ${e.message}`
      )
    ))
    if (info.type !== "Directory") return yield* Effect.fail(invalidParams(`cwd: ${JSON.stringify(cwd)} is not a directory`))
    return cwd
  })
