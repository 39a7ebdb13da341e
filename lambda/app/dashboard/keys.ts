import { z } from "zod";
import { createKey, keyView, revokeKey } from "../../core/accounts";
import { parseModels } from "../../core/budgets";
import type { EventPublisher } from "../../core/cloudevent";
import { errors } from "../../core/errors";
import type { Logger } from "../../core/logger";
import type { RequestLog } from "../../core/members";
import type { Store } from "../../core/ports";
import { keyCreated, keyRevoked, publishAfter } from "../../events/account-events";
import { readJsonObject } from "../body";
import type { RouteTable } from "../routing";
import { once, parseBody, projectOf } from "./requests";

export interface KeyRoutesDeps {
  store: Store;
  requests: RequestLog;
  clock: () => number;
  onKeyRevoked?: (keyId: string) => void;
  /** Where `key.created` and `key.revoked` go; absent: no events. */
  events?: EventPublisher;
  logger: Logger;
}

const BODY_LIMIT = 64 * 1024;
const KEY_ID = /^[a-z0-9]{16}$/;

const newKeyBody = z.strictObject({
  name: z.string(),
  allow: z.array(z.string()).optional(),
  /** Epoch milliseconds. */
  expiresAt: z.number().int().optional(),
  /** Comma-separated model names or globs (core/budgets.ts parseModels). */
  models: z.string().optional(),
  tpm: z.number().int().optional(),
});

/** The API Keys section: the same validation as `dmt keys create` (core/accounts.ts). */
export function keyRoutes(base: string, deps: KeyRoutesDeps): RouteTable {
  return {
    [`${base}/keys`]: {
      GET: async (c) => {
        const now = deps.clock();
        const keys = await deps.store.listKeys(projectOf(c));
        keys.sort((a, b) => b.createdAt - a.createdAt);
        return c.json({ keys: keys.map((k) => keyView(k, now)) });
      },
      POST: async (c) => {
        const input = parseBody(newKeyBody, await readJsonObject(c, BODY_LIMIT));
        const projectId = projectOf(c);
        const now = deps.clock();
        return once(c, {
          requests: deps.requests,
          scope: ["create-key", projectId],
          input: [
            input.name,
            input.allow ?? null,
            input.expiresAt ?? null,
            input.models ?? null,
            input.tpm ?? null,
          ],
          now,
          run: async () => {
            const { models, ...rest } = input;
            const { key, record } = await createKey(
              deps.store,
              { projectId, ...rest, ...(models !== undefined ? { models: parseModels(models) } : {}) },
              now,
            );
            await publishAfter(deps.events, keyCreated(record), deps.logger);
            return { resultId: record.keyId, response: c.json({ key, apiKey: keyView(record, now) }, 201) };
          },
          // The secret was shown to the first request only: a retry gets the key without it.
          replay: async (keyId) => {
            const record = await deps.store.getKey(keyId);
            if (!record) throw errors.notFound(`Key '${keyId}' was not found.`);
            return c.json({ apiKey: keyView(record, now), replayed: true }, 200);
          },
        });
      },
    },
    [`${base}/keys/:keyId/revoke`]: {
      POST: async (c) => {
        const keyId = c.req.param("keyId") ?? "";
        const existing = KEY_ID.test(keyId) ? await deps.store.getKey(keyId) : undefined;
        if (!existing || existing.projectId !== projectOf(c))
          throw errors.notFound(`Key '${keyId}' was not found.`);
        const now = deps.clock();
        const revoked = await revokeKey(deps.store, keyId, now);
        deps.onKeyRevoked?.(keyId);
        if (!existing.revoked) await publishAfter(deps.events, keyRevoked(revoked), deps.logger);
        return c.json({ apiKey: keyView(revoked, now) });
      },
    },
  };
}
