import { describe, expect, it } from "vitest";
import type { AuthContext } from "../../../../lambda/core/auth";
import { authFromContext, grantedContext } from "../../../../lambda/handlers/runtime/authorizer-context";

const caller: AuthContext = {
  projectId: "acme",
  keyId: "k1",
  tier: "pro",
  rateLimit: { rpm: 60, burst: 100 },
  store: "full",
};

describe("the authorizer's context: the key's name", () => {
  it.each([
    `batch "job"`,
    "it's ünïcode – 🔑",
    "a,b; c=d",
    "100% %41 %zz",
    "  spaces  and\ttabs",
    "<script>\\</script>",
  ])("round-trips %j as a header-safe ASCII value", (keyName) => {
    const context = grantedContext({ ...caller, keyName });
    // Header-safe: printable ASCII, no comma (API Gateway joins repeated headers with commas), no quote.
    expect(String(context.keyName)).toMatch(/^[\x21-\x7e]+$/);
    expect(String(context.keyName)).not.toMatch(/[,"]/);
    expect(authFromContext(context).keyName).toBe(keyName);
  });

  it("leaves the name out of the caller when the key had none, yet always fills the field", () => {
    const context = grantedContext(caller);
    expect(context).toHaveProperty("keyName", "");
    expect(authFromContext(context)).not.toHaveProperty("keyName");
  });

  it("fails closed on a raw, joined or badly escaped name", () => {
    const base = grantedContext({ ...caller, keyName: "batch" });
    for (const keyName of ["batch,evil", `"quoted"`, "ünïcode", "%E0%A4%A", "%FF", "%zz"]) {
      expect(() => authFromContext({ ...base, keyName }), keyName).toThrow(/no valid authorizer context/);
    }
  });
});
