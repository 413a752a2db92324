/**
 * The package as a user installs it (§25): the entry points of package.json exist after
 * the build, each entry loads only what it needs (recorded in a child process by the resolve
 * hook of test/utils/moduleHooks.mjs), and the optional peers agree with the repository's own
 * devDependencies (which `npm ci` installs, so a fresh clone runs everything).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { OPTIONAL_PACKAGES } from "../src/cli/optional.js"
import { CHILD_RUN_MS, CLI_RUN_MS, note } from "./utils/bounds.js"
import { run } from "./utils/child.js"
import { scratchDirs } from "./utils/scratchDirs.js"

const root = process.cwd()
const manifest = JSON.parse(Fs.readFileSync(Path.join(root, "package.json"), "utf8")) as {
  readonly bin: Record<string, string>
  readonly exports: Record<string, string | { readonly types: string; readonly default: string }>
  readonly dependencies: Record<string, string>
  readonly peerDependencies: Record<string, string>
  readonly peerDependenciesMeta: Record<string, { readonly optional?: boolean }>
  readonly devDependencies: Record<string, string>
}
const hooks = Path.join(root, "test/utils/moduleHooks.mjs")
const tmpDir = scratchDirs("agent-loop-package-")

/**
 * Runs `command args` to its end, spawned and awaited (bounded by `withinMs`: `CHILD_RUN_MS` for
 * a `node` child or npm, `CLI_RUN_MS` for the built CLI); notes how long it took as `what`.
 */
const runTimed = (
  what: string,
  command: string,
  args: ReadonlyArray<string>,
  options: { readonly withinMs: number; readonly cwd: string; readonly env?: NodeJS.ProcessEnv | undefined }
) =>
  Effect.gen(function*() {
    const started = Date.now()
    const ran = yield* run(command, args, options)
    note(`Package: ${what}`, Date.now() - started)
    return ran
  })

/** A `node` child running the ES module `script` from the repository root; its stdout (it must exit 0). */
const nodeScript = (script: string, env: NodeJS.ProcessEnv, withHooks = true) =>
  Effect.gen(function*() {
    const args = [...(withHooks ? ["--import", hooks] : []), "--input-type=module", "-e", script]
    const ran = yield* runTimed("a node child's import", process.execPath, args, { cwd: root, env, withinMs: CHILD_RUN_MS })
    expect(ran.status, ran.stderr).toBe(0)
    return ran.stdout
  })

/** The packages (by name, sorted) a child process resolves or requires while it imports `specifier`. */
const packagesLoadedBy = (specifier: string) =>
  Effect.gen(function*() {
    const file = Path.join(tmpDir(), "imports.txt")
    yield* nodeScript(`await import(${JSON.stringify(specifier)})`, { ...process.env, RECORD_IMPORTS_FILE: file })
    const names = new Set<string>()
    for (const line of Fs.readFileSync(file, "utf8").split("\n")) {
      const m = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(line)
      if (m !== null) names.add(m[1]!)
    }
    return [...names].sort()
  })

/**
 * The packages (by name, sorted) the built CLI (dist/cli/bin.js) resolves or requires from
 * node_modules while it runs `args` (what the bundle inlines is not among them), with its exit code.
 */
const packagesLoadedByCli = (
  args: ReadonlyArray<string>,
  env: Record<string, string> = {}
): Effect.Effect<{ readonly code: number; readonly packages: ReadonlyArray<string>; readonly chunks: ReadonlyArray<string> }> =>
  Effect.gen(function*() {
    const dir = tmpDir()
    const file = Path.join(dir, "imports.txt")
    const clean = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("OTEL_")))
    const ran = yield* runTimed("a run of the CLI", process.execPath, [
      "--import",
      hooks,
      Path.join(root, "dist/cli/bin.js"),
      ...args
    ], { cwd: dir, env: { ...clean, ...env, RECORD_IMPORTS_FILE: file }, withinMs: CLI_RUN_MS })
    const names = new Set<string>()
    const chunks = new Set<string>()
    for (const line of Fs.readFileSync(file, "utf8").split("\n")) {
      const m = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(line)
      if (m !== null) names.add(m[1]!)
      const c = /dist\/cli\/chunks\/([^/]+\.js)$/.exec(line)
      if (c !== null) chunks.add(c[1]!)
    }
    return { code: ran.status ?? -1, packages: [...names].sort(), chunks: [...chunks].sort() }
  })

/** Optional peers and the heavy packages that no entry may load unless it is theirs. */
const HEAVY = [
  "@effect/ai",
  "@effect/ai-openai",
  "@effect/cli",
  "@effect/cluster",
  "@effect/platform-node",
  "@effect/rpc",
  "@effect/sql",
  "@effect/sql-pg",
  "@effect/sql-sqlite-node",
  "@effect/workflow",
  "better-sqlite3",
  "gpt-tokenizer",
  "pg",
  "ink",
  "react",
  "undici",
  "@modelcontextprotocol/client"
]

