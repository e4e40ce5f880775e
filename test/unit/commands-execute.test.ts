import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { alreadyCancelled } from "../../src/commands/execute.ts";
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

describe("alreadyCancelled", () => {
  it("a refusal naming the order as cancelled is the command's success, on any attempt", () => {
    assert.deepEqual(alreadyCancelled(refusal("CANCELLED"), "7"), { svc_order_id: "7", status: "CANCELLED" });
    assert.deepEqual(alreadyCancelled(refusal("Cancelled", "7", "failure"), "7"), { svc_order_id: "7", status: "Cancelled" });
    assert.deepEqual(alreadyCancelled(refusal("CANCELLED_BY_CUSTOMER"), "7"), { svc_order_id: "7", status: "CANCELLED_BY_CUSTOMER" });
  });

  it("an order finished any other way, or another order, is not cancelled", () => {
    for (const status of ["DELIVERED", "RTS_INITIATED", "SOMETHING_NEW", "ALLOTTED"]) {
      assert.equal(alreadyCancelled(refusal(status), "7"), null, status);
    }
    assert.equal(alreadyCancelled(refusal("CANCELLED", 8), "7"), null);
  });

  it("a refusal that only says so in words counts ('already cancelled'), other words do not", () => {
    const said = (message: string, status = 400) =>
      new ProviderError({ kind: status === 200 ? "failure" : "client", operation: "PUT /api/v2/orders/7/cancel/", status, providerMessage: message, body: { message } });
    assert.deepEqual(alreadyCancelled(said("Order already cancelled"), "7"), { svc_order_id: "7", status: "CANCELLED" });
    assert.deepEqual(alreadyCancelled(said("This order has already been canceled.", 200), "7"), { svc_order_id: "7", status: "CANCELLED" });
    assert.equal(alreadyCancelled(said("Order cannot be cancelled after pickup"), "7"), null);
    assert.equal(alreadyCancelled(said("Invalid reason"), "7"), null);
  });

  it("failures that are no refusal are not, whatever their body says", () => {
    const server = new ProviderError({ kind: "server", operation: "PUT /api/v2/orders/7/cancel/", status: 500, body: refusal("CANCELLED").body });
    assert.equal(alreadyCancelled(server, "7"), null);
    const timeout = new ProviderError({ kind: "timeout", operation: "PUT /api/v2/orders/7/cancel/", providerMessage: "already cancelled" });
    assert.equal(alreadyCancelled(timeout, "7"), null);
    assert.equal(alreadyCancelled(new Error("boom"), "7"), null);
  });
});
