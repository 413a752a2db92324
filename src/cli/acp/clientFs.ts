/**
 * `read_file` through the ACP client (§22): when the client's `initialize` capabilities
 * offer `fs.readTextFile`, the agent's `read_file` reads through the client's
 * `fs/read_text_file {sessionId, path, line?, limit?}` request, so that the model sees the
 * editor's buffer, unsaved edits included; otherwise it reads from disk as
 * `OfflineTools.readFile` does. The model sees one tool either way: same name, description and
 * parameters (`{path}`), the same result shape (`{content: text}`, at most 64 KiB of UTF-8 with
 * the same `[truncated at 64 KiB of N bytes]` note) and the same refusals.
 *
 * Decisions:
 * - **Confinement before any request.** The path is resolved against the session's `cwd`
 *   (`session/new`'s); a path outside it (absolute elsewhere, `..`) is refused with the message of
 *   the disk tool and the client is never asked. What exists on disk is checked as the disk tool
 *   checks it: a symbolic link that resolves outside `cwd` is refused, a directory or anything
 *   that is not a regular file is refused (never sent to the editor: a fifo would hang it). A
 *   path that does not exist on disk is asked for (the editor may hold it as an unsaved buffer),
 *   once its nearest existing ancestor directory is known to resolve inside `cwd` (a link to
 *   a directory elsewhere is no way out).
 * - **The request** names the absolute path under `cwd` as the model gave it (links not
 *   resolved: the editor keys its buffers by the path it opened), without `line`/`limit`: the
 *   tool's parameters are the disk tool's, and 64 KiB are cut here.
 * - **A client error is a tool error**, never a crash: `cannot read notes.txt: the client's
 *   fs/read_text_file failed: Resource not found (-32002)` (the JSON-RPC code when the error
 *   has one), a `Tool.ToolError` that the loop logs as an error `tool/result` (`TOOL_FAILED`,
 *   §8) with the error as its `cause`. A reader that throws or dies is the same.
 *   Interrupting the call (a cancel, §9) interrupts the reader; `clientReader` then cancels the
 *   request (`$/cancel_request`).
 *
 * @since 0.1.0
 */
import type { ClientCapabilities, ReadTextFileRequest, ReadTextFileResponse } from "@agentclientprotocol/sdk"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { Effect } from "effect"
import { messageOf } from "../../internal/cause.js"
import { leaves, MAX_READ, withTruncation } from "../../internal/readFile.js"
import { fileKind } from "../../internal/store/common.js"
import * as OfflineTools from "../../providers/OfflineTools.js"
import * as Tool from "../../Tool.js"

/**
 * Reads a text file through the client: `(path, line?, limit?)` with `path` absolute, `line`
 * 1-based, `limit` in lines (ACP `fs/read_text_file`), succeeding with the text.
 *
 * @since 0.1.0
 * @category models
 */
export type ReadTextFile = (
  path: string,
  line?: number | undefined,
  limit?: number | undefined
) => Effect.Effect<string, Error>

/**
 * Whether the client's `initialize` capabilities offer `fs/read_text_file`
 * (`clientCapabilities.fs.readTextFile === true`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const offersReadTextFile = (capabilities: ClientCapabilities | null | undefined): boolean =>
  capabilities?.fs?.readTextFile === true

/**
 * A `ReadTextFile` over an SDK connection's request function for session `sessionId`, e.g.
 * `clientReader(sessionId, (params, options) => connection.client.request("fs/read_text_file",
 * params, options))`. Interrupting the read aborts the request (`cancellationSignal`, which sends
 * `$/cancel_request`, and `stopWaitingOnCancel`). A response without a string `content` fails.
 *
 * @since 0.1.0
 * @category constructors
 */
export const clientReader = (
  sessionId: string,
  request: (
    params: ReadTextFileRequest,
    options: { readonly cancellationSignal: AbortSignal; readonly stopWaitingOnCancel: true }
  ) => PromiseLike<ReadTextFileResponse>
): ReadTextFile =>
(path, line, limit) =>
  Effect.flatMap(
    Effect.tryPromise({
      try: (signal) =>
        request({
          sessionId,
          path,
          ...(line !== undefined ? { line } : {}),
          ...(limit !== undefined ? { limit } : {})
        }, { cancellationSignal: signal, stopWaitingOnCancel: true }),
      catch: (cause) => cause instanceof Error ? cause : new Error(messageOf(cause))
    }),
    (response) =>
      typeof response?.content === "string"
        ? Effect.succeed(response.content)
        : Effect.fail(new Error("the response has no content string"))
  )

/** How a client error reads in a tool error: its message, and its JSON-RPC code when it has one. */
const describeError = (e: unknown): string => {
  const code = (e as { readonly code?: unknown } | null)?.code
  const message = messageOf(e)
  return typeof code === "number" ? `${message} (${code})` : message
}

