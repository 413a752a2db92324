/**
 * The page of `agent-loop inspect`: a bar with the store being inspected, and the view of the
 * route in the URL's hash (`router.ts`): the sessions list or a session. Moving between panels of
 * the same session keeps its view (scroll position, cached rows, live stream).
 */
import type { StoreInfo } from "../../src/cli/inspect/api.js"
import { errorText, getJson } from "./api.js"
import { h, replace } from "./dom.js"
import { listView } from "./list.js"
import { parse } from "./router.js"
import { type SessionHandle, sessionView } from "./session.js"

const store = h("span", { class: "store" })
const app = h("main", { class: "app" })
document.body.replaceChildren(
  h("div", { class: "topbar" }, h("a", { href: "#/", class: "brand" }, "agent-loop inspect"), store),
  app
)

getJson<StoreInfo>("/api/store").then(
  (info) =>
    replace(
      store,
      `${info.kind} · ${info.where}${info.readOnly ? " · read-only" : ""}${info.prices ? " · priced" : ""} · v${info.version}`
    ),
  (error: unknown) => replace(store, h("span", { class: "error" }, errorText(error)))
)

let leave: (() => void) | undefined
let session: SessionHandle | undefined

const show = () => {
  const route = parse(location.hash)
  if (route.view === "session" && session?.id === route.id) {
    session.open(route.panel)
    return
  }
  leave?.()
  session = undefined
  if (route.view === "list") {
    document.title = "sessions · agent-loop inspect"
    leave = listView(app)
  } else {
    session = sessionView(app, route.id, route.panel)
    leave = session.close
  }
}

window.addEventListener("hashchange", show)
show()
