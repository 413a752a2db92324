/**
 * `--mcp-config FILE` (§28; src/cli/mcpConfig.ts): the `mcpServers` format of Claude Desktop,
 * Claude Code, Cursor and Cline read into `Mcp.ServerConfig`s, and every problem named by its
 * key path, with no value of the file (secrets) in any message.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as McpConfig from "../src/cli/mcpConfig.js"
import { scratchDirs } from "./utils/scratchDirs.js"

const tmpDir = scratchDirs("agent-loop-mcp-config-")

/** The servers of `json` (an object, or text as it is), read as `/work/mcp.json`. */
const servers = (json: unknown) => {
  const parsed = McpConfig.parse("mcp.json", typeof json === "string" ? json : JSON.stringify(json), { directory: "/work" })
  if (Either.isLeft(parsed)) throw new Error(`unexpected: ${parsed.left.message}`)
  return parsed.right
}

/** The message of the error `json` gives. */
const problems = (json: unknown) => {
  const parsed = McpConfig.parse("mcp.json", typeof json === "string" ? json : JSON.stringify(json), { directory: "/work" })
  if (Either.isRight(parsed)) throw new Error(`unexpected servers: ${JSON.stringify(parsed.right)}`)
  expect(parsed.left._tag).toBe("McpConfigError")
  return parsed.left.message.split("\n")
}

