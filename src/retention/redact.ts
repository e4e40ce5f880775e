/**
 * Personal data out of finished orders, PII_RETENTION_DAYS after they finished: the
 * customer's details in their commands, the rider's name and contact in their events
 * (the log's one allowed change), then the order projected again from the redacted log,
 * so its row and its stored state hold "[redacted]" too. One transaction per order: an
 * order is redacted entirely or not at all, and marked so it is not taken again.
 */
import type { Sql } from "postgres";
import { redactCommands } from "../commands/store.ts";
import { redactCommandRequest, redactEventPayload } from "../domain/redact.ts";
import { redactOrderEvents } from "../events/log.ts";
import { ordersDueForRedaction } from "../orders/read.ts";
import { markRedacted } from "../orders/store.ts";
import { identitiesOfRow, projectOrdersIn } from "../projection/project.ts";

const PAGE = 100;

export interface Redacted {
  orders: number;
  events: number;
  commands: number;
}

export async function redactDue(sql: Sql, piiDays: number, now = new Date()): Promise<Redacted> {
  const done: Redacted = { orders: 0, events: 0, commands: 0 };
  if (piiDays <= 0) return done;
  const before = new Date(now.getTime() - piiDays * 86_400_000);
  for (;;) {
    const due = await ordersDueForRedaction(sql, before, PAGE);
    for (const order of due) {
      await sql.begin(async (tx) => {
        const identities = identitiesOfRow(order);
        const svcOrderIds = identities.flatMap((i) => (i.svcOrderId === null ? [] : [i.svcOrderId]));
        done.events += await redactOrderEvents(tx, { svcOrderIds, clientOrderId: order.client_order_id }, redactEventPayload);
        done.commands += await redactCommands(tx, order.id, redactCommandRequest);
        await projectOrdersIn(tx, identities, { redacting: true });
        await markRedacted(tx, order.id);
      });
      done.orders++;
    }
    if (due.length < PAGE) return done;
  }
}
