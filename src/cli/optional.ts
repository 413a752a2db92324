/**
 * The optional peer dependencies the CLI loads on first use (package.json `peerDependenciesMeta`):
 * Ink and React for `chat`; the OpenTelemetry SDK and OTLP exporter for `--otlp-endpoint`
 * (`otlp.ts`); the MCP client SDK for `--mcp-config` (`commands/mcpFlag.ts`). Everything else the CLI runs is bundled into `dist/cli/` at build
 * time (`scripts/build-cli.js`), so a user who installed only `effect-agent-loop` and its
 * required peers can run every other command. A command that needs a package that is missing
 * fails with `MissingPackages`, whose message names the exact packages and the versions to
 * install; the CLI prints it and exits 2.
 *
 * @since 0.1.0
 */
import { Effect, Schema } from "effect"

/**
 * The name of an optional package of the CLI.
 *
 * @since 0.1.0
 * @category models
 */
export const OptionalPackage = Schema.Literal(
  "ink",
  "react",
  "@opentelemetry/api",
  "@opentelemetry/resources",
  "@opentelemetry/sdk-trace-base",
  "@opentelemetry/sdk-trace-node",
  "@opentelemetry/exporter-trace-otlp-http",
  "@modelcontextprotocol/client"
)

/**
 * @since 0.1.0
 * @category models
 */
export type OptionalPackage = typeof OptionalPackage.Type

/**
 * The version of each optional package to install: the repository's own devDependency (a test
 * checks that these agree with package.json's devDependencies and peerDependencies).
 *
 * @since 0.1.0
 * @category models
 */
export const OPTIONAL_PACKAGES: { readonly [P in OptionalPackage]: string } = {
  ink: "6.8.0",
  react: "19.3.1",
  "@opentelemetry/api": "1.9.0",
  "@opentelemetry/resources": "2.12.1",
  "@opentelemetry/sdk-trace-base": "2.12.1",
  "@opentelemetry/sdk-trace-node": "2.12.1",
  "@opentelemetry/exporter-trace-otlp-http": "0.223.1",
  "@modelcontextprotocol/client": "2.4.0"
}

/**
 * A command needs optional packages that are not installed (or that cannot be loaded: `reason`).
 *
 * @since 0.1.0
 * @category errors
 */
export class MissingPackages extends Schema.TaggedError<MissingPackages>()("MissingPackages", {
  command: Schema.String,
  packages: Schema.Array(OptionalPackage),
  reason: Schema.optional(Schema.String)
}) {
  override get message(): string {
    const names = this.packages.length === 1
      ? this.packages[0]!
      : `${this.packages.slice(0, -1).join(", ")} and ${this.packages.at(-1)}`
    const install = `npm install ${this.packages.map((p) => `${p}@${OPTIONAL_PACKAGES[p]}`).join(" ")}`
    const one = this.packages.length === 1
    return this.reason === undefined
      ? `agent-loop ${this.command} needs ${names} (${
        one ? "an optional peer dependency" : "optional peer dependencies"
      } of effect-agent-loop), which ${one ? "is" : "are"} not installed: ${install}`
      : `agent-loop ${this.command} cannot load ${names}: ${this.reason}; reinstall ${one ? "it" : "them"}: ${install}`
  }
}

/** `ERR_MODULE_NOT_FOUND`, for the package `name` itself when given (not one of its dependencies). */
const isNotFound = (error: unknown, name?: string): boolean =>
  typeof error === "object" && error !== null && (error as { code?: unknown }).code === "ERR_MODULE_NOT_FOUND" &&
  (name === undefined || String((error as { message?: unknown }).message).includes(`Cannot find package '${name}'`))

/**
 * Fails with `MissingPackages` naming each of `packages` that does not resolve from here, by the
 * ESM resolution `import` uses (`import.meta.resolve`: loader hooks apply). Loads nothing, so it
 * can run before anything else a command checks. Where `import.meta.resolve` does not exist
 * (a test runner's module loader) it checks nothing: `loadWith` still names a missing package.
 *
 * @since 0.1.0
 * @category constructors
 */
export const requirePackages = (
  command: string,
  packages: ReadonlyArray<OptionalPackage>
): Effect.Effect<void, MissingPackages> =>
  Effect.suspend(() => {
    const resolve = (import.meta as { readonly resolve?: (specifier: string) => string }).resolve
    if (typeof resolve !== "function") return Effect.void
    const missing = packages.filter((name) => {
      try {
        resolve(name)
        return false
      } catch (error) {
        if (isNotFound(error, name)) return true
        throw error
      }
    })
    return missing.length === 0 ? Effect.void : Effect.fail(new MissingPackages({ command, packages: missing }))
  })

/**
 * Runs `load` (a dynamic import of a module that imports `packages`) after `requirePackages`.
 * A module that is not found while loading is a `MissingPackages` too: naming the packages of
 * `packages` that are missing, or, when a dependency of theirs is (a broken install), with
 * Node's message as `reason`. Any other failure is a defect.
 *
 * @since 0.1.0
 * @category constructors
 */
export const loadWith = <A>(
  command: string,
  packages: ReadonlyArray<OptionalPackage>,
  load: () => Promise<A>
): Effect.Effect<A, MissingPackages> =>
  Effect.zipRight(
    requirePackages(command, packages),
    Effect.tryPromise({ try: load, catch: (error) => error }).pipe(
      Effect.catchAll((error) => {
        if (!isNotFound(error)) return Effect.die(error)
        const named = packages.filter((name) => isNotFound(error, name))
        return Effect.fail(
          named.length > 0
            ? new MissingPackages({ command, packages: named })
            : new MissingPackages({ command, packages: [...packages], reason: String((error as Error).message) })
        )
      })
    )
  )
