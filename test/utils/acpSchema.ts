/**
 * The ACP SDK's own zod schemas of a `session/update` notification and of a
 * `session/request_permission` request (`@agentclientprotocol/sdk` 2.4, ACP v1 stable), for
 * tests. The package exports no schema module, so the generated file is imported by its path.
 * Its schemas are lenient on purpose (`defaultOnError` turns a wrong optional field into
 * `undefined`, arrays skip bad items, unknown keys are stripped), so `checkNotification` and
 * `checkPermissionRequest` require the parsed value to equal the input exactly: a field of the
 * wrong shape, an unknown key or a bad item fails the test instead of vanishing.
 */
import { expect } from "@effect/vitest"
import {
  zRequestPermissionRequest,
  zSessionNotification
} from "../../node_modules/@agentclientprotocol/sdk/dist/v1/schema/zod.gen.js"

/** Fails unless `{sessionId, update}` is a `SessionNotification` exactly as the SDK parses it. */
export const checkNotification = (sessionId: string, update: unknown): void => {
  const notification = { sessionId, update }
  const parsed = zSessionNotification.safeParse(notification)
  if (!parsed.success) throw new Error(`not a SessionNotification: ${parsed.error.message}\n${JSON.stringify(update)}`)
  expect(parsed.data).toStrictEqual(notification)
}

/** Fails unless `params` is a `RequestPermissionRequest` exactly as the SDK parses it. */
export const checkPermissionRequest = (params: unknown): void => {
  const parsed = zRequestPermissionRequest.safeParse(params)
  if (!parsed.success) throw new Error(`not a RequestPermissionRequest: ${parsed.error.message}\n${JSON.stringify(params)}`)
  expect(parsed.data).toStrictEqual(params)
}
