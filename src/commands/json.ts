/** A command as the API and the notifications show it: one shape, built from the row in one place. */
import { isoOrNull } from "../domain/iso-time.ts";
import { COMMAND_KINDS, COMMAND_STATES } from "./store.ts";
import type { CommandKind, CommandSummary } from "./store.ts";

export interface CommandJson {
  id: string;
  kind: CommandKind;
  state: (typeof COMMAND_STATES)[number];
  attempts: number;
  last_error: string | null;
  created_at: string;
  completed_at: string | null;
}

const isKind = (k: string): k is CommandKind => (COMMAND_KINDS as readonly string[]).includes(k);
const isState = (s: string): s is CommandJson["state"] => (COMMAND_STATES as readonly string[]).includes(s);

export function commandJson(r: CommandSummary): CommandJson {
  if (!isKind(r.kind) || !isState(r.state)) throw new Error(`command ${r.id} has kind ${r.kind} and state ${r.state}, which the schema's checks forbid`);
  return {
    id: String(r.id),
    kind: r.kind,
    state: r.state,
    attempts: r.attempts,
    last_error: r.last_error,
    created_at: r.created_at.toISOString(),
    completed_at: isoOrNull(r.completed_at),
  };
}
