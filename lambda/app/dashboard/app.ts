import type { Hono } from "hono";
import type { BudgetStore } from "../../core/budgets";
import type { EventPublisher } from "../../core/cloudevent";
import type { CreditStore } from "../../core/credits";
import { ApiError, errors } from "../../core/errors";
import type { Logger } from "../../core/logger";
import {
  canWrite,
  type MemberStore,
  type RequestLog,
  requireMembership,
  signIn,
  type UserDirectory,
} from "../../core/members";
import { PROJECT_ID_PATTERN } from "../../core/model";
import type { Store } from "../../core/ports";
import type { PrivacySettingsStore } from "../../core/privacy";
import type { VendorKeyStore } from "../../core/vendor-keys";
import type { AppEnv } from "../env";
import { mountRoutes } from "../routing";
import { appShell } from "../shell";
import { type AlertRoutesDeps, alertRoutes } from "./alerts";
import { requireUser, type TokenVerifier } from "./auth";
import { billingRoutes } from "./billing";
import { budgetRoutes } from "./budgets";
import { type DeletionRoutesDeps, deletionRoutes } from "./deletion";
import { DOWNLOAD_LINK_PATH } from "./downloads";
import { type InteractionRoutesDeps, interactionRoutes } from "./interactions";
import { keyRoutes } from "./keys";
import { memberRoutes } from "./members";
import { overviewRoutes } from "./overview";
import { type BillingSource, paymentRoutes } from "./payments";
import { type PlanRoutesDeps, planRoutes } from "./plans";
import { privacyRoutes } from "./privacy";
import { downloadLinkHandler, type SettingsRoutesDeps, settingsRoutes } from "./settings";

export interface DashboardApiDeps {
  store: Store;
  members: MemberStore;
  /** The identity provider's users by email, for the Members page's invitations; absent: not offered. */
  directory?: UserDirectory;
  requests: RequestLog;
  credits: CreditStore;
  vendorKeys: VendorKeyStore;
  verifyToken: TokenVerifier;
  logger: Logger;
  clock?: () => number;
  /** Told of each revoked key (the local stack drops it from its key cache at once). */
  onKeyRevoked?: (keyId: string) => void;
  /** Where key and credit events go; absent: none are sent. */
  events?: EventPublisher;
  /** The Interactions and Usage pages' data; absent: those routes are not served. */
  interactions?: Omit<InteractionRoutesDeps, "clock">;
  /** Export destination, tier and export downloads; absent: not served. */
  settings?: Omit<SettingsRoutesDeps, "logger">;
  /** The Budgets page and key policies; absent: not served. */
  budgets?: { store: BudgetStore; catalogueModels: readonly string[] };
  /** The project's privacy settings (store level, retention); absent: not served. */
  privacy?: { settings: PrivacySettingsStore };
  /** Settings -> Alerts and Webhooks, with the delivery log; absent: not served. */
  alerting?: Omit<AlertRoutesDeps, "clock">;
  /** The project's price plan on the Credits page; absent: not served. */
  plans?: Omit<PlanRoutesDeps, "clock">;
  /** Deletion requests (the data API's `POST /api/v1/data`, from Settings); absent: not served. */
  deletion?: Pick<DeletionRoutesDeps, "requests" | "starter">;
  /** Buy credits through Stripe, auto-recharge; absent: the routes say payments are not configured. */
  billing?: BillingSource;
  /** The dashboard's address, where Checkout returns to; absent: the request's origin (local server). */
  dashboardUrl?: string;
}

export const DASHBOARD_API_PREFIX = "/dashboard/api";
const PROJECT = `${DASHBOARD_API_PREFIX}/projects/:projectId`;

/**
 * The dashboard API (`/dashboard/api/...`): its own app and, in AWS, its own Lambda. Every route needs
 * a signed-in user (an access token from the identity provider, never a `dmt_` key); every route under
 * `/projects/:projectId` also needs the user to be a member of that project, and treats any other
 * project as absent (404), so ids of other tenants' projects and keys reveal nothing. The one exception:
 * the local server's signed download links (./downloads.ts), whose link is the grant.
 */
export function createDashboardApp(deps: DashboardApiDeps): Hono<AppEnv> {
  const clock = deps.clock ?? Date.now;
  const app = appShell(deps.logger);
  app.use(`${DASHBOARD_API_PREFIX}/*`, async (c, next) => {
    await next();
    // Responses may hold a key shown once: never cached anywhere.
    c.res.headers.set("Cache-Control", "no-store");
  });
  // The local server's download links: the link is the grant (a browser follows it without the token).
  if (deps.settings?.downloads.open) {
    app.get(`${DOWNLOAD_LINK_PATH}/:token`, downloadLinkHandler({ ...deps.settings, logger: deps.logger }));
  }
  app.use(`${DASHBOARD_API_PREFIX}/*`, requireUser(deps.verifyToken));
  app.use(`${PROJECT}/*`, async (c, next) => {
    const projectId = c.req.param("projectId") ?? "";
    if (!PROJECT_ID_PATTERN.test(projectId)) throw errors.notFound(`Project '${projectId}' was not found.`);
    const membership = await requireMembership(deps.members, c.get("dashboardUser").userId, projectId);
    if (!canWrite(membership.role) && c.req.method !== "GET" && c.req.method !== "HEAD") {
      throw new ApiError(
        403,
        "permission_error",
        "insufficient_permissions",
        `You can view '${projectId}' but not change it: ask an admin of the project.`,
      );
    }
    c.set("membership", membership);
    await next();
  });

  mountRoutes(app, {
    [`${DASHBOARD_API_PREFIX}/me`]: {
      GET: async (c) => {
        const user = c.get("dashboardUser");
        const projects = await signIn(deps.store, deps.members, user.userId, clock());
        return c.json({ user: { id: user.userId, operator: user.operator }, projects });
      },
    },
    ...keyRoutes(PROJECT, { ...deps, clock }),
    ...memberRoutes(PROJECT, { ...deps, clock }),
    ...billingRoutes(PROJECT, { ...deps, clock }),
    ...(deps.plans ? planRoutes(PROJECT, { ...deps.plans, clock }) : {}),
    ...paymentRoutes(PROJECT, deps.billing, deps.dashboardUrl),
    ...(deps.budgets
      ? budgetRoutes(PROJECT, {
          store: deps.store,
          budgets: deps.budgets.store,
          catalogueModels: deps.budgets.catalogueModels,
          ...(deps.interactions && { usage: deps.interactions.usage }),
          clock,
        })
      : {}),
    ...(deps.interactions ? interactionRoutes(PROJECT, { ...deps.interactions, clock }) : {}),
    ...(deps.interactions
      ? overviewRoutes(PROJECT, { usage: deps.interactions.usage, credits: deps.credits, clock })
      : {}),
    ...(deps.settings ? settingsRoutes(PROJECT, { ...deps.settings, logger: deps.logger }) : {}),
    ...(deps.privacy
      ? privacyRoutes(PROJECT, { projects: deps.store, settings: deps.privacy.settings })
      : {}),
    ...(deps.alerting ? alertRoutes(PROJECT, { ...deps.alerting, clock }) : {}),
    ...(deps.deletion
      ? deletionRoutes(PROJECT, { ...deps.deletion, log: deps.requests, logger: deps.logger, clock })
      : {}),
  });
  return app;
}
