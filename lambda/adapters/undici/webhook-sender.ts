import { type LookupAddress, type LookupOptions, lookup } from "node:dns";
import { Agent, request, errors as undiciErrors } from "undici";
import type { SendResult, WebhookSender } from "../../core/webhook-delivery";
import { type AddressPolicy, addressAllowed } from "../../events/webhooks";

export interface UndiciSenderOptions {
  /** Public addresses only (AWS), or loopback too (the local stack). */
  policy: AddressPolicy;
  /** Longest wait to connect, for the answer's headers, and between two chunks of its body. */
  timeoutMs: number;
}

class RefusedAddress extends Error {
  override name = "RefusedAddress";
}

type LookupCallback = (
  err: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

/**
 * Posts webhooks with undici. The address check runs at connect time, on the addresses DNS gave for
 * this very connection, so a name that resolves to a private address (or is re-pointed to one after
 * the URL was accepted) is refused. Redirects are not followed; the answer's body is read and dropped.
 */
export function undiciWebhookSender(
  options: UndiciSenderOptions,
): WebhookSender & { close(): Promise<void> } {
  const guardedLookup = (hostname: string, lookupOptions: LookupOptions, callback: LookupCallback) => {
    lookup(hostname, { ...lookupOptions, all: true }, (err, addresses) => {
      if (err) return callback(err, []);
      const refused = addresses.find((a) => !addressAllowed(a.address, options.policy));
      if (refused) return callback(new RefusedAddress(`${hostname} resolves to ${refused.address}`), []);
      if (lookupOptions.all) return callback(null, addresses);
      const first = addresses[0];
      if (!first) return callback(new RefusedAddress(`${hostname} has no address`), []);
      callback(null, first.address, first.family);
    });
  };
  const agent = new Agent({
    connectTimeout: options.timeoutMs,
    headersTimeout: options.timeoutMs,
    bodyTimeout: options.timeoutMs,
    connect: { lookup: guardedLookup as never },
  });
  return {
    async post(url, headers, body): Promise<SendResult> {
      try {
        const response = await request(url, { method: "POST", headers, body, dispatcher: agent });
        await response.body.dump({ limit: 64 * 1024 }).catch(() => undefined);
        return { status: response.statusCode };
      } catch (err) {
        return failure(err);
      }
    },
    close: () => agent.close(),
  };
}

function failure(err: unknown): SendResult {
  const cause = (err as { cause?: unknown }).cause;
  if (err instanceof RefusedAddress || cause instanceof RefusedAddress) {
    return {
      error: "refused_address",
      detail: (cause instanceof RefusedAddress ? cause : (err as Error)).message,
    };
  }
  if (
    err instanceof undiciErrors.ConnectTimeoutError ||
    err instanceof undiciErrors.HeadersTimeoutError ||
    err instanceof undiciErrors.BodyTimeoutError
  ) {
    return { error: "timeout", detail: "the receiver did not answer in time" };
  }
  const code = (err as NodeJS.ErrnoException).code ?? (cause as NodeJS.ErrnoException | undefined)?.code;
  return { error: "network", detail: code ?? (err as Error).name };
}
