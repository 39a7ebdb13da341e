import { createDashboardApp, type DashboardApiDeps } from "../app/dashboard/app";
import type { TokenVerifier } from "../app/dashboard/auth";
import type { EventPublisher } from "../core/cloudevent";
import type { DeletionStarter } from "../core/deletion";
import type { PriceCatalogue } from "../core/pricing";
import type { Infrastructure } from "./infrastructure";

export interface DashboardApiSettings {
  /** Checks the dashboard's access tokens: Cognito's keys in AWS, the local identity provider's. */
  verifyToken: TokenVerifier;
  /** Told of each revoked key, so the host's key cache forgets it (locally the proxy shares it). */
  onKeyRevoked?: (keyId: string) => void;
  /** The catalogue whose model names a key's model patterns are checked against (a warning). */
  prices: PriceCatalogue;
  /** Locally deletions run in process; in AWS the requests table's stream starts them. */
  deletionStarter?: DeletionStarter;
  /** Where key and credit events go; absent: none are sent. */
  events?: EventPublisher;
  /** Alert rules, webhooks and their delivery log (Settings); absent: not served. */
  alerting?: DashboardApiDeps["alerting"];
}

/**
 * The dashboard API (`/dashboard/api/...`): keys, members, credits, BYOK keys (wrapped by the host's
 * key wrapper), the interactions index and rollups, export settings and downloads, privacy settings, deletion requests,
 * budgets and key policies.
 */
export function composeDashboardApi(
  infra: Pick<Infrastructure, "store" | "warehouseQuery" | "exportSettings" | "logger">,
  settings: DashboardApiSettings,
) {
  const { store } = infra;
  return createDashboardApp({
    store: store.keys,
    members: store.members,
    requests: store.members,
    credits: store.credits,
    vendorKeys: store.vendorKeys,
    verifyToken: settings.verifyToken,
    logger: infra.logger,
    ...(settings.onKeyRevoked && { onKeyRevoked: settings.onKeyRevoked }),
    ...(settings.events && { events: settings.events }),
    ...(settings.alerting && { alerting: settings.alerting }),
    interactions: { interactions: store.interactions, usage: store.interactions.rollups },
    settings: {
      exportSettings: infra.exportSettings,
      tiers: store.projectTiers,
      warehouse: infra.warehouseQuery,
    },
    privacy: { settings: store.privacy },
    deletion: {
      requests: store.deletionRequests,
      ...(settings.deletionStarter && { starter: settings.deletionStarter }),
    },
    budgets: { store: store.budgets, catalogueModels: settings.prices.list().map((row) => row.model) },
  });
}
