/**
 * The vendors' organization usage reports, answered from the calls the simulator served: OpenAI's
 * `GET /v1/organization/usage/completions` and Anthropic's `GET /v1/organizations/usage_report/messages`,
 * day buckets grouped by model, paged with `has_more` / `next_page` as the vendors do. Both want an
 * organization admin key (`sk-admin-...`, `sk-ant-admin...`); an ordinary key is refused.
 */
import { jsonReply, type Reply, type SimRequest, type SimState, SimulatedError } from "./reply";
import { emptySums, type Sums } from "./usage-ledger";

const DAY_MS = 86_400_000;
const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);

/** The day buckets of a range, from a page cursor on, `limit` at most (1d: default 7, max 31). */
function buckets(startMs: number, endMs: number, req: SimRequest): { days: number[]; next: string | null } {
  const rawLimit = req.query.get("limit");
  const limit = rawLimit === null ? 7 : Number(rawLimit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 31) {
    throw new SimulatedError(400, "limit must be an integer between 1 and 31 for bucket_width 1d");
  }
  const width = req.query.get("bucket_width") ?? "1d";
  if (width !== "1d") throw new SimulatedError(400, "The simulator reports bucket_width 1d only.");
  const page = req.query.get("page");
  let from = Math.floor(startMs / DAY_MS) * DAY_MS;
  if (page !== null) {
    from = Date.parse(`${Buffer.from(page, "base64url").toString("utf8")}T00:00:00Z`);
    if (Number.isNaN(from)) throw new SimulatedError(400, "Invalid page cursor.");
  }
  const days: number[] = [];
  let at = from;
  while (at < endMs && days.length < limit) {
    days.push(at);
    at += DAY_MS;
  }
  return { days, next: at < endMs ? Buffer.from(dayOf(at)).toString("base64url") : null };
}

function requireAdmin(key: string | undefined, prefix: string): void {
  if (!key?.startsWith(prefix)) {
    throw new SimulatedError(401, `This endpoint needs an organization admin key (${prefix}...).`);
  }
}

export function openAiUsageReport(req: SimRequest, state: SimState): Reply {
  const ledger = state.usage;
  {
    requireAdmin(/^Bearer\s+(\S+)/i.exec(req.headers.authorization ?? "")?.[1], "sk-admin-");
    const start = Number(req.query.get("start_time"));
    if (!req.query.has("start_time") || !Number.isInteger(start)) {
      throw new SimulatedError(400, "start_time: Field required (Unix seconds)");
    }
    const end = req.query.has("end_time") ? Number(req.query.get("end_time")) : Date.now() / 1000;
    const byModel = req.query.getAll("group_by").includes("model");
    const { days, next } = buckets(start * 1000, end * 1000, req);
    const data = days.map((at) => {
      const rows = ledger.day("openai", dayOf(at));
      const results = (byModel ? rows : merged(rows)).map(([model, s]) => ({
        object: "organization.usage.completions.result",
        input_tokens: s.uncachedInput + s.cachedInput,
        output_tokens: s.output,
        input_cached_tokens: s.cachedInput,
        input_audio_tokens: 0,
        output_audio_tokens: 0,
        num_model_requests: s.requests,
        project_id: null,
        user_id: null,
        api_key_id: null,
        model: byModel ? model : null,
        batch: null,
      }));
      return { object: "bucket", start_time: at / 1000, end_time: at / 1000 + 86_400, results };
    });
    return jsonReply({ object: "page", data, has_more: next !== null, next_page: next });
  }
}

export function anthropicUsageReport(req: SimRequest, state: SimState): Reply {
  const ledger = state.usage;
  {
    const header = req.headers["x-api-key"];
    requireAdmin(Array.isArray(header) ? header[0] : header, "sk-ant-admin");
    const start = Date.parse(req.query.get("starting_at") ?? "");
    if (Number.isNaN(start)) throw new SimulatedError(400, "starting_at: Field required (RFC 3339)");
    const endText = req.query.get("ending_at");
    const end = endText === null ? Date.now() : Date.parse(endText);
    if (Number.isNaN(end)) throw new SimulatedError(400, "ending_at: invalid RFC 3339 timestamp");
    const byModel = req.query.getAll("group_by[]").includes("model");
    const { days, next } = buckets(start, end, req);
    const data = days.map((at) => {
      const rows = ledger.day("anthropic", dayOf(at));
      const results = (byModel ? rows : merged(rows)).map(([model, s]) => ({
        uncached_input_tokens: s.uncachedInput,
        cache_creation: {
          ephemeral_1h_input_tokens: s.cacheWrite1h,
          ephemeral_5m_input_tokens: s.cacheWrite5m,
        },
        cache_read_input_tokens: s.cachedInput,
        output_tokens: s.output,
        server_tool_use: { web_search_requests: 0 },
        api_key_id: null,
        workspace_id: null,
        model: byModel ? model : null,
        service_tier: null,
        context_window: null,
      }));
      return {
        starting_at: new Date(at).toISOString().replace(".000Z", "Z"),
        ending_at: new Date(at + DAY_MS).toISOString().replace(".000Z", "Z"),
        results,
      };
    });
    return jsonReply({ data, has_more: next !== null, next_page: next });
  }
}

/** Ungrouped: one result summing every model. */
function merged(rows: [string, Sums][]): [string, Sums][] {
  if (rows.length === 0) return [];
  const total = emptySums();
  for (const [, s] of rows) {
    for (const key of Object.keys(total) as (keyof Sums)[]) total[key] += s[key];
  }
  return [["", total]];
}
