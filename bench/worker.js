// One measurement job in its own process (started by bench/run.js with --expose-gc): a warm-up,
// then the runs; prints `RESULT <json>` as its last stdout line. A separate process per job keeps
// the runtimes, heaps and peak RSS figures apart.
const job = JSON.parse(process.argv[2])

const sides = {
  ours: () => import("./ours.js"),
  pi: () => import("./pi.js")
}

const run = async () => {
  switch (job.kind) {
    case "prompts": {
      const side = await sides[job.side]()
      const spec = { workload: job.workload, store: job.store, fsync: job.fsync, url: job.url, tracer: job.tracer }
      for (let i = 0; i < (job.warmupRuns ?? 1); i++) {
        if (job.warmup > 0) await side.runPrompts({ ...spec, prompts: job.warmup })
      }
      const samples = []
      for (let i = 0; i < job.runs; i++) samples.push(await side.runPrompts({ ...spec, prompts: job.prompts }))
      return { samples }
    }
    case "idle": {
      const side = await sides[job.side]()
      await side.runIdle({ count: job.count }) // warm-up
      const samples = []
      for (let i = 0; i < job.runs; i++) samples.push(await side.runIdle({ count: job.count }))
      return { samples }
    }
    case "append": {
      const { runAppend } = await import("./append.js")
      const spec = { appenders: job.appenders, fsync: job.fsync, store: job.store, url: job.url }
      await runAppend({ ...spec, total: job.warmupTotal, run: 0 })
      const ours = []
      const peer = []
      for (let i = 0; i < job.runs; i++) {
        const r = await runAppend({ ...spec, total: job.total, run: i + 1 })
        ours.push(r.ours)
        peer.push(r.peer)
      }
      return { ours, peer }
    }
    case "streaming": {
      const { runStreaming } = await import("./stream.js")
      return await runStreaming(job)
    }
    case "concurrent": {
      const { runConcurrent } = await import("./stream.js")
      return await runConcurrent(job)
    }
    case "sessions-append": {
      const { runSessionsAppend } = await import("./append.js")
      const spec = { sessions: job.sessions, fsync: job.fsync }
      await runSessionsAppend({ ...spec, total: job.warmupTotal })
      const ours = []
      const peer = []
      for (let i = 0; i < job.runs; i++) {
        const r = await runSessionsAppend({ ...spec, total: job.total })
        ours.push(r.ours)
        peer.push(r.peer)
      }
      return { ours, peer }
    }
    case "replay-gen": {
      const { generateLog, validateLog } = await import("./replay.js")
      const out = {}
      for (const [name, { path, target }] of Object.entries(job.logs)) {
        const meta = await generateLog(path, target)
        const validated = await validateLog(path)
        if (validated !== meta.events) throw new Error(`replay: ${validated} events decoded, ${meta.events} generated`)
        out[name] = meta
      }
      return out
    }
    case "replay": {
      const replay = await import("./replay.js")
      const once = job.side === "ours" ? replay.replayOurs : replay.replayRaw
      await once(job.warm.path, job.warm.expect) // warm-up on the small log
      replay.warmPageCache(job.path) // both sides read from the page cache, not the disk
      const ms = await once(job.path, job.expect)
      return { ms, rssMB: process.resourceUsage().maxRSS / 1024 }
    }
    default:
      throw new Error(`unknown job kind ${job.kind}`)
  }
}

try {
  const result = await run()
  process.stdout.write(`RESULT ${JSON.stringify(result)}\n`)
} catch (error) {
  process.stderr.write(`${error instanceof Error ? error.stack ?? error.message : String(error)}\n`)
  process.exit(1)
}
