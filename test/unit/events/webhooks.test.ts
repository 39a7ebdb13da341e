import { describe, expect, it } from "vitest";
import { undiciWebhookSender } from "../../../lambda/adapters/undici/webhook-sender";
import { ApiError } from "../../../lambda/core/errors";
import { addressAllowed, validateWebhookUrl } from "../../../lambda/events/webhooks";

function refusal(fn: () => unknown): { status: number; code: string; message: string } {
  try {
    fn();
  } catch (err) {
    if (err instanceof ApiError) return { status: err.status, code: err.code, message: err.message };
    throw err;
  }
  throw new Error("expected a refusal");
}

describe("webhook URLs", () => {
  it("takes http(s) URLs to public hosts", () => {
    expect(validateWebhookUrl("https://hooks.example.com/dmt?x=1", "public").toString()).toBe(
      "https://hooks.example.com/dmt?x=1",
    );
  });

  it("refuses other schemes, credentials and private, loopback or link-local addresses", () => {
    for (const url of ["ftp://example.com/x", "file:///etc/passwd", "not a url", "javascript:alert(1)"]) {
      expect(refusal(() => validateWebhookUrl(url, "public"))).toMatchObject({
        status: 400,
        code: "invalid_field",
      });
    }
    expect(refusal(() => validateWebhookUrl("https://user:pw@example.com/", "public")).message).toContain(
      "credentials",
    );
    for (const host of [
      "10.1.2.3",
      "192.168.0.10",
      "172.20.0.1",
      "169.254.169.254",
      "[fe80::1]",
      "[fd00::1]",
      "0.0.0.0",
    ]) {
      expect(refusal(() => validateWebhookUrl(`http://${host}/`, "public-or-loopback")).message).toContain(
        "private, loopback or link-local",
      );
    }
    expect(refusal(() => validateWebhookUrl("http://127.0.0.1:9000/", "public")).code).toBe("invalid_field");
    expect(refusal(() => validateWebhookUrl("http://[::1]/", "public")).code).toBe("invalid_field");
    expect(validateWebhookUrl("http://127.0.0.1:9000/", "public-or-loopback").port).toBe("9000");
  });

  it("judges IPv4-mapped IPv6 addresses as the IPv4 address they carry", () => {
    expect(addressAllowed("::ffff:10.0.0.1", "public")).toBe(false);
    expect(addressAllowed("::ffff:8.8.8.8", "public")).toBe(true);
    expect(addressAllowed("8.8.8.8", "public")).toBe(true);
    expect(addressAllowed("2606:4700::1111", "public")).toBe(true);
  });

  // Every IPv6 form that carries an IPv4 address, each with a private, a loopback, a link-local and a
  // public address inside; and the documentation ranges. [form, address, public, public-or-loopback]
  const table: [string, string, boolean, boolean][] = [
    ["IPv4-mapped, dotted", "::ffff:10.1.2.3", false, false],
    ["IPv4-mapped, dotted", "::ffff:127.0.0.1", false, true],
    ["IPv4-mapped, dotted", "::ffff:169.254.169.254", false, false],
    ["IPv4-mapped, hex", "::ffff:a01:203", false, false],
    ["IPv4-mapped, hex", "::ffff:7f00:1", false, true],
    ["IPv4-mapped, hex", "::ffff:a9fe:a9fe", false, false],
    ["IPv4-mapped, in full", "0:0:0:0:0:ffff:c0a8:1", false, false],
    ["IPv4-mapped, hex", "::ffff:808:808", true, true],
    ["IPv4-translated", "::ffff:0:10.1.2.3", false, false],
    ["IPv4-translated", "::ffff:0:7f00:1", false, false],
    ["IPv4-compatible, dotted", "::10.1.2.3", false, false],
    ["IPv4-compatible, dotted", "::127.0.0.1", false, false],
    ["IPv4-compatible, hex", "::a9fe:a9fe", false, false],
    ["IPv4-compatible, hex", "::c0a8:1", false, false],
    ["NAT64", "64:ff9b::10.1.2.3", false, false],
    ["NAT64", "64:ff9b::7f00:1", false, false],
    ["NAT64", "64:ff9b::a9fe:a9fe", false, false],
    ["NAT64", "64:ff9b::808:808", true, true],
    ["NAT64, local use", "64:ff9b:1::808:808", false, false],
    ["6to4", "2002:a01:203::1", false, false],
    ["6to4", "2002:7f00:1::", false, false],
    ["6to4", "2002:a9fe:a9fe::1", false, false],
    ["6to4", "2002:c0a8:101:1::1", false, false],
    ["6to4", "2002:808:808::1", true, true],
    ["Teredo", "2001:0:4136:e378:8000:63bf:3fff:fdd2", false, false],
    ["IPv4 documentation", "192.0.2.10", false, false],
    ["IPv4 documentation", "198.51.100.7", false, false],
    ["IPv4 documentation", "203.0.113.200", false, false],
    ["IPv4 documentation, mapped", "::ffff:203.0.113.200", false, false],
    ["IPv4 documentation, in 6to4", "2002:c000:20a::1", false, false],
    ["IPv6 documentation", "2001:db8::1", false, false],
    ["IPv6 documentation", "2001:db8:ffff::1", false, false],
    ["IPv6 documentation", "3fff::1", false, false],
    ["IPv6 loopback", "::1", false, true],
    ["IPv6 unspecified", "::", false, false],
    ["IPv6 public", "2606:4700::1111", true, true],
  ];
  it.each(table)("%s %s: public %s, with loopback %s", (_form, address, inPublic, withLoopback) => {
    expect(addressAllowed(address, "public")).toBe(inPublic);
    expect(addressAllowed(address, "public-or-loopback")).toBe(withLoopback);
    // A URL writes its IPv6 host in its own form: the checker judges that form alike.
    const host = address.includes(":") ? `[${address}]` : address;
    const url = () => validateWebhookUrl(`https://${host}/hook`, "public");
    if (inPublic) expect(url().hostname).toBeTruthy();
    else expect(refusal(url)).toMatchObject({ status: 400, code: "invalid_field" });
  });

  it("refuses at connect time a name that resolves to a loopback address when only public ones are allowed", async () => {
    const sender = undiciWebhookSender({ policy: "public", timeoutMs: 5000 });
    try {
      const result = await sender.post("http://localhost:9/hook", {}, "{}");
      expect(result).toMatchObject({ error: "refused_address" });
    } finally {
      await sender.close();
    }
  });
});
