/** What the numbers were measured on: the machine, Node, and PostgreSQL's settings. */
import { cpus, loadavg, release, totalmem } from "node:os";
import type { Sql } from "postgres";

export interface MachineInfo {
  cpus: number;
  cpuModel: string;
  memoryGiB: number;
  kernel: string;
  node: string;
  loadAverageAtStart: number[];
  postgres: { version: string; settings: Record<string, string> };
}

/** Server settings that decide commit and write cost. */
const PG_SETTINGS = [
  "synchronous_commit",
  "fsync",
  "wal_sync_method",
  "full_page_writes",
  "commit_delay",
  "wal_level",
  "shared_buffers",
  "max_connections",
  "autovacuum",
  "autovacuum_naptime",
  "max_wal_size",
  "checkpoint_timeout",
];

export async function describeMachine(sql: Sql): Promise<MachineInfo> {
  const [v] = await sql<{ version: string }[]>`select version()`;
  const rows = await sql<{ name: string; setting: string; unit: string | null }[]>`
    select name, setting, unit from pg_settings where name = any(${PG_SETTINGS})`;
  const settings: Record<string, string> = {};
  for (const r of rows) settings[r.name] = r.unit ? `${r.setting} (${r.unit})` : r.setting;
  const list = cpus();
  return {
    cpus: list.length,
    cpuModel: list[0]?.model ?? "unknown",
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    kernel: release(),
    node: process.version,
    loadAverageAtStart: loadavg().map((l) => Math.round(l * 100) / 100),
    postgres: { version: v!.version, settings },
  };
}
