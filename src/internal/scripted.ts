/**
 * The pieces of a scripted response's playback that the scripted model and the offline model
 * share: how a text is split into deltas, and a plain chain of effects.
 */
import { Effect } from "effect"
import type { ModelError } from "../Model.js"

/** A text as its deltas: each word with the whitespace before it (the whole text if it has none). */
export const splitWords = (text: string): ReadonlyArray<string> => {
  const parts = text.match(/\s*\S+|\s+$/g)
  return parts === null || parts.length === 0 ? [text] : parts
}

/** Runs effects one after another (a plain chain: `Effect.all` costs several µs per call). */
export const sequence = (steps: ReadonlyArray<Effect.Effect<void, ModelError>>): Effect.Effect<void, ModelError> => {
  let effect: Effect.Effect<void, ModelError> = Effect.void
  for (let i = steps.length - 1; i >= 0; i--) effect = i === steps.length - 1 ? steps[i]! : Effect.zipRight(steps[i]!, effect)
  return effect
}