describe("package.json", () => {
  it("every export and the bin name a file of the build", () => {
    expect(Object.keys(manifest.exports)).toEqual([".", "./sql", "./ai-bridge", "./cluster", "./mcp", "./package.json"])
    for (const target of Object.values(manifest.exports)) {
      for (const file of typeof target === "string" ? [target] : [target.types, target.default]) {
        expect(Fs.existsSync(Path.join(root, file)), file).toBe(true)
      }
    }
    expect(manifest.exports["./sql"]).toEqual({ types: "./dist/SqlSessionStore.d.ts", default: "./dist/SqlSessionStore.js" })
    expect(manifest.exports["./ai-bridge"]).toEqual({
      types: "./dist/providers/AiBridge.d.ts",
      default: "./dist/providers/AiBridge.js"
    })
    expect(manifest.exports["./cluster"]).toEqual({ types: "./dist/cluster/index.d.ts", default: "./dist/cluster/index.js" })
    expect(manifest.exports["./mcp"]).toEqual({ types: "./dist/Mcp.d.ts", default: "./dist/Mcp.js" })
    const bin = Path.join(root, manifest.bin["agent-loop"]!)
    expect(Fs.statSync(bin).mode & 0o111).not.toBe(0)
  })

  it.live("the packed tarball: no test seam (the store failpoints), and every module of dist/ built from a source it ships", () =>
    Effect.gen(function*() {
      // `npm pack --dry-run` lists what `npm publish` would put in the tarball (package.json `files`).
      const packed = yield* runTimed("npm pack --dry-run", "npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], {
        cwd: root,
        withinMs: CHILD_RUN_MS
      })
      expect(packed.status, packed.stderr).toBe(0)
      const stdout = packed.stdout
      const files: ReadonlyArray<string> =
        (JSON.parse(stdout) as ReadonlyArray<{ readonly files: ReadonlyArray<{ readonly path: string }> }>)[0]!
          .files.map((f) => f.path)
      expect(files).toContain("dist/index.js")
      expect(files).toContain("src/SessionStore.ts")
      expect(files.filter((f) => /failpoint/i.test(f))).toEqual([])
      // A module that moved or was removed leaves no stale build behind (the bundled CLI aside).
      const orphans = files.filter((f) => /^dist\/(?!cli\/).*\.js$/.test(f))
        .filter((f) => !files.includes(f.replace(/^dist\//, "src/").replace(/\.js$/, ".ts")))
      expect(orphans).toEqual([])
    }))

  it("one dependency; every peer is a devDependency at an exact version its range admits; the optional ones are the CLI's and the subpaths'", () => {
    expect(manifest.dependencies).toEqual({ "@effect/experimental": "^0.61.1" })
    for (const [name, range] of Object.entries(manifest.peerDependencies)) {
      const dev = manifest.devDependencies[name]
      expect(dev, name).toMatch(/^\d+\.\d+\.\d+$/)
      expect(range, name).toBe(`^${dev}`)
    }
    const optional = Object.entries(manifest.peerDependenciesMeta).filter(([, m]) => m.optional === true).map(([n]) => n).sort()
    expect(optional).toEqual([
      "@effect/ai",
      "@effect/cluster",
      "@effect/opentelemetry",
      "@effect/platform-node",
      "@effect/rpc",
      "@effect/sql",
      "@effect/sql-pg",
      "@effect/sql-sqlite-node",
      "@effect/workflow",
      "@modelcontextprotocol/client",
      "@opentelemetry/api",
      "@opentelemetry/exporter-trace-otlp-http",
      "@opentelemetry/resources",
      "@opentelemetry/sdk-trace-base",
      "@opentelemetry/sdk-trace-node",
      "ink",
      "react"
    ])
    expect(Object.keys(manifest.peerDependencies).filter((n) => !optional.includes(n)).sort()).toEqual([
      "@effect/platform",
      "effect"
    ])
  })

  it("the CLI's optional packages name the versions of our devDependencies", () => {
    for (const [name, version] of Object.entries(OPTIONAL_PACKAGES)) {
      expect([name, version]).toEqual([name, manifest.devDependencies[name]])
      expect(manifest.peerDependenciesMeta[name]).toEqual({ optional: true })
    }
  })
})

describe("what each entry loads (a child process, its resolved modules recorded)", () => {
  it.live("the main entry loads effect, @effect/platform and @effect/experimental, none of the optional peers", () =>
    Effect.gen(function*() {
      const loaded = yield* packagesLoadedBy("effect-agent-loop")
      // The recorder works: what the main entry does need is there.
      expect(loaded).toEqual(expect.arrayContaining(["@effect/experimental", "@effect/platform", "effect"]))
      expect(loaded.filter((name) => HEAVY.includes(name))).toEqual([])
    }))

  it.live("effect-agent-loop/sql loads @effect/sql, not SQLite (loaded when layerSqlite is built) nor the others", () =>
    Effect.gen(function*() {
      const loaded = yield* packagesLoadedBy("effect-agent-loop/sql")
      expect(loaded.filter((name) => HEAVY.includes(name))).toEqual(["@effect/sql"])
    }))

  it.live("layerSqlite without its driver installed is a SessionStoreError naming the package and version", () =>
    Effect.gen(function*() {
      const script = `
      import { Effect, Layer } from "effect"
      import * as SqlSessionStore from "effect-agent-loop/sql"
      const error = await Effect.runPromise(Effect.flip(Effect.scoped(Layer.build(SqlSessionStore.layerSqlite({ filename: ":memory:" })))))
      console.log(JSON.stringify([error._tag, error.message]))`
      const out = yield* nodeScript(script, { ...process.env, HIDE_PACKAGES: "@effect/sql-sqlite-node" })
      const [tag, message] = JSON.parse(out) as [string, string]
      expect(tag).toBe("SessionStoreError")
      expect(message).toMatch(
        /^SqlSessionStore\.layerSqlite needs @effect\/sql-sqlite-node \(an optional peer dependency of effect-agent-loop\), which is not installed: npm install @effect\/sql-sqlite-node@0\.53\.0: Cannot find package '@effect\/sql-sqlite-node'/
      )
    }))

  it.live("layerPg without its driver installed is a SessionStoreError naming the package and version", () =>
    Effect.gen(function*() {
      const script = `
      import { Effect, Layer } from "effect"
      import * as SqlSessionStore from "effect-agent-loop/sql"
      const error = await Effect.runPromise(Effect.flip(Effect.scoped(Layer.build(SqlSessionStore.layerPg({ url: "postgres://127.0.0.1:1/x" })))))
      console.log(JSON.stringify([error._tag, error.message]))`
      const out = yield* nodeScript(script, { ...process.env, HIDE_PACKAGES: "@effect/sql-pg" })
      const [tag, message] = JSON.parse(out) as [string, string]
      expect(tag).toBe("SessionStoreError")
      expect(message).toMatch(
        /^SqlSessionStore\.layerPg needs @effect\/sql-pg \(an optional peer dependency of effect-agent-loop\), which is not installed: npm install @effect\/sql-pg@0\.53\.0: Cannot find package '@effect\/sql-pg'/
      )
    }))

  it.live("layerPg on a server that does not answer is a SessionStoreError naming the host, port and database", () =>
    Effect.gen(function*() {
      const script = `
      import { Effect, Layer } from "effect"
      import * as SqlSessionStore from "effect-agent-loop/sql"
      const error = await Effect.runPromise(Effect.flip(Effect.scoped(Layer.build(SqlSessionStore.layerPg({ url: "postgres://u:secret@127.0.0.1:1/x" })))))
      console.log(JSON.stringify([error._tag, error.message]))`
      const out = yield* nodeScript(script, process.env, false)
      const [tag, message] = JSON.parse(out) as [string, string]
      expect(tag).toBe("SessionStoreError")
      expect(message).toMatch(/^cannot open the PostgreSQL database 127\.0\.0\.1:1\/x: /)
      expect(message).not.toContain("secret")
    }))

  it.live("effect-agent-loop/ai-bridge loads @effect/ai (and its peer @effect/rpc), not SQL nor the chat's packages", () =>
    Effect.gen(function*() {
      const loaded = yield* packagesLoadedBy("effect-agent-loop/ai-bridge")
      expect(loaded.filter((name) => HEAVY.includes(name) && name !== "@effect/rpc")).toEqual(["@effect/ai"])
    }))

  it.live("effect-agent-loop/cluster loads the cluster, its transport and PostgreSQL, not @effect/workflow (deep imports), undici nor SQLite", () =>
    Effect.gen(function*() {
      const loaded = yield* packagesLoadedBy("effect-agent-loop/cluster")
      expect(loaded.filter((name) => HEAVY.includes(name))).toEqual([
        "@effect/cluster",
        "@effect/platform-node",
        "@effect/rpc",
        "@effect/sql",
        "@effect/sql-pg",
        "pg"
      ])
    }))

  it.live(
    "agent-loop run loads nothing of OpenTelemetry without --otlp-endpoint or OTEL_EXPORTER_OTLP_*; with one, the five packages of the export",
    () =>
      Effect.gen(function*() {
        const otel = (name: string) => name.startsWith("@opentelemetry/") || name === "@effect/opentelemetry"
        const without = yield* packagesLoadedByCli(["run", "--prompt", "what time is it", "--store", tmpDir()])
        expect(without.code).toBe(0)
        expect(without.packages.filter(otel)).toEqual([])
        // The recorder works: with an endpoint (a closed port: the export fails, the run does not) they are loaded.
        const withFlag = yield* packagesLoadedByCli(["run", "--prompt", "hello", "--store", tmpDir()], {
          OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:1",
          OTEL_EXPORTER_OTLP_TIMEOUT: "200"
        })
        expect(withFlag.code).toBe(0)
        // The five optional peers of the export and what they depend on (installed with them);
        // @effect/opentelemetry is inlined in the bundle.
        expect(withFlag.packages.filter(otel)).toEqual([
          "@opentelemetry/api",
          "@opentelemetry/api-logs",
          "@opentelemetry/context-async-hooks",
          "@opentelemetry/core",
          "@opentelemetry/exporter-trace-otlp-http",
          "@opentelemetry/otlp-exporter-base",
          "@opentelemetry/otlp-transformer",
          "@opentelemetry/resources",
          "@opentelemetry/sdk-metrics",
          "@opentelemetry/sdk-trace",
          "@opentelemetry/sdk-trace-base",
          "@opentelemetry/sdk-trace-node",
          "@opentelemetry/semantic-conventions"
        ])
      })
  )

  it.live(
    "agent-loop run loads nothing of @modelcontextprotocol without --mcp-config; with it, the MCP client SDK from node_modules and the chunk of src/Mcp.ts",
    () =>
      Effect.gen(function*() {
        const mcp = (name: string) => name.startsWith("@modelcontextprotocol/")
        const mcpChunk = (name: string) => name.startsWith("Mcp-")
        const without = yield* packagesLoadedByCli(["run", "--prompt", "what time is it", "--store", tmpDir()])
        expect(without.code).toBe(0)
        expect(without.packages.filter(mcp)).toEqual([])
        expect(without.chunks.filter(mcpChunk)).toEqual([])
        // The recorder works: with a configuration (a server that cannot start: the run goes on
        // without it) the SDK is loaded, and its dependency @modelcontextprotocol/core.
        const config = Path.join(tmpDir(), "mcp.json")
        Fs.writeFileSync(config, JSON.stringify({ mcpServers: { gone: { command: "/nonexistent/agent-loop-mcp-server" } } }))
        const withFlag = yield* packagesLoadedByCli([
          "run",
          "--prompt",
          "what time is it",
          "--store",
          tmpDir(),
          "--mcp-config",
          config
        ])
        expect(withFlag.code).toBe(0)
        expect(withFlag.packages.filter(mcp)).toEqual(["@modelcontextprotocol/client", "@modelcontextprotocol/core"])
        expect(withFlag.chunks.filter(mcpChunk)).toHaveLength(1)
      })
  )

  it.live(
    "agent-loop acp runs on the ACP SDK and zod bundled into chunks no other command loads; the MCP client's chunk only when a session has MCP servers",
    () =>
      Effect.gen(function*() {
        const chunkDir = Path.join(root, "dist/cli/chunks")
        const holding = (marker: string) =>
          Fs.readdirSync(chunkDir).filter((f) =>
            f.endsWith(".js") && Fs.readFileSync(Path.join(chunkDir, f), "utf8").includes(marker)
          )
        // The SDK's initialization gate; zod 4's core type (one chunk, that one or its own); the
        // chunk of src/Mcp.ts (the MCP client SDK stays external: loaded from node_modules).
        const sdk = holding("ACP connection must be initialized before")
        expect(sdk).toHaveLength(1)
        const zod = holding("$ZodType")
        expect(zod).toHaveLength(1)
        const mcp = holding("StdioClientTransport")
        expect(mcp).toHaveLength(1)
        const acp = yield* packagesLoadedByCli(["acp", "--store", tmpDir()])
        expect(acp.code).toBe(0)
        expect(acp.chunks).toContain(sdk[0])
        expect(acp.chunks).toContain(zod[0])
        expect(acp.chunks).not.toContain(mcp[0])
        // Inlined: nothing of them is resolved from node_modules.
        expect(
          acp.packages.filter((name) =>
            name === "zod" || name.startsWith("@agentclientprotocol/") || name.startsWith("@modelcontextprotocol/")
          )
        ).toEqual([])
        const ran = yield* packagesLoadedByCli(["run", "--prompt", "what time is it", "--store", tmpDir()])
        expect(ran.code).toBe(0)
        for (const chunk of [sdk[0], zod[0], mcp[0]]) expect(ran.chunks).not.toContain(chunk)
        const help = (yield* packagesLoadedByCli(["--help"])).chunks
        for (const chunk of [sdk[0], zod[0], mcp[0]]) expect(help).not.toContain(chunk)
      })
  )
})
