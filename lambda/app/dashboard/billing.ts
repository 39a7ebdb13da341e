import { z } from "zod";
import type { EventPublisher } from "../../core/cloudevent";
import { type CreditStore, parseUsd } from "../../core/credits";
import { errors } from "../../core/errors";
import type { Logger } from "../../core/logger";
import type { RequestLog } from "../../core/members";
import { monthPeriod, parseStatementQuery, readStatement, statementCsv } from "../../core/statement";
import { parseVendor, type VendorKeyStore } from "../../core/vendor-keys";
import { creditsGranted, publishAfter } from "../../events/account-events";
import { readJsonObject } from "../body";
import type { RouteTable } from "../routing";
import { once, parseBody, projectOf, requireOperator } from "./requests";

export interface BillingRoutesDeps {
  credits: CreditStore;
  vendorKeys: VendorKeyStore;
  requests: RequestLog;
  clock: () => number;
  /** Where `credits.granted` goes; absent: no events. */
  events?: EventPublisher;
  logger: Logger;
}

const BODY_LIMIT = 64 * 1024;
const LEDGER_PAGE = 25;

const grantBody = z.strictObject({
  /** Dollars as typed, e.g. "25" or "12.50": parsed exactly, never through a float. */
  usd: z.string(),
  /** Where the money came from (`invoice`, `promotion`, ...): the ledger keeps it. */
  source: z.string(),
  note: z.string().optional(),
});

const vendorKeyBody = z.strictObject({ key: z.string() });

/** Credits (balance, ledger, operators' grants) and BYOK vendor keys of the caller's project. */
export function billingRoutes(base: string, deps: BillingRoutesDeps): RouteTable {
  return {
    [`${base}/credits`]: {
      GET: async (c) => c.json({ balance: await deps.credits.balance(projectOf(c)) }),
    },
    [`${base}/credits/ledger`]: {
      GET: async (c) => {
        const cursor = c.req.query("cursor");
        const page = await deps.credits.ledger(projectOf(c), {
          limit: LEDGER_PAGE,
          ...(cursor !== undefined ? { cursor } : {}),
        });
        return c.json(page);
      },
    },
    [`${base}/credits/statement`]: {
      GET: async (c) => {
        const period = parseStatementQuery(c.req.query(), deps.clock());
        return c.json(await readStatement(deps.credits, projectOf(c), period));
      },
    },
    [`${base}/credits/statement.csv`]: {
      GET: async (c) => {
        const month = c.req.query("month") ?? "";
        const statement = await readStatement(deps.credits, projectOf(c), monthPeriod(month));
        return c.body(statementCsv(statement), 200, {
          "content-type": "text/csv; charset=utf-8",
          "content-disposition": `attachment; filename="dmt-statement-${projectOf(c)}-${month}.csv"`,
        });
      },
    },
    [`${base}/credits/grants`]: {
      POST: async (c) => {
        requireOperator(c, "grant credits");
        const input = parseBody(grantBody, await readJsonObject(c, BODY_LIMIT));
        const micros = parseUsd(input.usd, "usd");
        const projectId = projectOf(c);
        return once(c, {
          requests: deps.requests,
          scope: ["grant", projectId],
          input: [micros, input.source, input.note ?? null],
          now: deps.clock(),
          run: async () => {
            const entry = await deps.credits.grant(projectId, micros, input.source, input.note);
            const balance = await deps.credits.balance(projectId);
            await publishAfter(deps.events, creditsGranted(entry, balance), deps.logger);
            return { resultId: entry.ref, response: c.json({ entry, balance }, 201) };
          },
          replay: async () => c.json({ balance: await deps.credits.balance(projectId), replayed: true }, 200),
        });
      },
    },
    [`${base}/vendor-keys`]: {
      GET: async (c) => c.json({ vendorKeys: await deps.vendorKeys.list(projectOf(c)) }),
    },
    [`${base}/vendor-keys/:vendor`]: {
      PUT: async (c) => {
        const { key } = parseBody(vendorKeyBody, await readJsonObject(c, BODY_LIMIT));
        const vendor = parseVendor(c.req.param("vendor") ?? "");
        return c.json({ vendorKey: await deps.vendorKeys.set(projectOf(c), vendor, key) });
      },
      DELETE: async (c) => {
        const vendor = parseVendor(c.req.param("vendor") ?? "");
        if (!(await deps.vendorKeys.delete(projectOf(c), vendor))) {
          throw errors.notFound(`No ${vendor} key is stored for this project.`);
        }
        return c.json({ deleted: true });
      },
    },
  };
}
