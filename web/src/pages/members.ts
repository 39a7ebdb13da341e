import type { GrantedRole } from "../../../lambda/core/members";
import type { MemberView } from "../api";
import { h, replace, writes } from "../dom";
import { FieldError, formError, onSubmit } from "../form";
import { timeCell } from "../format";
import { errorMessage, loadInto, modal, type Page, type PageContext, pageHead } from "./page";

/**
 * Members: who sees the project in the dashboard. Admins invite a user by email with a role, change a
 * role and remove a member, with the rules and the log line of `dmt members`; viewers see the list.
 */

const ROLES: [role: GrantedRole, label: string, does: string][] = [
  ["viewer", "Viewer", "sees everything, changes nothing"],
  ["admin", "Admin", "sees and changes the project, its keys, budgets, settings and members"],
];
const ROLE_LABELS: Record<MemberView["role"], string> = {
  owner: "Owner",
  admin: "Admin",
  member: "Admin",
  viewer: "Viewer",
};

function roleSelect(id: string, value: GrantedRole, label: string): HTMLSelectElement {
  return h(
    "select",
    { id, "aria-label": label },
    ...ROLES.map(([role, name]) => h("option", { value: role, selected: role === value }, name)),
  );
}

const grantedRoleOf = (value: string): GrantedRole => (value === "admin" ? "admin" : "viewer");

function inviteForm(ctx: PageContext, canInvite: boolean, onInvited: () => void): HTMLElement {
  const email = h("input", {
    id: "member-email",
    type: "email",
    autocomplete: "off",
    placeholder: "colleague@example.com",
    "aria-describedby": "member-email-hint",
  });
  const role = roleSelect("member-role", "viewer", "Role");
  const error = formError();
  const submit = h("button", { type: "submit", class: "button primary" }, "Invite");
  const form = writes(
    h(
      "form",
      { class: "form padded", novalidate: true },
      error,
      h(
        "div",
        { class: "filters" },
        h("div", { class: "filter" }, h("label", { for: "member-email" }, "Email"), email),
        h("div", { class: "filter" }, h("label", { for: "member-role" }, "Role"), role),
      ),
      h(
        "p",
        { class: "hint", id: "member-email-hint" },
        canInvite
          ? `The person must have a dashboard sign-in already. ${ROLES.map(([, name, does]) => `${name}: ${does}.`).join(" ")}`
          : "This deployment cannot look users up by email: add members with `dmt members add`.",
      ),
      h("div", { class: "dialog-actions" }, submit),
    ),
  );
  if (!canInvite) for (const control of [email, role, submit]) control.disabled = true;
  onSubmit(form, {
    error,
    button: submit,
    busyLabel: "Inviting…",
    read: () => {
      if (email.value.trim() === "") throw new FieldError(email, "Enter the email of the person to invite.");
      return { email: email.value.trim(), role: grantedRoleOf(role.value) };
    },
    send: async (input) => {
      const { member, added } = await ctx.api.inviteMember(ctx.project.projectId, input);
      email.value = "";
      ctx.toast(
        added
          ? `${member.email ?? input.email} can now ${member.role === "viewer" ? "see" : "see and change"} this project.`
          : `${member.email ?? input.email} is already a member (${ROLE_LABELS[member.role]}); nothing changed.`,
      );
      onInvited();
    },
    fieldOf: () => email,
  });
  return form;
}

function openRemoveDialog(ctx: PageContext, member: MemberView, who: string, onRemoved: () => void): void {
  const el = modal("remove-member-title");
  const error = formError();
  const confirm = h("button", { type: "submit", class: "button danger" }, "Remove");
  const form = h(
    "form",
    { class: "form" },
    h("h2", { id: "remove-member-title" }, `Remove ${who}?`),
    error,
    h("p", {}, `${who} will no longer see this project in the dashboard. API keys are not affected.`),
    h(
      "div",
      { class: "dialog-actions" },
      h("button", { type: "button", class: "button", on: { click: () => el.close() } }, "Cancel"),
      confirm,
    ),
  );
  onSubmit(form, {
    error,
    button: confirm,
    busyLabel: "Removing…",
    read: () => member.userId,
    send: async (userId) => {
      await ctx.api.removeMember(ctx.project.projectId, userId);
      el.close();
      ctx.toast(`${who} was removed from the project.`);
      onRemoved();
    },
  });
  el.append(form);
  el.showModal();
  confirm.focus();
}

function memberRow(ctx: PageContext, member: MemberView, reload: () => void): HTMLTableRowElement {
  const you = member.userId === ctx.me.user.id;
  const who = member.email ?? (member.role === "owner" ? "The owner" : member.userId);
  const name = h(
    "td",
    {},
    h("span", { class: "member-name" }, who),
    you ? h("span", { class: "badge active" }, "You") : null,
    member.email === undefined ? h("code", { class: "key-id muted" }, member.userId) : null,
  );
  if (member.role === "owner") {
    return h(
      "tr",
      { "data-member": member.userId },
      name,
      h("td", { title: "The personal project's owner keeps their role" }, ROLE_LABELS.owner),
      h("td", {}, timeCell(member.addedAt, "")),
      h("td", {}),
    );
  }
  const role = writes(
    roleSelect(`member-role-${member.userId}`, grantedRoleOf(member.role), `Role of ${who}`),
  );
  role.addEventListener("change", async () => {
    role.disabled = true;
    try {
      const changed = await ctx.api.setMemberRole(
        ctx.project.projectId,
        member.userId,
        grantedRoleOf(role.value),
      );
      ctx.toast(`${who} is now ${ROLE_LABELS[changed.role].toLowerCase()}.`);
      reload();
    } catch (err) {
      ctx.toast(errorMessage(err), "error");
      role.value = grantedRoleOf(member.role);
      role.disabled = false;
    }
  });
  const remove = writes(
    h(
      "button",
      {
        type: "button",
        class: "button small danger-quiet",
        "aria-label": `Remove ${who}`,
        on: { click: () => openRemoveDialog(ctx, member, who, reload) },
      },
      "Remove",
    ),
  );
  return h(
    "tr",
    { "data-member": member.userId },
    name,
    h("td", {}, role),
    h("td", {}, timeCell(member.addedAt, "")),
    h("td", { class: "row-actions" }, remove),
  );
}

export const membersPage: Page = {
  path: "/dashboard/members",
  title: "Members",
  icon: "users",
  render(ctx, main) {
    const formSlot = h("section", { class: "card", "aria-label": "Invite a member" });
    const body = h("section", { class: "card", "aria-labelledby": "page-title" });
    replace(
      main,
      pageHead("Members", "Who sees this project in the dashboard, and who may change it."),
      formSlot,
      body,
    );
    const reload = loadInto(
      body,
      { loading: "Loading members…", failed: "The members" },
      () => ctx.api.members(ctx.project.projectId),
      ({ members, canInvite }, again) => {
        replace(
          formSlot,
          inviteForm(ctx, canInvite, () => void again()),
        );
        return h(
          "div",
          { class: "table-wrap" },
          h(
            "table",
            { class: "table members" },
            h("caption", { class: "sr-only" }, "Members of the project, oldest first"),
            h(
              "thead",
              {},
              h(
                "tr",
                {},
                ...["Member", "Role", "Added"].map((t) => h("th", { scope: "col" }, t)),
                h("th", { scope: "col" }, h("span", { class: "sr-only" }, "Actions")),
              ),
            ),
            h("tbody", {}, ...members.map((m) => memberRow(ctx, m, () => void reload()))),
          ),
        );
      },
    );
  },
};