/** The text as the disk tool returns it: at most 64 KiB of UTF-8, then the truncation note. */
const cut = (text: string): string => {
  const bytes = new TextEncoder().encode(text)
  if (bytes.length <= MAX_READ) return text
  let lines = bytes[MAX_READ - 1] === 10 ? 1 : 0
  for (let i = bytes.indexOf(10, MAX_READ); i !== -1 && i < bytes.length - 1; i = bytes.indexOf(10, i + 1)) lines++
  return withTruncation(new TextDecoder().decode(bytes.subarray(0, MAX_READ)), bytes.length, { lines, exact: true })
}

/**
 * `read_file {path}` confined to `root` (default: the process's working directory) that reads
 * through `read` (the client's `fs/read_text_file`); see the module comment for what is refused
 * before any request and how a client error reads. Fails only with `Tool.ToolError`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const readFileVia = (
  read: ReadTextFile,
  root?: string
): Effect.Effect<Tool.Tool<{ readonly path: string }>, never, FileSystem.FileSystem | Path.Path> =>
  Effect.gen(function*() {
    const disk = yield* OfflineTools.readFile(root)
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const base = path.resolve(root ?? process.cwd())
    const fsMessage = (e: { readonly _tag: string; readonly message: string; readonly reason?: string }) =>
      e._tag === "SystemError" ? (e.reason === "NotFound" ? "no such file" : e.reason ?? e.message) : e.message
    /** The real path of `p`, or of its nearest existing ancestor when `p` does not exist; `exists` says which. */
    const realOf = (p: string) =>
      Effect.gen(function*() {
        let at = p
        while (true) {
          const real = yield* Effect.either(fs.realPath(at))
          if (real._tag === "Right") return { real: real.right, exists: at === p }
          const e = real.left
          if (!(e._tag === "SystemError" && e.reason === "NotFound") || path.dirname(at) === at) return yield* Effect.fail(e)
          at = path.dirname(at)
        }
      })
    const execute = (requested: string) =>
      Effect.gen(function*() {
        const target = path.resolve(base, requested)
        if (leaves(path, path.relative(base, target))) {
          return yield* new Tool.ToolError({ message: `${requested} is outside the working directory` })
        }
        const realBase = yield* fs.realPath(base)
        const { exists, real } = yield* realOf(target)
        if (leaves(path, path.relative(realBase, real))) {
          return yield* new Tool.ToolError({ message: `${requested} resolves outside the working directory` })
        }
        if (exists) {
          const info = yield* fs.stat(real)
          if (info.type === "Directory") return yield* new Tool.ToolError({ message: `${requested} is a directory` })
          if (info.type !== "File") {
            return yield* new Tool.ToolError({ message: `${requested} is not a regular file (${fileKind(info.type)})` })
          }
        }
        const text = yield* Effect.suspend(() => read(target)).pipe(
          Effect.catchAllDefect((defect) => Effect.fail(defect)),
          Effect.mapError((e) =>
            new Tool.ToolError({
              message: `cannot read ${requested}: the client's fs/read_text_file failed: ${describeError(e)}`,
              cause: e
            })
          )
        )
        if (typeof text !== "string") {
          return yield* new Tool.ToolError({
            message: `cannot read ${requested}: the client's fs/read_text_file returned no text`
          })
        }
        return { content: cut(text) }
      }).pipe(
        Effect.catchIf(
          (e): e is Exclude<typeof e, Tool.ToolError> => !(e instanceof Tool.ToolError),
          (e) => Effect.fail(new Tool.ToolError({ message: `cannot read ${requested}: ${fsMessage(e)}` }))
        )
      )
    return Tool.make({
      name: disk.name,
      description: disk.description,
      parameters: disk.parameters,
      execute: ({ path: requested }) => execute(requested)
    })
  })

/**
 * The `read_file` of a session: through the client when `read` is given (the client offers
 * `fs.readTextFile`: `readFileVia`), else from disk (`OfflineTools.readFile`), confined to `root`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const readFile = (
  options: { readonly root?: string | undefined; readonly read?: ReadTextFile | undefined }
): Effect.Effect<Tool.Tool<{ readonly path: string }>, never, FileSystem.FileSystem | Path.Path> =>
  options.read !== undefined ? readFileVia(options.read, options.root) : OfflineTools.readFile(options.root)

/**
 * The built-in tools of a session (`OfflineTools.all`'s three: `wait`, `clock`, `read_file`), with
 * `read_file` as `readFile(options)` gives it.
 *
 * @since 0.1.0
 * @category constructors
 */
export const tools = (
  options: { readonly root?: string | undefined; readonly read?: ReadTextFile | undefined }
): Effect.Effect<ReadonlyArray<Tool.Tool<any>>, never, FileSystem.FileSystem | Path.Path> =>
  Effect.map(readFile(options), (read) => [OfflineTools.wait, OfflineTools.clock, read])
