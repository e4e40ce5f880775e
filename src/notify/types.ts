/** The kinds of outbound notification (Standard Webhooks `type`): one list for the schema's check, the API and the outbox. */
export const NOTIFICATION_TYPES = [
  "order.status_changed",
  "order.placement_changed",
  "order.rider_assigned",
  "order.rider_location",
  "command.failed",
  "awb.pool_low",
  "test.ping",
] as const;

export type NotificationType = (typeof NOTIFICATION_TYPES)[number];

export const isNotificationType = (value: string): value is NotificationType => (NOTIFICATION_TYPES as readonly string[]).includes(value);
