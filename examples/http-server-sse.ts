/**
 * An agent per session behind an `@effect/platform` HTTP server, its live events streamed as
 * server-sent events (§5.1, §5.3):
 *
 *   POST /sessions                      201 {"id"}         a new session (JSONL store, offline model)
 *   POST /sessions/:id/followup {text}  202 {"messageId"}  one send, one turn
 *   POST /sessions/:id/steer {text}     202 {"messageId"}  joins the running turn, or starts one
 *   GET  /sessions/:id/events           text/event-stream  `agent.events`, one SSE event each
 *
 * An unknown session is 404, a body without a string `text` 400. The event stream starts with
 * the comment line `: subscribed` once it is subscribed: whatever is delivered after that line
 * is in the stream. Agents live in the scope of the `Sessions` layer: when the server stops,
 * each is disposed (a running turn ends aborted, its log stays valid), and its open streams end
 * after `agent/disposed`, the last event of a disposed agent.
 *
 * Run it (port 3000, logs in .agent-loop/sessions), then from another terminal:
 *   npm run example -- http-server-sse
 *   curl -X POST localhost:3000/sessions                     # {"id":"…"}
 *   curl -N localhost:3000/sessions/ID/events                # leave it open
 *   curl -X POST localhost:3000/sessions/ID/followup -d '{"text":"wait 5 seconds, then tell me the time"}'
 *   curl -X POST localhost:3000/sessions/ID/steer -d '{"text":"and the date"}'
 */
import { HttpRouter, HttpServer, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Context, Effect, Layer, Schema, Scope, Stream } from "effect"
import { Agent, type AgentEvent, Model, Offline, OfflineTools, type SessionLog, SessionStore } from "effect-agent-loop"
import { createServer } from "node:http"
import { fileURLToPath } from "node:url"

/** A session id that names no agent of this server. */
export class UnknownSession extends Schema.TaggedError<UnknownSession>()("UnknownSession", { id: Schema.String }) {}

/** The agents of this server, one per session, disposed when the layer closes. */
export class Sessions extends Context.Tag("examples/Sessions")<Sessions, {
  readonly create: Effect.Effect<Agent.Agent, SessionLog.SessionStoreError>
  readonly get: (id: string) => Effect.Effect<Agent.Agent, UnknownSession>
}>() {}

export const layerSessions: Layer.Layer<Sessions, never, SessionStore.SessionStore | Model.Model> = Layer.scoped(
  Sessions,
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const services = yield* Effect.context<SessionStore.SessionStore | Model.Model>()
    const agents = new Map<string, Agent.Agent>()
    return {
      // In the layer's scope, not the request's: the agent outlives the request that made it.
      create: Agent.make({ tools: [OfflineTools.wait, OfflineTools.clock] }).pipe(
        Scope.extend(scope),
        Effect.provide(services),
        Effect.tap((agent) => agents.set(agent.id, agent))
      ),
      get: (id) => {
        const agent = agents.get(id)
        return agent === undefined ? Effect.fail(new UnknownSession({ id })) : Effect.succeed(agent)
      }
    }
  })
)

const sessionOfPath = Effect.flatMap(
  HttpRouter.schemaPathParams(Schema.Struct({ id: Schema.String })),
  ({ id }) => Effect.flatMap(Sessions, (sessions) => sessions.get(id))
)

const deliver = (method: "followup" | "steer") =>
  Effect.gen(function*() {
    const agent = yield* sessionOfPath
    const { text } = yield* HttpServerRequest.schemaBodyJson(Schema.Struct({ text: Schema.String }))
    const delivery = yield* agent[method](text)
    // Returned once the delivery is durable in the session log; its fate comes later (in the stream).
    return yield* HttpServerResponse.json({ messageId: delivery.messageId }, { status: 202 })
  })

/** One SSE event per agent event: `event: <type>` and the event as JSON (one line: JSON escapes newlines). */
const sse = (event: AgentEvent.AgentEvent): string => `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`

const events = Effect.gen(function*() {
  const agent = yield* sessionOfPath
  const body = Stream.unwrapScoped(
    // Subscribes when the response body starts, before its first line; ends after `agent/disposed`.
    Effect.map(agent.subscribe, (queue) =>
      Stream.concat(
        Stream.make(": subscribed\n\n"),
        Stream.fromQueue(queue).pipe(Stream.takeUntil((e) => e.type === "agent/disposed"), Stream.map(sse))
      ))
  ).pipe(Stream.encodeText)
  return HttpServerResponse.stream(body, { contentType: "text/event-stream", headers: { "cache-control": "no-cache" } })
})

export const router = HttpRouter.empty.pipe(
  HttpRouter.post(
    "/sessions",
    Effect.flatMap(
      Effect.flatMap(Sessions, (s) => s.create),
      (agent) => HttpServerResponse.json({ id: agent.id }, { status: 201 })
    )
  ),
  HttpRouter.post("/sessions/:id/followup", deliver("followup")),
  HttpRouter.post("/sessions/:id/steer", deliver("steer")),
  HttpRouter.get("/sessions/:id/events", events),
  HttpRouter.catchTags({
    UnknownSession: (e) => HttpServerResponse.json({ error: `no session ${e.id}` }, { status: 404 }),
    ParseError: (e) => HttpServerResponse.json({ error: e.message }, { status: 400 }),
    RequestError: (e) => HttpServerResponse.json({ error: e.message }, { status: 400 })
  })
)

/** The server on `port` (0: any free port; read it from `HttpServer.HttpServer`'s `address`), sessions in `directory`. */
export const layer = (options: { readonly port: number; readonly host?: string; readonly directory: string }) =>
  HttpServer.serve(router).pipe(
    Layer.provide(layerSessions),
    Layer.provide(Layer.merge(SessionStore.layerJsonl({ directory: options.directory }), Model.layer(Offline.make()))),
    Layer.provideMerge(NodeHttpServer.layer(createServer, { port: options.port, host: options.host ?? "127.0.0.1" }))
  )

export const main = Layer.launch(HttpServer.withLogAddress(layer({ port: 3000, directory: ".agent-loop/sessions" })))

if (process.argv[1] === fileURLToPath(import.meta.url)) NodeRuntime.runMain(main)
