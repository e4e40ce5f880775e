/** Keyset pages: a query asks for one row more than the page, which tells whether another page exists. */
export function pageOf<T extends { id: number }>(rows: T[], limit: number): { rows: T[]; nextId: number | null } {
  if (rows.length <= limit) return { rows, nextId: null };
  const page = rows.slice(0, limit);
  return { rows: page, nextId: page[page.length - 1]!.id };
}