describe("McpConfig.parse: the entries people have", () => {
  it("a Claude Desktop file: stdio entries with args, env, cwd (relative to the file's directory)", () => {
    expect(servers({
      mcpServers: {
        files: { command: "npx", args: ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"] },
        github: { type: "stdio", command: "github-mcp", env: { GITHUB_TOKEN: "ghp_secret" }, cwd: "tools" },
        bare: { command: "/usr/bin/server" }
      }
    })).toEqual([
      { type: "stdio", name: "files", command: "npx", args: ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"] },
      { type: "stdio", name: "github", command: "github-mcp", env: { GITHUB_TOKEN: "ghp_secret" }, cwd: "/work/tools" },
      { type: "stdio", name: "bare", command: "/usr/bin/server" }
    ])
  })

  it("HTTP entries: a url alone is streamable HTTP; http, streamable-http, streamableHttp and sse; Cline's transportType", () => {
    expect(servers({
      mcpServers: {
        plain: { url: "https://example.com/mcp" },
        http: { type: "http", url: "http://127.0.0.1:3001/mcp", headers: { Authorization: "Bearer t0ken" } },
        dashed: { type: "streamable-http", url: "https://a.example/mcp" },
        camel: { type: "streamableHttp", url: "https://b.example/mcp" },
        legacy: { type: "sse", url: "https://c.example/sse" },
        cline: { transportType: "sse", url: "https://d.example/sse" }
      }
    })).toEqual([
      { type: "http", name: "plain", url: "https://example.com/mcp" },
      { type: "http", name: "http", url: "http://127.0.0.1:3001/mcp", headers: { Authorization: "Bearer t0ken" } },
      { type: "http", name: "dashed", url: "https://a.example/mcp" },
      { type: "http", name: "camel", url: "https://b.example/mcp" },
      { type: "sse", name: "legacy", url: "https://c.example/sse" },
      { type: "sse", name: "cline", url: "https://d.example/sse" }
    ])
  })

  it("our keys approval, autoApprove and alwaysAllow (merged), timeoutMs; disabled entries skipped; unknown keys ignored", () => {
    expect(servers({
      globalShortcut: "Ctrl+Space",
      mcpServers: {
        trusted: {
          command: "a",
          approval: "never",
          timeoutMs: 5000,
          connectTimeoutMs: 900,
          maxRestarts: 0,
          maxResultBytes: 100,
          autoStart: true,
          description: "x"
        },
        some: { command: "b", autoApprove: ["read", "list"], alwaysAllow: ["list", "stat"], timeout: 60 },
        off: { command: "c", disabled: true },
        offAndBroken: { disabled: true, args: "not checked" },
        on: { url: "https://example.com/mcp", disabled: false, approval: "always" }
      }
    })).toEqual([
      {
        type: "stdio",
        name: "trusted",
        command: "a",
        approval: "never",
        timeoutMs: 5000,
        connectTimeoutMs: 900,
        maxResultBytes: 100,
        maxRestarts: 0
      },
      { type: "stdio", name: "some", command: "b", autoApprove: ["read", "list", "stat"] },
      { type: "http", name: "on", url: "https://example.com/mcp", approval: "always" }
    ])
  })

  it("no servers, or all disabled: none; a BOM is skipped; names in file order", () => {
    expect(servers({ mcpServers: {} })).toEqual([])
    expect(servers({ mcpServers: { a: { command: "a", disabled: true } } })).toEqual([])
    expect(servers("\uFEFF{\"mcpServers\":{\"z\":{\"command\":\"z\"},\"a\":{\"command\":\"a\"}}}").map((s) => s.name))
      .toEqual(["z", "a"])
  })
})

describe("McpConfig.parse: each problem named by its key path", () => {
  it("args, env, headers, command, cwd, url: the exact path, with the kind of value found and never the value", () => {
    expect(problems({
      mcpServers: {
        files: { command: "npx", args: "--root /tmp" },
        github: { command: "gh", args: ["ok", 3], env: { GITHUB_TOKEN: 12345, OTHER: "fine" }, cwd: 7 },
        issues: { url: "ftp://user:hunter2@example.com/mcp", headers: { Authorization: ["Bearer hunter2"] } },
        nothing: { command: "" },
        weird: { url: "not a url with s3cret" },
        "my files": { url: 42, headers: "Bearer s3cret" }
      }
    })).toEqual([
      "mcp.json: mcpServers.files.args: expected an array of strings, got a string",
      "mcp.json: mcpServers.github.args[1]: expected a string, got a number",
      "mcp.json: mcpServers.github.env.GITHUB_TOKEN: expected a string, got a number",
      "mcp.json: mcpServers.github.cwd: expected a string, got a number",
      "mcp.json: mcpServers.issues.url: expected an http or https URL",
      "mcp.json: mcpServers.issues.headers.Authorization: expected a string, got an array",
      "mcp.json: mcpServers.nothing.command: the string is empty",
      "mcp.json: mcpServers.weird.url: expected an http or https URL",
      "mcp.json: mcpServers[\"my files\"].url: expected a string, got a number",
      "mcp.json: mcpServers[\"my files\"].headers: expected an object of strings, got a string"
    ])
  })

  it("both or neither of command and url; a type that does not fit; a bad type, approval, autoApprove, timeoutMs, disabled", () => {
    expect(problems({
      mcpServers: {
        both: { command: "a", url: "https://example.com" },
        neither: { args: ["x"] },
        stdioUrl: { type: "stdio", url: "https://example.com" },
        httpCommand: { type: "http", command: "a" },
        badType: { type: "websocket", url: "wss://example.com" },
        badApproval: { command: "a", approval: "sometimes", autoApprove: "read", alwaysAllow: [true], timeoutMs: -1 },
        zero: { command: "a", timeoutMs: 0, disabled: "no" },
        limits: { command: "a", connectTimeoutMs: "30s", maxRestarts: 1.5, maxResultBytes: -1 },
        entry: ["not", "an", "object"],
        "": { command: "a" }
      }
    })).toEqual([
      "mcp.json: mcpServers.both: has both \"command\" and \"url\": give one (a command for a stdio server, a url for an HTTP one)",
      "mcp.json: mcpServers.neither: has neither \"command\" nor \"url\": give one (a command for a stdio server, a url for an HTTP one)",
      "mcp.json: mcpServers.stdioUrl.type: \"stdio\" needs a \"command\", not a \"url\"",
      "mcp.json: mcpServers.httpCommand.type: \"http\" needs a \"url\", not a \"command\"",
      "mcp.json: mcpServers.badType.type: expected \"stdio\", \"http\", \"streamable-http\", \"streamableHttp\" or \"sse\"",
      "mcp.json: mcpServers.badType.url: expected an http or https URL",
      "mcp.json: mcpServers.badApproval.approval: expected \"always\" or \"never\"",
      "mcp.json: mcpServers.badApproval.autoApprove: expected an array of strings, got a string",
      "mcp.json: mcpServers.badApproval.alwaysAllow[0]: expected a string, got a boolean",
      "mcp.json: mcpServers.badApproval.timeoutMs: expected a positive number of milliseconds",
      "mcp.json: mcpServers.zero.disabled: expected true or false",
      "mcp.json: mcpServers.zero.timeoutMs: expected a positive number of milliseconds",
      "mcp.json: mcpServers.limits.connectTimeoutMs: expected a positive number of milliseconds",
      "mcp.json: mcpServers.limits.maxResultBytes: expected a positive number of bytes",
      "mcp.json: mcpServers.limits.maxRestarts: expected a whole number ≥ 0",
      "mcp.json: mcpServers.entry: expected an object (a command or a url, and their settings), got an array",
      "mcp.json: mcpServers[\"\"]: the server name is empty"
    ])
  })

  it("two names whose tools would share their names", () => {
    expect(problems({ mcpServers: { "a.b": { command: "a" }, a_b: { command: "b" } } })).toEqual([
      "mcp.json: mcpServers.a_b: its tools would have the names of server \"a.b\"'s (a_b__TOOL): rename one"
    ])
  })

  it("no secret of env, headers or a url in any message", () => {
    const message = problems({
      mcpServers: {
        a: { command: "a", env: { TOKEN: "sekrit-1", N: 1 }, args: [2] },
        b: { url: "https://user:sekrit-2@example.com/mcp?key=sekrit-3", headers: { K: "sekrit-4", L: null }, type: "stdio" }
      }
    }).join("\n")
    expect(message).not.toMatch(/sekrit/)
    expect(message.split("\n")).toEqual([
      "mcp.json: mcpServers.a.args[0]: expected a string, got a number",
      "mcp.json: mcpServers.a.env.N: expected a string, got a number",
      "mcp.json: mcpServers.b.type: \"stdio\" needs a \"command\", not a \"url\"",
      "mcp.json: mcpServers.b.headers.L: expected a string, got null"
    ])
  })
})

describe("McpConfig.parse: the file as a whole", () => {
  it("not JSON: the line and column, what was expected there, and none of the text (the same on every Node)", () => {
    expect(problems("{\"mcpServers\": {\"a\": {\"env\": {\"K\": s3cret}}}}")).toEqual([
      "mcp.json: not JSON: line 1, column 36: a character that starts no JSON value"
    ])
    expect(problems("{\"mcpServers\": {\"a\": {\"command\": \"x\"}")).toEqual([
      "mcp.json: not JSON: line 1, column 38: the file ends before the JSON does"
    ])
    // Where the string holding it starts.
    expect(problems("{\"mcpServers\": {\"a\": {\"command\": \"é\tx\"}}}")).toEqual([
      "mcp.json: not JSON: line 1, column 34: a control character in a string (write it as an escape such as \\n)"
    ])
    expect(problems("{\"mcpServers\": {}} {}")).toEqual(["mcp.json: not JSON: line 1, column 20: more text after the JSON value"])
    expect(problems("[1 2]")).toEqual(["mcp.json: not JSON: line 1, column 4: expected ','"])
    expect(problems("{\"a\" 1}")).toEqual(["mcp.json: not JSON: line 1, column 6: expected ':' after a property name"])
    expect(problems("{\"a\": \"\\x\"}")).toEqual(["mcp.json: not JSON: line 1, column 7: a bad escape in a string"])
    expect(problems("{\n  \"mcpServers\": {\n    \"a\": { \"command\": \"x\" /* unclosed\n  }\n}")).toEqual([
      "mcp.json: not JSON: line 3, column 27: a comment that does not end"
    ])
  })

  it("JSON with comments and trailing commas, as VS Code and Cursor write it, is read", () => {
    const text = "// my servers\n{\n  \"mcpServers\": {\n    \"a\": { \"command\": \"x\", }, /* more later */\n  },\n}\n"
    expect(McpConfig.parse("mcp.json", text)).toEqual(Either.right([{ type: "stdio", name: "a", command: "x" }]))
  })

  it("empty, not an object, no mcpServers, mcpServers not an object", () => {
    expect(problems("  \n")).toEqual(["mcp.json: the file is empty (expected a JSON object with \"mcpServers\")"])
    expect(problems([1])).toEqual(["mcp.json: expected a JSON object with \"mcpServers\", got an array"])
    expect(problems({ servers: { a: { command: "a" } } })).toEqual([
      "mcp.json: mcpServers: missing (the file needs a top-level \"mcpServers\" object: server names to their entries)"
    ])
    expect(problems({ mcpServers: [{ command: "a" }] })).toEqual([
      "mcp.json: mcpServers: expected an object (server names to their entries), got an array"
    ])
  })
})

describe("McpConfig.read", () => {
  it.effect("a file: its servers; missing, a directory, not JSON: one line naming the file as given", () =>
    Effect.gen(function*() {
      const dir = tmpDir()
      const file = Path.join(dir, "mcp.json")
      Fs.writeFileSync(file, JSON.stringify({ mcpServers: { a: { command: "a", cwd: "sub" } } }))
      expect(yield* McpConfig.read(file)).toEqual([{ type: "stdio", name: "a", command: "a", cwd: Path.join(dir, "sub") }])
      const message = (path: string) => Effect.map(Effect.flip(McpConfig.read(path)), (e) => e.message)
      expect(yield* message(Path.join(dir, "nope.json"))).toBe(`${Path.join(dir, "nope.json")}: cannot read: no such file`)
      expect(yield* message(dir)).toBe(`${dir}: cannot read: not a regular file (a directory)`)
      Fs.writeFileSync(file, "{")
      expect(yield* message(file)).toBe(`${file}: not JSON: line 1, column 2: the file ends before the JSON does`)
    }).pipe(Effect.provide(NodeContext.layer)))
})
