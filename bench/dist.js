// Which build of our library a bench job measures: `dist/` of this checkout, or with the
// environment variable BENCH_DIST (set by `bench/run.js --baseline=DIR`) the `dist/` of another
// checkout, so that a refactor's before and after run in the same bench run. The few entry points
// that moved between versions are looked up in both places.
import { pathToFileURL } from "node:url"

const dir = process.env.BENCH_DIST ?? new URL("../dist/", import.meta.url).pathname
const url = (file) => pathToFileURL(`${dir.replace(/\/?$/, "/")}${file}`).href

const lib = await import(url("index.js"))
const optional = async (file) => {
  try {
    return await import(url(file))
  } catch {
    return undefined
  }
}
const sql = await optional("SqlSessionStore.js")
const oldFate = lib.Inbox.replay === undefined ? await optional("internal/fate.js") : undefined

export const { Agent, Delivery, History, IdGenerator, Invariant, Model, OpenAICompat, SessionStore, Tool } = lib
/** `Compaction` (§17; undefined in builds before it). */
export const Compaction = lib.Compaction
/** `SqlSessionStore.layerSqlite` (before the store split: `SessionStore.layerSqlite`). */
export const layerSqlite = sql?.layerSqlite ?? lib.SessionStore.layerSqlite
/** `SqlSessionStore.layerPg` and `SqlSessionStore.make` (undefined in builds without them). */
export const layerPg = sql?.layerPg
export const makeSqlStore = sql?.make
/** `Inbox.replay` (before: `internal/fate.js` `replayInbox`). */
/** `ScriptedModel.make` (before the model split: `Model.scripted`). */
export const ScriptedModel = lib.ScriptedModel ?? { make: lib.Model.scripted }
export const replayInbox = lib.Inbox.replay ?? oldFate.replayInbox
/** The build measured: `dist` of this checkout, or the baseline's path. */
export const distLabel = process.env.BENCH_DIST === undefined ? "dist" : process.env.BENCH_DIST
