import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { cancelledByEarlierAttempt } from "../../src/commands/execute.ts";
import { ProviderError } from "../../src/provider/errors.ts";

/** The provider's refusal of a cancel, as the emulator sends it. */
function refusal(status: string, svcOrderId: string | number = 7, kind: "client" | "failure" = "client"): ProviderError {
  return new ProviderError({
    kind,
    operation: "PUT /api/v2/orders/7/cancel/",
    status: kind === "client" ? 400 : 200,
    body: {
      message: "Failure",
      errors: { svc_order_id: [`order cannot be cancelled in status ${status}`] },
      data: { svc_order_id: svcOrderId, status },
    },
  });
}

describe("cancelledByEarlierAttempt", () => {
  it("a refusal for an already CANCELLED order after an earlier attempt is the command's success", () => {
    assert.deepEqual(cancelledByEarlierAttempt(refusal("CANCELLED"), "7", 1), { svc_order_id: "7", status: "CANCELLED" });
    assert.deepEqual(cancelledByEarlierAttempt(refusal("Cancelled", "7", "failure"), "7", 3), { svc_order_id: "7", status: "Cancelled" });
  });

  it("the same refusal on the first attempt is not: the order was cancelled otherwise", () => {
    assert.equal(cancelledByEarlierAttempt(refusal("CANCELLED"), "7", 0), null);
  });

  it("an order finished any other way, or another order, is not cancelled by this command", () => {
    for (const status of ["DELIVERED", "CANCELLED_BY_CUSTOMER", "RTS_INITIATED", "SOMETHING_NEW"]) {
      assert.equal(cancelledByEarlierAttempt(refusal(status), "7", 1), null, status);
    }
    assert.equal(cancelledByEarlierAttempt(refusal("CANCELLED", 8), "7", 1), null);
  });

  it("refusals without the order's status, and failures that are no refusal, are not", () => {
    const bare = new ProviderError({
      kind: "client",
      operation: "PUT /api/v2/orders/7/cancel/",
      status: 400,
      body: { message: "Failure", errors: { svc_order_id: ["order cannot be cancelled in status CANCELLED"] } },
    });
    assert.equal(cancelledByEarlierAttempt(bare, "7", 1), null);
    const server = new ProviderError({ kind: "server", operation: "PUT /api/v2/orders/7/cancel/", status: 500, body: refusal("CANCELLED").body });
    assert.equal(cancelledByEarlierAttempt(server, "7", 1), null);
    assert.equal(cancelledByEarlierAttempt(new Error("boom"), "7", 1), null);
  });
});
