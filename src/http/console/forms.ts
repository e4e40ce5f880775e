/** What the console's pages share for reading forms and query strings with zod. */
import type { z } from "zod";

/** An empty or blank field is an absent one (a form posts every field, filled or not). */
export const blankToUndefined = (v: unknown) => (typeof v === "string" && v.trim() === "" ? undefined : v);

/** A zod refusal as a sentence per field: "count: must be at least 1; mode: …". */
export function problemOf(error: z.ZodError, where = "form"): string {
  return error.issues.map((i) => `${i.path.join(".") || where}: ${i.message}`).join("; ");
}

/** The field a refusal is about first (its first issue's), for the form to mark; none for the form as a whole. */
export function fieldOf(error: z.ZodError): string | undefined {
  const key = error.issues[0]?.path[0];
  return typeof key === "string" ? key : undefined;
}
