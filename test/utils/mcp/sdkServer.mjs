// An MCP server written with the SDK's server package, on stdio, for the MCP tests
// (test/Mcp.test.ts, test/McpFaults.test.ts). It appends what happens to it to LOG, one line
// each: `pid N` when it starts, `call NAME` when a call starts, `cancelled NAME` when a call's
// request is cancelled (`notifications/cancelled`, its signal aborted).
//   node sdkServer.mjs LOG
// Tools: `echo` ({text}: "echo: TEXT"); `wait` (answers only when its request is cancelled);
// `add-tool` ({name}: registers a tool NAME that answers "NAME ran", so that the server sends
// notifications/tools/list_changed, and answers "added NAME").
import { McpServer } from "@modelcontextprotocol/server"
import { StdioServerTransport } from "@modelcontextprotocol/server/stdio"
import { appendFileSync } from "node:fs"
import { z } from "zod"

const [log] = process.argv.slice(2)
const record = (line) => appendFileSync(log, `${line}\n`)
record(`pid ${process.pid}`)

const server = new McpServer({ name: "own", version: "1.2.3" }, { capabilities: { tools: { listChanged: true } } })

server.registerTool("echo", { description: "echoes", inputSchema: z.object({ text: z.string() }) }, async ({ text }) => {
  record("call echo")
  return { content: [{ type: "text", text: `echo: ${text}` }] }
})

server.registerTool("wait", { description: "waits until cancelled", inputSchema: z.object({}) }, (_args, ctx) => {
  record("call wait")
  return new Promise((resolve) => {
    ctx.mcpReq.signal.addEventListener("abort", () => {
      record("cancelled wait")
      resolve({ content: [{ type: "text", text: "cancelled" }] })
    }, { once: true })
  })
})

server.registerTool(
  "add-tool",
  { description: "adds a tool", inputSchema: z.object({ name: z.string() }) },
  async ({ name }) => {
    record("call add-tool")
    server.registerTool(name, { description: `added ${name}`, inputSchema: z.object({}) }, async () => ({
      content: [{ type: "text", text: `${name} ran` }]
    }))
    return { content: [{ type: "text", text: `added ${name}` }] }
  }
)

await server.connect(new StdioServerTransport())
