/** The dashboard API as the pages see it: typed calls, and errors carrying the service's message. */

import type { GrantedRole } from "../../lambda/core/members";
import type {
  AlertRuleView,
  BreakdownDimension,
  BreakdownReport,
  BudgetInput,
  BudgetView,
  CreatedKey,
  CreditBalance,
  CreditPurchaseOffer,
  DeletionInput,
  DeletionRequestPage,
  DeletionRequestView,
  DeliveryView,
  ExportInput,
  GrantInput,
  Interaction,
  InteractionFilters,
  InteractionPage,
  KeyView,
  Me,
  MemberView,
  NewKeyInput,
  Overview,
  PrivacyView,
  ProjectPlanView,
  RechargeRule,
  Statement,
  UsageReport,
  Vendor,
  VendorKeyView,
  WebhookView,
} from "./api-types";

export type * from "./api-types";

/** An error answered by the API (`{"error":{"message","type","code"}}`), or a network failure. */
export class ApiFailure extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string,
  ) {
    super(message);
  }
}

export class Api {
  constructor(
    private readonly base: string,
    private readonly token: () => string,
    /** Called on 401: the session is no longer good. */
    private readonly onUnauthorized: () => void,
  ) {}

  private async call<T>(
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<T> {
    return (await (await this.send(method, path, body, headers)).json()) as T;
  }

  /** A successful response, or an ApiFailure with the service's message. */
  private async send(
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<Response> {
    let response: Response;
    try {
      response = await fetch(`${this.base}${path}`, {
        method,
        headers: {
          Authorization: `Bearer ${this.token()}`,
          ...(body !== undefined ? { "Content-Type": "application/json" } : {}),
          ...headers,
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
    } catch {
      throw new ApiFailure(
        "The dashboard API could not be reached. Check your connection and try again.",
        0,
        "network",
      );
    }
    if (!response.ok) {
      const payload = (await response.json().catch(() => undefined)) as
        | { error?: { message?: string; code?: string } }
        | undefined;
      if (response.status === 401) this.onUnauthorized();
      throw new ApiFailure(
        payload?.error?.message ?? `The request failed (HTTP ${response.status}).`,
        response.status,
        payload?.error?.code ?? "unknown",
      );
    }
    return response;
  }

  me(): Promise<Me> {
    return this.call("GET", "/me");
  }

  async listKeys(projectId: string): Promise<KeyView[]> {
    return (await this.call<{ keys: KeyView[] }>("GET", `/projects/${encodeURIComponent(projectId)}/keys`))
      .keys;
  }

  createKey(projectId: string, input: NewKeyInput, idempotencyKey: string): Promise<CreatedKey> {
    return this.call("POST", `/projects/${encodeURIComponent(projectId)}/keys`, input, {
      "Idempotency-Key": idempotencyKey,
    });
  }

  private project(projectId: string, path: string): string {
    return `/projects/${encodeURIComponent(projectId)}${path}`;
  }

  async balance(projectId: string): Promise<CreditBalance> {
    return (await this.call<{ balance: CreditBalance }>("GET", this.project(projectId, "/credits"))).balance;
  }

  statement(
    projectId: string,
    period: { from: string; to: string; group: "day" | "lease" },
  ): Promise<Statement> {
    return this.call("GET", this.project(projectId, `/credits/statement?${new URLSearchParams(period)}`));
  }

  /** What Buy credits offers (docs/billing.md). */
  purchaseOffer(projectId: string): Promise<CreditPurchaseOffer> {
    return this.call("GET", this.project(projectId, "/credits/purchase"));
  }

  /** A Stripe Checkout session for one offered amount; the page goes to its URL. */
  checkout(projectId: string, usd: string, returnUrl: string): Promise<{ session_id: string; url: string }> {
    return this.call("POST", this.project(projectId, "/credits/checkout"), { usd, return_url: returnUrl });
  }

  /** Sets the project's auto-recharge rule (admins); the amount one of those offered. */
  setRecharge(
    projectId: string,
    rule: RechargeRule,
  ): Promise<{ recharge: RechargeRule; saved_card: boolean }> {
    return this.call("PUT", this.project(projectId, "/credits/recharge"), rule);
  }

  /** Turns auto-recharge off (admins). */
  async clearRecharge(projectId: string): Promise<void> {
    await this.call("DELETE", this.project(projectId, "/credits/recharge"));
  }

  /** The project's price plan (read-only). */
  plan(projectId: string): Promise<ProjectPlanView> {
    return this.call("GET", this.project(projectId, "/credits/plan"));
  }

  overview(projectId: string): Promise<Overview> {
    return this.call("GET", this.project(projectId, "/overview"));
  }

  async grant(projectId: string, input: GrantInput, idempotencyKey: string): Promise<CreditBalance> {
    const path = this.project(projectId, "/credits/grants");
    return (
      await this.call<{ balance: CreditBalance }>("POST", path, input, { "Idempotency-Key": idempotencyKey })
    ).balance;
  }

  async vendorKeys(projectId: string): Promise<VendorKeyView[]> {
    return (await this.call<{ vendorKeys: VendorKeyView[] }>("GET", this.project(projectId, "/vendor-keys")))
      .vendorKeys;
  }

  async setVendorKey(projectId: string, vendor: Vendor, key: string): Promise<VendorKeyView> {
    const path = this.project(projectId, `/vendor-keys/${vendor}`);
    return (await this.call<{ vendorKey: VendorKeyView }>("PUT", path, { key })).vendorKey;
  }

  async deleteVendorKey(projectId: string, vendor: Vendor): Promise<void> {
    await this.call("DELETE", this.project(projectId, `/vendor-keys/${vendor}`));
  }

  interactions(projectId: string, filters: InteractionFilters, cursor?: string): Promise<InteractionPage> {
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(filters)) if (value) query.set(name, value);
    if (cursor !== undefined) query.set("cursor", cursor);
    const search = query.toString() === "" ? "" : `?${query}`;
    return this.call("GET", this.project(projectId, `/interactions${search}`));
  }

  async interaction(projectId: string, transactionId: string): Promise<Interaction> {
    const path = this.project(projectId, `/interactions/${encodeURIComponent(transactionId)}`);
    return (await this.call<{ interaction: Interaction }>("GET", path)).interaction;
  }

  usage(projectId: string, from: string, to: string): Promise<UsageReport> {
    const query = new URLSearchParams({ from, to });
    return this.call("GET", this.project(projectId, `/usage?${query}`));
  }

  /** Usage by API key or by end user over the same days, dearest first. */
  breakdown(projectId: string, by: BreakdownDimension, from: string, to: string): Promise<BreakdownReport> {
    const query = new URLSearchParams({ by, from, to });
    return this.call("GET", this.project(projectId, `/usage/breakdown?${query}`));
  }

  async exportDestination(projectId: string): Promise<string | null> {
    const path = this.project(projectId, "/export-destination");
    return (
      (await this.call<{ exportDestination: { url: string } | null }>("GET", path)).exportDestination?.url ??
      null
    );
  }

  /** The destination as saved, or null when `url` was empty (which removes it). */
  async setExportDestination(projectId: string, url: string): Promise<string | null> {
    const path = this.project(projectId, "/export-destination");
    return (
      (await this.call<{ exportDestination: { url: string } | null }>("PUT", path, { url })).exportDestination
        ?.url ?? null
    );
  }

  async clearExportDestination(projectId: string): Promise<void> {
    await this.call("DELETE", this.project(projectId, "/export-destination"));
  }

  async privacy(projectId: string): Promise<PrivacyView> {
    return (await this.call<{ privacy: PrivacyView }>("GET", this.project(projectId, "/privacy"))).privacy;
  }

  async setPrivacy(projectId: string, change: PrivacyView): Promise<PrivacyView> {
    const path = this.project(projectId, "/privacy");
    return (await this.call<{ privacy: PrivacyView }>("PUT", path, change)).privacy;
  }

  async setTier(projectId: string, tier: string): Promise<string> {
    const path = this.project(projectId, "/tier");
    return (await this.call<{ project: { tier: string } }>("PUT", path, { tier })).project.tier;
  }

  /** Where the export can be downloaded for the next minutes, and the file's name. */
  async downloadExport(projectId: string, input: ExportInput): Promise<{ url: string; fileName: string }> {
    const answer = await this.call<{ download_url: string; file_name: string }>(
      "POST",
      this.project(projectId, "/exports"),
      input,
    );
    return { url: answer.download_url, fileName: answer.file_name };
  }

  deletionRequests(projectId: string, cursor?: string): Promise<DeletionRequestPage> {
    const query = cursor === undefined ? "" : `?cursor=${encodeURIComponent(cursor)}`;
    return this.call("GET", this.project(projectId, `/deletion-requests${query}`));
  }

  async requestDeletion(
    projectId: string,
    input: DeletionInput,
    idempotencyKey: string,
  ): Promise<DeletionRequestView> {
    const path = this.project(projectId, "/deletion-requests");
    return (
      await this.call<{ request: DeletionRequestView }>("POST", path, input, {
        "Idempotency-Key": idempotencyKey,
      })
    ).request;
  }

  async budgets(projectId: string): Promise<BudgetView[]> {
    return (await this.call<{ budgets: BudgetView[] }>("GET", this.project(projectId, "/budgets"))).budgets;
  }

  async setBudget(projectId: string, input: BudgetInput): Promise<BudgetView> {
    return (await this.call<{ budget: BudgetView }>("PUT", this.project(projectId, "/budgets"), input))
      .budget;
  }

  async deleteBudget(projectId: string, budgetId: string): Promise<void> {
    await this.send("DELETE", this.project(projectId, `/budgets/${encodeURIComponent(budgetId)}`));
  }

  async alertRules(projectId: string): Promise<AlertRuleView[]> {
    return (await this.call<{ rules: AlertRuleView[] }>("GET", this.project(projectId, "/alerts"))).rules;
  }

  async setAlertRules(
    projectId: string,
    input: { lowBalanceUsd?: string; budgetThresholds?: string },
  ): Promise<AlertRuleView[]> {
    return (await this.call<{ rules: AlertRuleView[] }>("PUT", this.project(projectId, "/alerts"), input))
      .rules;
  }

  async deleteAlertRule(projectId: string, ruleId: string): Promise<void> {
    await this.send("DELETE", this.project(projectId, `/alerts/${encodeURIComponent(ruleId)}`));
  }

  async webhooks(projectId: string): Promise<WebhookView[]> {
    return (await this.call<{ webhooks: WebhookView[] }>("GET", this.project(projectId, "/webhooks")))
      .webhooks;
  }

  addWebhook(
    projectId: string,
    input: { url: string; events?: string },
  ): Promise<{ webhook: WebhookView; secret: string }> {
    return this.call("POST", this.project(projectId, "/webhooks"), input);
  }

  async deleteWebhook(projectId: string, webhookId: string): Promise<void> {
    await this.send("DELETE", this.project(projectId, `/webhooks/${encodeURIComponent(webhookId)}`));
  }

  async testWebhook(projectId: string, webhookId: string): Promise<DeliveryView> {
    const path = this.project(projectId, `/webhooks/${encodeURIComponent(webhookId)}/test`);
    return (await this.call<{ delivery: DeliveryView }>("POST", path)).delivery;
  }

  async deliveries(projectId: string, webhookId: string): Promise<DeliveryView[]> {
    const path = this.project(projectId, `/webhooks/${encodeURIComponent(webhookId)}/deliveries`);
    return (await this.call<{ deliveries: DeliveryView[] }>("GET", path)).deliveries;
  }

  async resendDelivery(projectId: string, webhookId: string, eventId: string): Promise<DeliveryView> {
    const path = this.project(
      projectId,
      `/webhooks/${encodeURIComponent(webhookId)}/deliveries/${encodeURIComponent(eventId)}/resend`,
    );
    return (await this.call<{ delivery: DeliveryView }>("POST", path)).delivery;
  }

  members(projectId: string): Promise<{ members: MemberView[]; canInvite: boolean }> {
    return this.call("GET", this.project(projectId, "/members"));
  }

  inviteMember(
    projectId: string,
    input: { email: string; role: GrantedRole },
  ): Promise<{ member: MemberView; added: boolean }> {
    return this.call("POST", this.project(projectId, "/members"), input);
  }

  async setMemberRole(projectId: string, userId: string, role: GrantedRole): Promise<MemberView> {
    const path = this.project(projectId, `/members/${encodeURIComponent(userId)}`);
    return (await this.call<{ member: MemberView }>("PUT", path, { role })).member;
  }

  async removeMember(projectId: string, userId: string): Promise<void> {
    await this.send("DELETE", this.project(projectId, `/members/${encodeURIComponent(userId)}`));
  }

  async revokeKey(projectId: string, keyId: string): Promise<KeyView> {
    const path = `/projects/${encodeURIComponent(projectId)}/keys/${encodeURIComponent(keyId)}/revoke`;
    return (await this.call<{ apiKey: KeyView }>("POST", path)).apiKey;
  }
}
