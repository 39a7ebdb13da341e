import { randomBytes } from "node:crypto";
import { BlockList, isIP } from "node:net";
import { DEFAULT_EVENT_TYPES, type EventType, parseEventTypes } from "../core/cloudevent";
import { errors } from "../core/errors";
import type { WebhookStore, WebhookView } from "../core/webhook-delivery";

/**
 * A project's webhooks: a URL, the event types it wants, and a `whsec_` secret that signs every
 * request (Standard Webhooks). The secret is shown once, at creation, and stored encrypted.
 */

const MAX_URL = 2048;
/** A project's webhooks: enough for any team, few enough to fan out to in one go. */
export const MAX_WEBHOOKS = 20;

/** Where a webhook may point: in AWS only public addresses; locally loopback too (a receiver on this machine). */
export type AddressPolicy = "public" | "public-or-loopback";

/** `whsec_` + base64 of 24 random bytes (192 bits), the Standard Webhooks secret format. */
export function generateWebhookSecret(): string {
  return `whsec_${randomBytes(24).toString("base64")}`;
}

export function webhookId(): string {
  return `wh_${randomBytes(8).toString("hex")}`;
}

/** An http(s) URL without credentials; a literal address must be allowed by the policy. */
export function validateWebhookUrl(text: string, policy: AddressPolicy): URL {
  if (text.length > MAX_URL) throw errors.invalidField("url", `must be at most ${MAX_URL} characters`);
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw errors.invalidField("url", "must be an absolute http or https URL");
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw errors.invalidField("url", "must use http or https");
  }
  if (url.username !== "" || url.password !== "") {
    throw errors.invalidField(
      "url",
      "must not carry credentials (user:password@); the signature authenticates us",
    );
  }
  const host = url.hostname.replace(/^\[|\]$/g, "");
  if (isIP(host) !== 0 && !addressAllowed(host, policy)) {
    throw errors.invalidField(
      "url",
      `must not point at a private, loopback or link-local address, or one kept for documentation (${host})`,
    );
  }
  return url;
}

/** Addresses no webhook may reach: private, link-local, multicast, reserved and documentation ranges. */
const NOT_PUBLIC = new BlockList();
for (const [net, bits] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.0.2.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["224.0.0.0", 3],
] as const) {
  NOT_PUBLIC.addSubnet(net, bits, "ipv4");
}
for (const [net, bits] of [
  ["::", 128],
  ["64:ff9b:1::", 48], // local-use NAT64
  ["100::", 64], // discard-only
  ["2001::", 32], // Teredo: a tunnel to an address it obfuscates
  ["2001:db8::", 32], // documentation
  ["3fff::", 20], // documentation
  ["fc00::", 7],
  ["fe80::", 10],
  ["fec0::", 10], // site-local
  ["ff00::", 8],
] as const) {
  NOT_PUBLIC.addSubnet(net, bits, "ipv6");
}
const LOOPBACK = new BlockList();
LOOPBACK.addSubnet("127.0.0.0", 8, "ipv4");
LOOPBACK.addAddress("::1", "ipv6");

/** True when a webhook may be sent to `address` (an IP literal) under `policy`. */
export function addressAllowed(address: string, policy: AddressPolicy): boolean {
  const family = isIP(address);
  if (family === 0) return false;
  if (family === 4) {
    if (LOOPBACK.check(address, "ipv4")) return policy === "public-or-loopback";
    return !NOT_PUBLIC.check(address, "ipv4");
  }
  if (LOOPBACK.check(address, "ipv6")) return policy === "public-or-loopback";
  const embedded = embeddedIpv4(ipv6Bytes(address));
  // A mapped address is the IPv4 address itself; the other forms reach it through a translator or relay.
  if (embedded?.mapped) return addressAllowed(embedded.ipv4, policy);
  if (embedded && !addressAllowed(embedded.ipv4, "public")) return false;
  return !NOT_PUBLIC.check(address, "ipv6");
}

/** The 16 bytes of an IPv6 literal, written in any form (`::`, a dotted IPv4 tail, a zone). */
function ipv6Bytes(address: string): number[] {
  let text = address.split("%")[0] ?? "";
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const groups = (part: string) =>
    part === "" ? [] : part.split(":").map((group) => Number.parseInt(group, 16));
  const [head = "", tail] = text.split("::");
  const front = groups(head);
  const back = tail === undefined ? [] : groups(tail);
  const words = [...front, ...Array<number>(8 - front.length - back.length).fill(0), ...back];
  return words.flatMap((word) => [word >> 8, word & 0xff]);
}

/**
 * The IPv4 address an IPv6 address carries: mapped (`::ffff:a.b.c.d`) or translated
 * (`::ffff:0:a.b.c.d`), IPv4-compatible (`::a.b.c.d`), NAT64 (`64:ff9b::/96`) or 6to4 (`2002::/16`).
 */
function embeddedIpv4(bytes: number[]): { ipv4: string; mapped: boolean } | undefined {
  const zero = (from: number, to: number) => bytes.slice(from, to).every((byte) => byte === 0);
  const at = (offset: number) => bytes.slice(offset, offset + 4).join(".");
  const ones = (offset: number) => bytes[offset] === 0xff && bytes[offset + 1] === 0xff;
  if (zero(0, 10) && ones(10)) return { ipv4: at(12), mapped: true };
  if (zero(0, 8) && ones(8) && zero(10, 12)) return { ipv4: at(12), mapped: false };
  if (zero(0, 12)) return { ipv4: at(12), mapped: false };
  const nat64 = [0x00, 0x64, 0xff, 0x9b];
  if (nat64.every((byte, i) => bytes[i] === byte) && zero(4, 12)) return { ipv4: at(12), mapped: false };
  if (bytes[0] === 0x20 && bytes[1] === 0x02) return { ipv4: at(2), mapped: false };
  return undefined;
}

export interface NewWebhook {
  projectId: string;
  url: string;
  events?: string | readonly string[];
}

/** Adds a webhook; returns it with its secret, which nothing shows again. */
export async function addWebhook(
  store: WebhookStore,
  input: NewWebhook,
  policy: AddressPolicy,
  now: number,
): Promise<{ webhook: WebhookView; secret: string }> {
  const url = validateWebhookUrl(input.url, policy);
  const events: EventType[] =
    input.events === undefined ? [...DEFAULT_EVENT_TYPES] : parseEventTypes(input.events);
  if ((await store.list(input.projectId)).length >= MAX_WEBHOOKS) {
    throw errors.invalidField("url", `a project has at most ${MAX_WEBHOOKS} webhooks; delete one first`);
  }
  const webhook: WebhookView = {
    projectId: input.projectId,
    webhookId: webhookId(),
    url: url.toString(),
    events,
    createdAt: now,
  };
  const secret = generateWebhookSecret();
  await store.add(webhook, secret);
  return { webhook, secret };
}

/** Binds a stored secret to its webhook: the ciphertext of one does not open as another. */
/** The start of every webhook secret's encryption context (lib/dashboard.ts may unwrap those only). */
export const WEBHOOK_SECRET_CONTEXT = "dmt webhook secret\n";

export function webhookSecretContext(projectId: string, id: string): string {
  return `${WEBHOOK_SECRET_CONTEXT}${projectId}\n${id}`;
}
