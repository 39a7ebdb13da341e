import { randomBytes } from "node:crypto";
import { BlockList, isIP } from "node:net";
import { errors } from "../core/errors";
import { DEFAULT_EVENT_TYPES, type EventType, parseEventTypes } from "./cloudevent";
import type { WebhookStore, WebhookView } from "./ports";

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
    throw errors.invalidField("url", `must not point at a private, loopback or link-local address (${host})`);
  }
  return url;
}

const PRIVATE = new BlockList();
for (const [net, bits] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["224.0.0.0", 3],
] as const) {
  PRIVATE.addSubnet(net, bits, "ipv4");
}
for (const [net, bits] of [
  ["::", 128],
  ["fc00::", 7],
  ["fe80::", 10],
  ["ff00::", 8],
] as const) {
  PRIVATE.addSubnet(net, bits, "ipv6");
}
const LOOPBACK = new BlockList();
LOOPBACK.addSubnet("127.0.0.0", 8, "ipv4");
LOOPBACK.addAddress("::1", "ipv6");

/** True when a webhook may be sent to `address` (an IP literal) under `policy`. */
export function addressAllowed(address: string, policy: AddressPolicy): boolean {
  const family = isIP(address);
  if (family === 0) return false;
  const type = family === 4 ? "ipv4" : "ipv6";
  // An IPv4-mapped IPv6 address is judged as the IPv4 address it carries.
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1];
  if (mapped) return addressAllowed(mapped, policy);
  if (LOOPBACK.check(address, type)) return policy === "public-or-loopback";
  return !PRIVATE.check(address, type);
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
