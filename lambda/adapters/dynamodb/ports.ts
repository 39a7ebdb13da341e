import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { KeyWrapper } from "../../core/crypto";
import type { StorePorts } from "../../core/store-ports";
import { DynamoAlertRules } from "./alert-rules";
import { DynamoBudgets } from "./budgets";
import { DynamoCredits } from "./credits";
import { DynamoDeletionRequests } from "./deletion-requests";
import { DynamoIdempotency } from "./idempotency";
import { DynamoInteractionIndex } from "./interactions";
import { DynamoMemberStore } from "./members";
import { DynamoPayments } from "./payments";
import { DynamoPlans } from "./plans";
import { DynamoPrivacySettings } from "./privacy-settings";
import { DynamoProjectTiers } from "./project-tier";
import { DynamoRateLimiter, type RateShardOptions } from "./rate-limit";
import { DynamoStore } from "./store";
import type { TableNames } from "./tables";
import { DynamoTombstones } from "./tombstones";
import { DynamoVendorKeys } from "./vendor-keys";

/**
 * Every store port over one DynamoDB client (dynalite locally), each made on first use and kept: a
 * function builds only what it uses. `clock` is metering's (credits, budgets, rate limits, idempotency,
 * vendor keys); tests move it. `rateLimits` says how many items a key's rate-limit bucket may be split over:
 * every host of one table must give the same (runtime/aws.ts: all the stack's functions).
 */
export class DynamoPorts implements StorePorts {
  private readonly made = new Map<string, unknown>();

  constructor(
    readonly db: DynamoDBClient,
    readonly tables: TableNames,
    private readonly keyWrapper: () => KeyWrapper,
    private readonly clock: () => number = Date.now,
    private readonly rateLimits: Pick<RateShardOptions, "shards"> = {},
  ) {}

  private once<T>(name: string, make: () => T): T {
    if (!this.made.has(name)) this.made.set(name, make());
    return this.made.get(name) as T;
  }

  get keys(): DynamoStore {
    return this.once("keys", () => new DynamoStore(this.db, this.tables));
  }
  get credits(): DynamoCredits {
    return this.once("credits", () => new DynamoCredits(this.db, this.tables, this.clock));
  }
  get payments(): DynamoPayments {
    return this.once("payments", () => new DynamoPayments(this.db, this.tables));
  }
  get budgets(): DynamoBudgets {
    return this.once("budgets", () => new DynamoBudgets(this.db, this.tables, this.clock));
  }
  get rateLimiter(): DynamoRateLimiter {
    return this.once(
      "rateLimiter",
      () => new DynamoRateLimiter(this.db, this.tables, this.clock, this.rateLimits),
    );
  }
  get idempotency(): DynamoIdempotency {
    return this.once("idempotency", () => new DynamoIdempotency(this.db, this.tables, this.clock));
  }
  get vendorKeys(): DynamoVendorKeys {
    return this.once(
      "vendorKeys",
      () => new DynamoVendorKeys(this.db, this.tables, this.keyWrapper(), this.clock),
    );
  }
  get members(): DynamoMemberStore {
    return this.once("members", () => new DynamoMemberStore(this.db, this.tables));
  }
  get projectTiers(): DynamoProjectTiers {
    return this.once("projectTiers", () => new DynamoProjectTiers(this.db, this.tables));
  }
  get privacy(): DynamoPrivacySettings {
    return this.once("privacy", () => new DynamoPrivacySettings(this.db, this.tables));
  }
  get interactions(): DynamoInteractionIndex {
    return this.once("interactions", () => new DynamoInteractionIndex(this.db, this.tables));
  }
  get deletionRequests(): DynamoDeletionRequests {
    return this.once(
      "deletionRequests",
      () => new DynamoDeletionRequests(this.db, this.tables.deletionRequests),
    );
  }
  get tombstones(): DynamoTombstones {
    return this.once("tombstones", () => new DynamoTombstones(this.db, this.tables.deletionTombstones));
  }
  get alertRules(): DynamoAlertRules {
    return this.once("alertRules", () => new DynamoAlertRules(this.db, this.tables));
  }
  get plans(): DynamoPlans {
    return this.once("plans", () => new DynamoPlans(this.db, this.tables));
  }
}
