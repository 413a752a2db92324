/**
 * Test helpers for file-backed tests: a scoped temporary directory and the path of the shared
 * DSH fixtures (read in place, never copied).
 */
import { FileSystem } from "@effect/platform"
import { Effect, type Scope } from "effect"
import * as path from "node:path"

/** `../shared/fixtures/dsh` relative to the repository root (the test's working directory). */
export const dshFixturesDir: string = path.resolve(process.cwd(), "../shared/fixtures/dsh")

/** A fresh temporary directory, removed when the scope closes. */
export const tmpDir: Effect.Effect<string, never, FileSystem.FileSystem | Scope.Scope> = Effect.orDie(
  Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped({ prefix: "effect-agent-loop-" }))
)
