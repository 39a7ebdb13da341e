import type { Context } from "hono";
import { z } from "zod";
import { errors } from "../../core/errors";
import type { Logger } from "../../core/logger";
import {
  addMember,
  changeMemberRole,
  GRANTED_ROLES,
  type MemberStore,
  type Membership,
  removeMemberById,
  type UserDirectory,
} from "../../core/members";
import type { Store } from "../../core/ports";
import { readJsonObject } from "../body";
import type { RouteTable } from "../routing";
import { parseBody, projectOf } from "./requests";

export interface MemberRoutesDeps {
  store: Store;
  members: MemberStore;
  /** The identity provider's users by email, for invitations; absent: invite with `dmt members add`. */
  directory?: UserDirectory;
  logger: Logger;
  clock: () => number;
}

const BODY_LIMIT = 4 * 1024;
const inviteBody = z.strictObject({ email: z.string(), role: z.string() });
const roleBody = z.strictObject({ role: z.string() });

/** A member as the Members page lists it. */
export interface MemberView {
  userId: string;
  email?: string;
  role: Membership["role"];
  addedAt: number;
  personal: boolean;
}

const view = (m: Membership): MemberView => ({
  userId: m.userId,
  ...(m.email !== undefined && { email: m.email }),
  role: m.role,
  addedAt: m.createdAt,
  personal: m.personal === true,
});

/**
 * Who changed which membership: one log line per change, as `dmt members` leaves one in the shell's
 * history. The acting user is the token's subject; emails are the ones the admin typed.
 */
function audit(c: Context, logger: Logger, action: string, membership: Membership): void {
  logger.info(`member ${action}`, {
    projectId: membership.projectId,
    userId: membership.userId,
    role: membership.role,
    by: c.get("dashboardUser").userId,
  });
}

/**
 * The Members page: every member may list the project's members; admins invite by email (a user the
 * identity provider knows), change a role and remove a member, with the rules of `dmt members`
 * (core/members.ts). Viewers' writes are refused before any route runs (app.ts).
 */
export function memberRoutes(base: string, deps: MemberRoutesDeps): RouteTable {
  const userIdOf = (c: Context) => c.req.param("userId") ?? "";
  return {
    [`${base}/members`]: {
      GET: async (c) => {
        const members = await deps.members.listProjectMembers(projectOf(c));
        members.sort((a, b) => a.createdAt - b.createdAt || a.userId.localeCompare(b.userId));
        return c.json({ members: members.map(view), canInvite: deps.directory !== undefined });
      },
      POST: async (c) => {
        const input = parseBody(inviteBody, await readJsonObject(c, BODY_LIMIT));
        if (!deps.directory) {
          throw errors.badRequest(
            "invitations_unavailable",
            "This deployment cannot look users up by email: add members with `dmt members add`.",
          );
        }
        const role = GRANTED_ROLES.find((granted) => granted === input.role);
        if (role === undefined)
          throw errors.invalidField("role", `must be one of ${GRANTED_ROLES.join(", ")}`);
        const { membership, added } = await addMember(
          deps.store,
          deps.members,
          deps.directory,
          { projectId: projectOf(c), email: input.email, role },
          deps.clock(),
        );
        if (added) audit(c, deps.logger, "added", membership);
        return c.json({ member: view(membership), added }, added ? 201 : 200);
      },
    },
    [`${base}/members/:userId`]: {
      PUT: async (c) => {
        const { role } = parseBody(roleBody, await readJsonObject(c, BODY_LIMIT));
        const membership = await changeMemberRole(deps.members, {
          projectId: projectOf(c),
          userId: userIdOf(c),
          role,
        });
        audit(c, deps.logger, "role changed", membership);
        return c.json({ member: view(membership) });
      },
      DELETE: async (c) => {
        const membership = await removeMemberById(deps.members, {
          projectId: projectOf(c),
          userId: userIdOf(c),
        });
        audit(c, deps.logger, "removed", membership);
        return c.json({ member: view(membership) });
      },
    },
  };
}
