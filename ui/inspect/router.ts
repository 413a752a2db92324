/**
 * The page's routes, in the URL's hash so the server needs none: `#/` the sessions list,
 * `#/s/ID` a session, `#/s/ID/m/MID` a session with a message's story open, `#/s/ID/r/T/S` a
 * session with the model request of turn T step S open.
 */

/** A parsed route. */
export type Route =
  | { readonly view: "list" }
  | { readonly view: "session"; readonly id: string; readonly panel?: Panel | undefined }

/** The panel a session route opens. */
export type Panel =
  | { readonly kind: "story"; readonly message: string }
  | { readonly kind: "request"; readonly turn: number; readonly step: number }

const decode = (s: string): string | undefined => {
  try {
    return decodeURIComponent(s)
  } catch {
    return undefined
  }
}

/** The route of a hash (`location.hash`); anything unknown is the list. */
export const parse = (hash: string): Route => {
  const parts = hash.replace(/^#\/?/, "").split("/")
  if (parts[0] !== "s" || parts[1] === undefined || parts[1] === "") return { view: "list" }
  const id = decode(parts[1])
  if (id === undefined) return { view: "list" }
  if (parts[2] === "m" && parts[3] !== undefined) {
    const message = decode(parts[3])
    if (message !== undefined) return { view: "session", id, panel: { kind: "story", message } }
  }
  if (parts[2] === "r" && parts[3] !== undefined && parts[4] !== undefined) {
    const turn = Number(parts[3])
    const step = Number(parts[4])
    if (Number.isInteger(turn) && Number.isInteger(step)) return { view: "session", id, panel: { kind: "request", turn, step } }
  }
  return { view: "session", id }
}

/** The hash of a session route. */
export const sessionHash = (id: string, panel?: Panel): `#/${string}` => {
  const base = `#/s/${encodeURIComponent(id)}` as const
  if (panel === undefined) return base
  return panel.kind === "story"
    ? `${base}/m/${encodeURIComponent(panel.message)}`
    : `${base}/r/${panel.turn}/${panel.step}`
}
