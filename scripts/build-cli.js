// Bundles the `agent-loop` CLI (src/cli/bin.ts) into dist/cli/ with esbuild (§25):
// dist/cli/bin.js and the chunks it loads on first use (dist/cli/chunks/: the HTTP providers
// with undici, the OpenAI bridge with @effect/ai and @effect/ai-openai, the chat, the cluster
// commands with @effect/cluster, @effect/rpc, @effect/sql, @effect/sql-pg and pg, the ACP agent
// of `agent-loop acp` with @agentclientprotocol/sdk and zod: about 250 KB). Effect,
// @effect/platform(-node), @effect/cli and the library's own modules are inlined, tree-shaken,
// so that the CLI starts from a few files instead of about a thousand ES modules (which is where
// its start-up time went) and needs none of those packages installed beside it. Ink and React
// stay external: they are optional peers that only `chat` imports (src/cli/optional.ts names
// them when missing); so do the @opentelemetry/* packages of the trace export (`--otlp-endpoint`,
// src/cli/otlpExport.ts), while @effect/opentelemetry is inlined, to run on the bundle's own
// `effect`; and so does the MCP client SDK (`--mcp-config`: src/Mcp.ts is a chunk that only
// src/cli/commands/mcpFlag.ts loads). The library itself (dist/*.js from tsc) is not bundled.
//
// It also builds the page of `agent-loop inspect` (ui/inspect/: TypeScript for the browser, no
// framework) into dist/cli/inspect/: app.js (one minified bundle), index.html and app.css, which
// the inspect server sends as they are. Only `agent-loop inspect` loads them; the library and
// the other commands load none of it.
//
//   node scripts/build-cli.js [--outdir DIST] [--metafile]
// (run by scripts/build.js, after tsc, with DIST its fresh build directory; default dist/)
import { build } from "esbuild"
import { chmodSync, copyFileSync, rmSync, writeFileSync } from "node:fs"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const outdirArg = process.argv.indexOf("--outdir")
const distDir = resolve(root, outdirArg === -1 ? "dist" : process.argv[outdirArg + 1] ?? "dist")
const outdir = join(distDir, "cli")
rmSync(outdir, { recursive: true, force: true })

const result = await build({
  absWorkingDir: root,
  entryPoints: { bin: "src/cli/bin.ts" },
  outdir,
  chunkNames: "chunks/[name]-[hash]",
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  jsx: "automatic",
  // Optional peers, resolved from the user's node_modules when `chat` runs, when traces are
  // exported (`--otlp-endpoint`; src/cli/otlp.ts), and when MCP servers are connected (`--mcp-config`).
  external: [
    "ink",
    "react",
    "react/*",
    "@opentelemetry/api",
    "@opentelemetry/resources",
    "@opentelemetry/sdk-trace-base",
    "@opentelemetry/sdk-trace-node",
    "@opentelemetry/exporter-trace-otlp-http",
    "@modelcontextprotocol/client",
    "@modelcontextprotocol/client/*",
    // A native module: loaded from node_modules by Node's require (inlined, its loader looked
    // for __filename, which an ES module has not: every --sqlite failed).
    "better-sqlite3"
  ],
  // CommonJS dependencies (undici) `require` Node's modules: give each chunk a `require`.
  banner: {
    js:
      "import { createRequire as __agentLoopCreateRequire } from \"node:module\"; const require = __agentLoopCreateRequire(import.meta.url);"
  },
  minifySyntax: true,
  minifyWhitespace: true,
  keepNames: true,
  legalComments: "external",
  metafile: true,
  logLevel: "warning"
})
chmodSync(join(outdir, "bin.js"), 0o755)

// The page of `agent-loop inspect`.
const pageDir = join(outdir, "inspect")
await build({
  absWorkingDir: root,
  entryPoints: { app: "ui/inspect/main.ts" },
  outdir: pageDir,
  bundle: true,
  format: "esm",
  platform: "browser",
  target: "es2022",
  minify: true,
  legalComments: "none",
  logLevel: "warning"
})
for (const file of ["index.html", "app.css"]) copyFileSync(join(root, "ui/inspect", file), join(pageDir, file))
if (process.argv.includes("--metafile")) writeFileSync(join(distDir, "cli-meta.json"), JSON.stringify(result.metafile))
