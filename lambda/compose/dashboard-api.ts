import { createDashboardApp } from "../app/dashboard/app";
import type { TokenVerifier } from "../app/dashboard/auth";
import { type DownloadHost, signedLinkDownloads } from "../app/dashboard/downloads";
import type { BillingSource } from "../app/dashboard/payments";
import type { DeletionStarter } from "../core/deletion";
import type { UserDirectory } from "../core/members";
import type { PriceCatalogue } from "../core/pricing";
import type { AddressPolicy } from "../events/webhooks";
import { composeEvents, type Events, type EventsInfrastructure } from "./events";
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
  /** The identity provider's users by email, for invitations from the Members page; absent: not offered. */
  directory?: UserDirectory;
  /** Where webhook URLs may point: public addresses in AWS, loopback too locally. */
  webhookPolicy: AddressPolicy;
  /**
   * The events of a host that runs the proxy and the webhook delivery in the same process (the
   * embedded host), shared with them; absent: composed here.
   */
  events?: Events;
  /**
   * Credits bought through Stripe and auto-recharge (compose/payments.ts), or how to find them per
   * request (AWS: the secrets may be filled after the deploy); absent: not configured.
   */
  billing?: BillingSource;
  /** The dashboard's address, where Checkout returns the admin to; absent: the request's origin. */
  dashboardUrl?: string;
  /** Export downloads: presigned S3 URLs in AWS; absent: links signed by this process (the local server). */
  downloads?: DownloadHost;
}

/**
 * The dashboard API (`/dashboard/api/...`): keys, members, credits, BYOK keys (wrapped by the host's
 * key wrapper), the interactions index and rollups, export settings and downloads, privacy settings, deletion requests,
 * budgets and key policies; Settings -> Alerts and Webhooks, whose tests and resends are sent from here
 * (retries go to the delivery queue); key and credit events.
 */
export function composeDashboardApi(
  infra: Pick<Infrastructure, "store" | "warehouseQuery" | "exportSettings" | "logger"> &
    EventsInfrastructure,
  settings: DashboardApiSettings,
) {
  const { store } = infra;
  const events = settings.events ?? composeEvents(infra);
  return createDashboardApp({
    store: store.keys,
    members: store.members,
    requests: store.members,
    credits: store.credits,
    vendorKeys: store.vendorKeys,
    verifyToken: settings.verifyToken,
    logger: infra.logger,
    ...(settings.onKeyRevoked && { onKeyRevoked: settings.onKeyRevoked }),
    ...(settings.directory && { directory: settings.directory }),
    // key.created, key.revoked, credits.granted.
    events: events.publisher,
    alerting: {
      rules: events.rules,
      cached: events.cachedRules,
      alerts: events.alerts,
      webhooks: events.webhooks,
      log: events.log,
      deliveries: events.deliveries,
      policy: settings.webhookPolicy,
    },
    interactions: { interactions: store.interactions, usage: store.interactions.rollups },
    settings: {
      exportSettings: infra.exportSettings,
      tiers: store.projectTiers,
      warehouse: infra.warehouseQuery,
      downloads: settings.downloads ?? signedLinkDownloads(),
      rollups: store.interactions.rollups,
    },
    privacy: { settings: store.privacy },
    deletion: {
      requests: store.deletionRequests,
      ...(settings.deletionStarter && { starter: settings.deletionStarter }),
    },
    budgets: { store: store.budgets, catalogueModels: settings.prices.list().map((row) => row.model) },
    plans: { store: store.plans, markup: settings.prices.markup },
    ...(settings.billing && { billing: settings.billing }),
    ...(settings.dashboardUrl && { dashboardUrl: settings.dashboardUrl }),
  });
}
