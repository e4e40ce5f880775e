/**
 * What the core refuses, free of any transport: features throw a DomainError with the
 * kind of refusal, and the HTTP layer alone (src/http/errors.ts) decides the status and
 * the code each kind becomes.
 */
export type DomainErrorKind =
  /** No order with that id. */
  | "order_not_found"
  /** No command with that id. */
  | "command_not_found"
  /** Not allowed in the order's (or command's) current state. */
  | "conflict"
  /** An edit once the rider has picked the order up. */
  | "order_picked_up"
  /** No notification endpoint with that id. */
  | "notification_endpoint_not_found"
  /** A notification endpoint URL tracklane will not send to (a private address, …); the message says why. */
  | "endpoint_url_forbidden";

export class DomainError extends Error {
  override readonly name = "DomainError";
  readonly kind: DomainErrorKind;
  constructor(kind: DomainErrorKind, message: string) {
    super(message);
    this.kind = kind;
  }
}
