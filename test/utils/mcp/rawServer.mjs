// A stdio MCP server written as raw JSON-RPC lines, for the fault tests (test/McpFaults.test.ts):
// it misbehaves in the way MODE says. Every line it reads is appended to LOG (when given), and its
// pid is the log's first line, so that a test sees what the client sent.
//   node rawServer.mjs MODE [LOG]
// MODE: exit-before-init (prints a reason on stderr and exits 3), init-error (answers
// initialize with a JSON-RPC error), malformed-init (answers initialize with a message that is
// not JSON-RPC: a response with neither result nor error), never-init (never answers); the
// others initialize and list the tool `wait`, whose calls they answer as follows: never-answer
// (never), malformed (with a message that is not JSON-RPC), bad-result (with a result whose
// `content` is not an array), late (with a text "late", 300 ms after the call came).
import { appendFileSync } from "node:fs"
import { createInterface } from "node:readline"

const [mode, log] = process.argv.slice(2)
const record = (line) => {
  if (log !== undefined) appendFileSync(log, `${line}\n`)
}
record(`pid ${process.pid}`)

if (mode === "exit-before-init") {
  process.stderr.write("fatal: no configuration found\n")
  process.exit(3)
}

const send = (message) => process.stdout.write(`${JSON.stringify(message)}\n`)

createInterface({ input: process.stdin }).on("line", (line) => {
  record(line)
  let message
  try {
    message = JSON.parse(line)
  } catch {
    return
  }
  if (message.id === undefined || message.method === undefined) return
  switch (message.method) {
    case "initialize":
      if (mode === "never-init") return
      if (mode === "malformed-init") return send({ jsonrpc: "2.0", id: message.id })
      if (mode === "init-error") {
        return send({ jsonrpc: "2.0", id: message.id, error: { code: -32602, message: "this server speaks to nobody" } })
      }
      return send({
        jsonrpc: "2.0",
        id: message.id,
        result: {
          protocolVersion: message.params.protocolVersion,
          capabilities: { tools: {} },
          serverInfo: { name: "raw", version: "1.0.0" }
        }
      })
    case "tools/list":
      return send({
        jsonrpc: "2.0",
        id: message.id,
        result: { tools: [{ name: "wait", description: "waits", inputSchema: { type: "object", properties: {} } }] }
      })
    case "tools/call":
      if (mode === "malformed") return send({ jsonrpc: "2.0", id: message.id })
      if (mode === "bad-result") return send({ jsonrpc: "2.0", id: message.id, result: { content: "nope" } })
      if (mode === "late") {
        setTimeout(() => send({ jsonrpc: "2.0", id: message.id, result: { content: [{ type: "text", text: "late" }] } }), 300)
      }
      return
    default:
      return send({ jsonrpc: "2.0", id: message.id, error: { code: -32601, message: "Method not found" } })
  }
})
