/** What the console's people have seen, by name: the one owner of console_marks. */
import type { Tx } from "../db/client.ts";

/**
 * rejected_seen: the newest rejected callback someone marked as seen (its id).
 * failed_seen: the completion time, in microseconds since 1970, up to which failed
 * commands were marked as seen (a command that fails again later shows again).
 */
export type MarkName = "rejected_seen" | "failed_seen";

export async function getMark(sql: Tx, name: MarkName): Promise<number> {
  const [row] = await sql<{ value: number }[]>`select value from console_marks where name = ${name}`;
  return row?.value ?? 0;
}

/** Moves the mark forward only (two tabs looking at once never move it back). */
export async function advanceMark(sql: Tx, name: MarkName, value: number): Promise<void> {
  await sql`
    insert into console_marks (name, value) values (${name}, ${value})
    on conflict (name) do update set value = greatest(console_marks.value, excluded.value), updated_at = now()`;
}
