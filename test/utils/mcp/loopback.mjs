// Preloaded (`node --import`) into an HTTP server a test starts, so that it listens on loopback
// only: a `listen(port)` without a host (Express's `app.listen(PORT)`) gets 127.0.0.1.
import net from "node:net"

const listen = net.Server.prototype.listen
net.Server.prototype.listen = function(...args) {
  const port = args[0]
  if ((typeof port === "number" || (typeof port === "string" && /^\d+$/.test(port))) && typeof args[1] !== "string") {
    args.splice(1, 0, "127.0.0.1")
  }
  return listen.apply(this, args)
}
