/** Instants as tracklane writes them in JSON: ISO 8601 in UTC, null for none. */

/** `2025-06-01T12:00:00.000Z`, or null when there is no instant. */
export function isoOrNull(at: Date | null | undefined): string | null {
  return at ? at.toISOString() : null;
}
