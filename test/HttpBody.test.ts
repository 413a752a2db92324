/**
 * Which responses `readBody` reads from their Node.js stream directly (`nodeBodyOf`, §24):
 * the undici and `node:http` clients of @effect/platform-node, whose internals it reads (pinned
 * versions); any other client (fetch) falls back to the response's Effect stream. Both paths give
 * the same bytes. Should an upgrade move those internals, the first test fails instead of the
 * direct path silently turning into the fallback.
 */
import { FetchHttpClient, HttpClient, HttpClientRequest } from "@effect/platform"
import { NodeHttpClient } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, type Layer } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { errorText, nodeBodyOf, readText } from "../src/providers/internal/http.js"

const body = "data: " + "x".repeat(40_000) + "\n\n"

const withServer = <A, E, R>(f: (url: string) => Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.async<Http.Server>((resume) => {
      const server = Http.createServer((_req, res) => {
        res.writeHead(200, { "content-type": "text/event-stream" })
        res.write(body.slice(0, 10_000))
        setImmediate(() => res.end(body.slice(10_000)))
      })
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
    }),
    (server) => f(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`),
    (server) => Effect.async<void>((resume) => void server.close(() => resume(Effect.void)))
  )

const read = (layer: Layer.Layer<HttpClient.HttpClient>) =>
  withServer((url) =>
    Effect.gen(function*() {
      const client = yield* HttpClient.HttpClient
      const response = yield* client.execute(HttpClientRequest.get(url))
      const direct = nodeBodyOf(response) !== undefined
      const text = yield* readText(response, { provider: "test", url, idleTimeoutMs: 5_000, maxBytes: 1_000_000 }, "reading")
      return { direct, length: text.length, same: text === body }
    }).pipe(Effect.scoped, Effect.provide(layer))
  )

describe("readBody's direct path (§24)", () => {
  it.live("undici and node:http responses are read from their Node.js stream; fetch's by its Effect stream; the same bytes", () =>
    Effect.gen(function*() {
      expect(yield* read(NodeHttpClient.layerUndici)).toEqual({ direct: true, length: body.length, same: true })
      expect(yield* read(NodeHttpClient.layer)).toEqual({ direct: true, length: body.length, same: true })
      expect(yield* read(FetchHttpClient.layer)).toEqual({ direct: false, length: body.length, same: true })
    }))
})

describe("errorText: an error body as a message", () => {
  it("an HTML page is its text: no tags, scripts, styles or comments, entities decoded, whitespace collapsed", () => {
    expect(
      errorText("<html><body><!-- <p>hidden</p> --><p>Service&nbsp;Unavailable &#8211; &#x41;&lt;b&gt;</p></body></html>", 503)
    )
      .toBe("Service Unavailable – A<b>")
    // Cut inside a tag (the body is read up to 64 KiB): the partial tag is dropped too.
    expect(errorText("<!doctype html><title>Gateway Timeout</title><div class=\"x", 504)).toBe("Gateway Timeout")
    expect(errorText("<html><head><style>p{}</style></head><body>\n</body></html>", 502)).toBe(
      "HTTP 502 (an HTML page without text)"
    )
    expect(errorText(`<html>${"x".repeat(300)}</html>`, 500)).toBe("x".repeat(200) + "…")
  })

  it("a plain-text or JSON body is kept as it is (trimmed, up to 1,000 characters); an empty one is HTTP <status>", () => {
    expect(errorText("  a <b> is not HTML here\n", 400)).toBe("a <b> is not HTML here")
    expect(errorText("y".repeat(1200), 400)).toBe("y".repeat(1000) + "…")
    expect(errorText(" \n", 418)).toBe("HTTP 418")
  })
})
