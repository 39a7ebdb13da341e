import { z } from "zod";
import {
  type PrivacySettings,
  type PrivacySettingsStore,
  privacyView,
  updatePrivacySettings,
} from "../../core/privacy";
import { readJsonObject } from "../body";
import type { RouteTable } from "../routing";
import { parseBody, projectOf } from "./requests";

export interface PrivacyRoutesDeps {
  /** Reads the project's current settings (they are attributes of the project item). */
  projects: { getProject(projectId: string): Promise<PrivacySettings | undefined> };
  settings: PrivacySettingsStore;
}

const BODY_LIMIT = 4 * 1024;
// Values are checked by `mergePrivacySettings`, so the dashboard's errors are the CLI's.
const privacyBody = z.strictObject({
  store: z.unknown().optional(),
  retentionDays: z.unknown().optional(),
  bodyRetentionDays: z.unknown().optional(),
});

/** Privacy (docs/privacy.md): the store level, record and body retention; viewers may only read. */
export function privacyRoutes(base: string, deps: PrivacyRoutesDeps): RouteTable {
  return {
    [`${base}/privacy`]: {
      GET: async (c) => {
        const project = await deps.projects.getProject(projectOf(c));
        return c.json({ privacy: privacyView(project ?? {}) });
      },
      PUT: async (c) => {
        const change = parseBody(privacyBody, await readJsonObject(c, BODY_LIMIT));
        const next = await updatePrivacySettings(deps.projects, deps.settings, projectOf(c), change);
        return c.json({ privacy: privacyView(next) });
      },
    },
  };
}
