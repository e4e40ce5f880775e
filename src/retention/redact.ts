/**
 * Personal data out of finished orders, PII_RETENTION_DAYS after they finished: the
 * customer's details in their commands (requests, the provider's answers and error texts,
 * and the placement error on the order), the rider's name and contact in their events
 * (the log's one allowed change), then the order projected again from the redacted log,
 * so its row and its stored state hold "[redacted]" too. One transaction per order: an
 * order is redacted entirely or not at all, and marked so it is not taken again.
 */
import type { Sql } from "postgres";
import { isDatabaseUnavailable } from "../db/client.ts";
import { commandsForRedaction, writeRedactedCommands } from "../commands/store.ts";
import { customerValues, redactCommandData, redactEventPayload, redactText } from "../domain/redact.ts";
import { redactOrderEvents } from "../events/log.ts";
import { ordersDueForRedaction } from "../orders/read.ts";
import { fillFinishedAt, lockOrder, markRedacted, redactPlacementError } from "../orders/store.ts";
import { identitiesOfRow, lockOrderIds, projectOrdersIn } from "../projection/project.ts";

const PAGE = 100;
/** Rows per statement filling in finished_at of orders that finished before it existed. */
const FILL_BATCH = 5_000;

export interface Redacted {
  orders: number;
  events: number;
  commands: number;
}

/** An order the run could not redact (its transaction rolled back), and why. */
export interface RedactionFailure {
  orderId: number;
  error: unknown;
}

/**
 * Redacts every order due. One order that cannot be redacted (a bug, data nobody foresaw)
 * holds up no other: its transaction rolls back, it is passed over for the rest of the run
 * and reported in `failed`, and the next run tries it again. An unreachable database ends
 * the run at once. Once `stopping` aborts (the worker is stopping), no order is begun: the
 * next run redacts the rest.
 */
export async function redactDue(sql: Sql, piiDays: number, now = new Date(), stopping?: AbortSignal): Promise<Redacted & { failed: RedactionFailure[] }> {
  const done: Redacted = { orders: 0, events: 0, commands: 0 };
  const failed: RedactionFailure[] = [];
  if (piiDays <= 0) return { ...done, failed };
  const before = new Date(now.getTime() - piiDays * 86_400_000);
  // Orders that finished before finished_at existed (migration 0017) get it first: once,
  // on the first run after the upgrade; on any other run this finds none at once.
  const stopped = () => stopping?.aborted === true;
  while (!stopped() && (await fillFinishedAt(sql, FILL_BATCH)) > 0);
  for (;;) {
    if (stopped()) return { ...done, failed };
    const due = await ordersDueForRedaction(sql, before, PAGE, failed.map((f) => f.orderId));
    for (const order of due) {
      if (stopped()) return { ...done, failed };
      try {
        const counts = await sql.begin(async (tx) => {
          const identities = identitiesOfRow(order);
          const svcOrderIds = identities.flatMap((i) => (i.svcOrderId === null ? [] : [i.svcOrderId]));
          const ids = { svcOrderIds, clientOrderId: order.client_order_id };
          // The projection's locks on the order's ids before its row (below), as a
          // projection takes them: the other way round, a projection of the order holding
          // them and waiting for the row would deadlock with this.
          await lockOrderIds(tx, identities);
          let events = await redactOrderEvents(tx, ids, redactEventPayload);
          // The order before its commands, as a command's end locks them: no deadlock with it.
          await lockOrder(tx, order.id);
          // The customer's values are read from the requests before any is redacted: they
          // are what is looked for in the answers and error texts.
          const stored = await commandsForRedaction(tx, order.id);
          const values = customerValues(stored.map((c) => c.request));
          const commands = await writeRedactedCommands(tx, redactCommandData(stored, values));
          await redactPlacementError(tx, order.id, (error) => redactText(error, values));
          // A callback stored after the events were read may be folded (and claimed) by the
          // projection: its payload is redacted and the order projected again, until a look
          // after the projection finds nothing. One stored after that is left queued, and
          // its projection makes the order due again.
          for (;;) {
            await projectOrdersIn(tx, identities, { redacting: true });
            const more = await redactOrderEvents(tx, ids, redactEventPayload);
            if (more === 0) break;
            events += more;
          }
          await markRedacted(tx, order.id);
          return { events, commands };
        });
        done.events += counts.events;
        done.commands += counts.commands;
        done.orders++;
      } catch (error) {
        if (isDatabaseUnavailable(error)) throw error;
        failed.push({ orderId: order.id, error });
      }
    }
    if (due.length < PAGE) return { ...done, failed };
  }
}
