/** The dashboard API as the pages see it: typed calls, and errors carrying the service's message. */

export interface KeyView {
  keyId: string;
  projectId: string;
  name: string;
  prefix: string;
  status: "active" | "revoked" | "expired";
  createdAt: number;
  lastUsedAt?: number;
  expiresAt?: number;
  revokedAt?: number;
  allow?: string[];
}

export interface MemberProject {
  projectId: string;
  tier: string;
  role: "owner" | "member";
  personal: boolean;
}

export interface Me {
  user: { id: string; operator: boolean };
  projects: MemberProject[];
}

export interface NewKeyInput {
  name: string;
  allow?: string[];
  expiresAt?: number;
}

export interface CreatedKey {
  /** The full key: present only in the response that created it. */
  key?: string;
  apiKey: KeyView;
  /** The same request (Idempotency-Key) was answered before. */
  replayed?: boolean;
}

export interface CreditBalance {
  availableMicros: number;
  heldMicros: number;
  openHolds: number;
}

export interface LedgerEntry {
  entryId: string;
  type: "grant" | "hold" | "settle" | "release";
  deltaMicros: number;
  at: number;
  ref: string;
  source?: string;
  note?: string;
  heldMicros?: number;
  chargedMicros?: number;
}

export interface LedgerPage {
  entries: LedgerEntry[];
  cursor?: string;
}

export interface GrantInput {
  usd: string;
  source: string;
  note?: string;
}

export type Vendor = "groq" | "openai" | "anthropic" | "gemini";

export interface VendorKeyView {
  vendor: Vendor;
  last4: string;
  createdAt: number;
  updatedAt: number;
}

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
    const payload = (await response.json().catch(() => undefined)) as
      | { error?: { message?: string; code?: string } }
      | undefined;
    if (!response.ok) {
      if (response.status === 401) this.onUnauthorized();
      throw new ApiFailure(
        payload?.error?.message ?? `The request failed (HTTP ${response.status}).`,
        response.status,
        payload?.error?.code ?? "unknown",
      );
    }
    return payload as T;
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

  ledger(projectId: string, cursor?: string): Promise<LedgerPage> {
    const query = cursor === undefined ? "" : `?cursor=${encodeURIComponent(cursor)}`;
    return this.call("GET", this.project(projectId, `/credits/ledger${query}`));
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

  async revokeKey(projectId: string, keyId: string): Promise<KeyView> {
    const path = `/projects/${encodeURIComponent(projectId)}/keys/${encodeURIComponent(keyId)}/revoke`;
    return (await this.call<{ apiKey: KeyView }>("POST", path)).apiKey;
  }
}
