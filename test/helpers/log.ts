/** A logger made as tracklane makes its own, writing into memory. */
import { Writable } from "node:stream";
import { createLogger } from "../../src/logger.ts";
import type { Logger } from "../../src/logger.ts";

/** Runs `write` with a logger of this format and returns the lines that reached its destination. */
export async function captureLog(format: "json" | "pretty", write: (log: Logger) => void): Promise<string[]> {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(...chunk.toString("utf8").split("\n").filter(Boolean));
      done();
    },
  });
  const log = createLogger({ level: "info", format, destination: sink });
  write(log);
  log.flush();
  // pino-pretty is a stream pipeline: its line arrives a tick or two later.
  for (let i = 0; i < 100 && lines.length === 0; i++) await new Promise((r) => setTimeout(r, 5));
  return lines;
}
