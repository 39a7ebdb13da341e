import type { AuthContext } from "../../lambda/core/auth";
import type { ProxyCall, ProxyHooks, ProxyOutcome } from "../../lambda/core/call";
import { ApiError } from "../../lambda/core/errors";
import { TIER_LIMITS } from "../../lambda/core/model";
import { emptyUsage, type Usage } from "../../lambda/core/usage";
import { VENDOR_DEFINITIONS } from "../../lambda/vendors";
import { RouteMatcher } from "../../lambda/vendors/routes";

/**
 * Proxied calls as the proxy hands them to its hooks, without the proxy: an OpenAI chat completion
 * routed as the real route table routes it, and its outcome. For the use-case tests of the hooks.
 */

const openAi = new RouteMatcher(VENDOR_DEFINITIONS.openai.routes);
const encoder = new TextEncoder();
let calls = 0;

export interface ChatCallOptions {
  projectId?: string;
  keyId?: string;
  model?: string;
  /** The request's output limit: with the input, what the call's hold covers. */
  maxTokens?: number;
  requestId?: string;
  userId?: string;
  startedAt?: number;
  auth?: Partial<AuthContext>;
}

/** A chat completion call, authenticated and routed, before any hook ran. */
export function chatCall(options: ChatCallOptions = {}): ProxyCall {
  const model = options.model ?? "gpt-4o-mini";
  const body = {
    model,
    messages: [{ role: "user", content: "Say hello in one word." }],
    ...(options.maxTokens !== undefined && { max_tokens: options.maxTokens }),
  };
  const rawBody = encoder.encode(JSON.stringify(body));
  const { route } = openAi.match("POST", "/v1/chat/completions");
  return {
    id: `txn_test_${++calls}`,
    vendor: "openai",
    endpoint: "openai:/v1/chat/completions",
    method: "POST",
    auth: {
      projectId: options.projectId ?? "proj-test",
      keyId: options.keyId ?? "abcdefghij012345",
      tier: "free",
      rateLimit: TIER_LIMITS.free,
      store: "full",
      ...options.auth,
    },
    startedAt: options.startedAt ?? Date.UTC(2026, 10, 22, 12),
    requestId: options.requestId,
    userHeader: options.userId,
    userAgent: "OpenAI/JS 4.0",
    storeHeader: undefined,
    route,
    target: "/v1/chat/completions",
    model,
    stream: false,
    rawBody,
    body,
    form: undefined,
    responseHeaders: {},
    billing: undefined,
  };
}

/** How a call ended: 200 with this usage by default. */
export function outcomeOf(usage: Partial<Usage> = {}, changes: Partial<ProxyOutcome> = {}): ProxyOutcome {
  const body = '{"id":"chatcmpl-1","choices":[{"message":{"content":"Hello"}}]}';
  return {
    status: 200,
    usage: { ...emptyUsage(), complete: true, ...usage },
    streamed: false,
    latencyMs: 120,
    request: { bytes: 80, truncated: false },
    response: { bytes: body.length, text: body, truncated: false },
    sent: { headers: [["content-type", "application/json"]], chunks: [encoder.encode(body)] },
    ...changes,
  };
}

/** What the hooks decided for a call: the refusal (an ApiError), or what `before` returned. */
export type Admission =
  | { refused: ApiError }
  | { refused: undefined; decision: Awaited<ReturnType<NonNullable<ProxyHooks["before"]>>> };

/**
 * Runs `admit` and `before` as the proxy does (side by side; `admit`'s refusal first), and `after`
 * with `outcome` when it is given and the call was let through, or with the refusal's status when not.
 */
export async function runCall(
  hooks: ProxyHooks,
  call: ProxyCall,
  outcome?: ProxyOutcome,
): Promise<Admission> {
  const [admitted, before] = await Promise.allSettled([hooks.admit?.(call), hooks.before?.(call)]);
  const failure =
    admitted.status === "rejected"
      ? admitted.reason
      : before.status === "rejected"
        ? before.reason
        : undefined;
  if (failure !== undefined && !(failure instanceof ApiError)) throw failure;
  if (failure instanceof ApiError) {
    await hooks.after?.(
      call,
      outcomeOf({}, { status: failure.status, error: { type: failure.type, code: failure.code } }),
    );
    return { refused: failure };
  }
  if (outcome) await hooks.after?.(call, outcome);
  return { refused: undefined, decision: before.status === "fulfilled" ? before.value : undefined };
}
