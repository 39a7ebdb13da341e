import { addMember, GRANTED_ROLES, type Membership, removeMember } from "../../lambda/core/members";
import { command } from "./command";
import { iso, table } from "./format";
import { oneOf, required } from "./options";

/** `dmt members ...`: who sees a project in the dashboard. */
export const memberCommands = [
  command({
    name: "members add",
    summary: "lets a dashboard user see the project (viewer, the default) or also change it (admin)",
    options: {
      project: required("<id>", "the project"),
      email: required("<email>", "the dashboard user's email (they must have signed in or exist)"),
      role: oneOf(GRANTED_ROLES, "viewer sees the project; admin also changes it (default viewer)"),
    },
    examples: ["dmt members add --project demo --email ada@example.com --role admin"],
    run: async ({ values, open }) => {
      const services = await open();
      return addMember(
        services.store,
        services.members,
        services.users,
        { projectId: values.project, email: values.email, role: values.role ?? "viewer" },
        Date.now(),
      );
    },
    print: ({ membership, added }) => {
      const who = membership.email ?? membership.userId;
      return added
        ? `${who} can now ${membership.role === "viewer" ? "see" : "see and change"} project ${membership.projectId} in the dashboard (${membership.role}).`
        : `${who} is already a member of ${membership.projectId} (${membership.role}); nothing changed.`;
    },
  }),
  command({
    name: "members list",
    summary: "who sees the project in the dashboard",
    options: { project: required("<id>", "the project") },
    examples: ["dmt members list --project demo"],
    run: async ({ values, open }) => {
      const services = await open();
      return services.members.listProjectMembers(await services.project(values.project));
    },
    print: (members) =>
      table(
        members.map((m: Membership) => ({
          email: m.email ?? (m.personal ? "(personal project)" : undefined),
          user: m.userId,
          role: m.role,
          added: iso(m.createdAt),
        })),
        ["email", "user", "role", "added"],
      ),
  }),
  command({
    name: "members remove",
    summary: "takes a dashboard user's access to the project away",
    options: {
      project: required("<id>", "the project"),
      email: required("<email>", "the member's email"),
    },
    examples: ["dmt members remove --project demo --email ada@example.com"],
    run: async ({ values, open }) => {
      const services = await open();
      return removeMember(services.members, services.users, {
        projectId: values.project,
        email: values.email,
      });
    },
    print: (membership) =>
      `${membership.email ?? membership.userId} no longer sees project ${membership.projectId}.`,
  }),
];
