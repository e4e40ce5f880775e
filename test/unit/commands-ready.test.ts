import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { notReady } from "../../src/commands/execute.ts";

const order = (placement_state: string, svc_order_id: string | null = null) => ({ placement_state, svc_order_id });
const KINDS = ["edit", "cancel", "stop_reattempt", "dispatch_ready"] as const;

describe("notReady: what a command needs of its order before it is sent", () => {
  it("a place needs nothing; any command goes once the provider has named the order", () => {
    for (const state of ["pending", "placed", "unconfirmed", "failed", "external"]) {
      assert.equal(notReady("place", order(state)), null, state);
      for (const kind of KINDS) assert.equal(notReady(kind, order(state, "31000001")), null, `${kind} ${state}`);
    }
  });

  it("while the place is pending, every other command waits for it (dispatch-ready too: the provider must have the order)", () => {
    for (const kind of KINDS) assert.equal(notReady(kind, order("pending"))?.type, "wait", kind);
  });

  it("after a place that ended unconfirmed or failed, they are not sent and say why", () => {
    for (const kind of KINDS) {
      const unconfirmed = notReady(kind, order("unconfirmed"));
      assert.equal(unconfirmed?.type, "failed", kind);
      assert.match(unconfirmed.type === "failed" ? unconfirmed.error : "", /^not sent: the order's placement is unconfirmed/);
      const failed = notReady(kind, order("failed"));
      assert.equal(failed?.type, "failed", kind);
      assert.match(failed.type === "failed" ? failed.error : "", /^not sent: the order was never placed/);
    }
  });

  it("dispatch-ready names the order by client_order_id: a placed or external order without the provider's id is enough for it alone", () => {
    for (const state of ["placed", "external"]) assert.equal(notReady("dispatch_ready", order(state)), null, state);
    for (const kind of ["edit", "cancel", "stop_reattempt"]) assert.equal(notReady(kind, order("external"))?.type, "failed", kind);
  });

  it("a placed order whose provider id is still being linked (another row held it) makes the others wait, not fail", () => {
    for (const kind of ["edit", "cancel", "stop_reattempt"]) assert.equal(notReady(kind, order("placed"))?.type, "wait", kind);
  });
});
