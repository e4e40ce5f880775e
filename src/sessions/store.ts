/**
 * Console sessions: the one owner of console_sessions. The browser holds a random token;
 * the table holds its HMAC-SHA256 keyed with the API token the session was signed in with,
 * so a copy of the database signs nobody in, and a new API_TOKEN ends every session made
 * with the old one (signing in is proving the API token: changing it is how access is
 * taken back). A session ends at its expiry or when it signs out.
 */
import { createHmac, randomBytes } from "node:crypto";
import type { Tx } from "../db/client.ts";

export interface Session {
  /** Hex HMAC-SHA256 of the token (keyed with the API token). */
  id: string;
  csrfToken: string;
}

const hashOf = (token: string, key: string) => createHmac("sha256", key).update(token, "utf8").digest("hex");
const newToken = () => randomBytes(32).toString("base64url");

/**
 * A new session lasting `ttlMs`, signed in with the API token `key`: its token, which goes
 * in the cookie and nowhere else. Expired sessions are removed on the way.
 */
export async function startSession(sql: Tx, ttlMs: number, key: string): Promise<string> {
  const token = newToken();
  const csrfToken = newToken();
  const id = hashOf(token, key);
  await sql`delete from console_sessions where expires_at <= now()`;
  await sql`
    insert into console_sessions (id, csrf_token, expires_at)
    values (${id}, ${csrfToken}, now() + ${ttlMs}::int8 * interval '1 millisecond')`;
  return token;
}

/** The live session of this cookie token, if any, made with the API token `key`. */
export async function findSession(sql: Tx, token: string, key: string): Promise<Session | undefined> {
  const [row] = await sql<{ id: string; csrf_token: string }[]>`
    select id, csrf_token from console_sessions where id = ${hashOf(token, key)} and expires_at > now()`;
  return row ? { id: row.id, csrfToken: row.csrf_token } : undefined;
}

/** Signing out: the session is gone for every copy of its cookie. */
export async function endSession(sql: Tx, id: string): Promise<void> {
  await sql`delete from console_sessions where id = ${id}`;
}
