/**
 * Canonical statuses, the provider strings that map to each, and their ranks
 * (PRODUCT.md §5). Status only moves to an equal or higher rank; rank 5 is terminal.
 */
export const CANONICAL_STATUSES = [
  "CREATED",
  "ACCEPTED",
  "ALLOTTED",
  "ARRIVED",
  "COLLECTED",
  "CUSTOMER_DOOR_STEP",
  "DELIVERED",
  "CANCELLED",
  "CANCELLED_BY_CUSTOMER",
  "RETURNED_TO_SELLER",
] as const;

export type CanonicalStatus = (typeof CANONICAL_STATUSES)[number];

export const STATUS_RANK: Record<CanonicalStatus, number> = {
  CREATED: 0,
  ACCEPTED: 1,
  ALLOTTED: 1,
  ARRIVED: 2,
  COLLECTED: 3,
  CUSTOMER_DOOR_STEP: 4,
  DELIVERED: 5,
  CANCELLED: 5,
  CANCELLED_BY_CUSTOMER: 5,
  RETURNED_TO_SELLER: 5,
};

export const TERMINAL_RANK = 5;

export const TERMINAL_STATUSES: readonly CanonicalStatus[] = CANONICAL_STATUSES.filter((s) => STATUS_RANK[s] === TERMINAL_RANK);

/**
 * Provider strings, upper-cased. Matching ignores case and surrounding space, so
 * `Cancelled` and `CANCELLED` (both seen in the provider's documents) are one status.
 */
const PROVIDER_TO_CANONICAL: Record<string, CanonicalStatus> = {
  CREATED: "CREATED",
  PENDING: "CREATED",
  ACCEPTED: "ACCEPTED",
  ALLOTTED: "ALLOTTED",
  ALLOTED: "ALLOTTED",
  ARRIVED: "ARRIVED",
  COLLECTED: "COLLECTED",
  DISPATCHED: "COLLECTED",
  CUSTOMER_DOOR_STEP: "CUSTOMER_DOOR_STEP",
  ARRIVED_CUSTOMER_DOORSTEP: "CUSTOMER_DOOR_STEP",
  DELIVERED: "DELIVERED",
  CANCELLED: "CANCELLED",
  CANCELLED_BY_SELLER: "CANCELLED",
  CANCELLED_BY_CUSTOMER: "CANCELLED_BY_CUSTOMER",
  RTS_INITIATED: "RETURNED_TO_SELLER",
  RTS_COMPLETED: "RETURNED_TO_SELLER",
  RETURNED_TO_SELLER: "RETURNED_TO_SELLER",
};

/** The canonical status for a provider string, or null when it is unknown. */
export function canonicalStatus(providerStatus: string | null | undefined): CanonicalStatus | null {
  if (providerStatus == null) return null;
  // ASCII-only upper-casing: toUpperCase() would turn "DELıVERED" (dotless i) into DELIVERED.
  const key = providerStatus.trim().replace(/[a-z]/g, (ch) => ch.toUpperCase());
  return Object.hasOwn(PROVIDER_TO_CANONICAL, key) ? PROVIDER_TO_CANONICAL[key]! : null;
}

export function isTerminal(status: CanonicalStatus): boolean {
  return STATUS_RANK[status] === TERMINAL_RANK;
}

/** The step-time field that real payloads use for each status (see normalise.ts). */
export const STEP_TIME_FIELD: Record<CanonicalStatus, string | null> = {
  CREATED: null,
  ACCEPTED: "allot_time",
  ALLOTTED: "allot_time",
  ARRIVED: "arrival_time",
  COLLECTED: "dispatch_time",
  CUSTOMER_DOOR_STEP: "customer_doorstep_arrival_time",
  DELIVERED: "delivery_time",
  CANCELLED: "cancel_time",
  CANCELLED_BY_CUSTOMER: "cancel_time",
  RETURNED_TO_SELLER: "return_time",
};
