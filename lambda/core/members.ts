import { createHash } from "node:crypto";
import { createProject } from "./accounts";
import { errors } from "./errors";
import type { Project } from "./model";
import { ConflictError, type Store } from "./ports";

/**
 * Dashboard users and the projects they belong to. A user is the `sub` of the identity provider's
 * token; a user belongs to one or more projects; the first sign-in creates a personal project.
 */

/**
 * `owner`: the personal project's user; `admin` (and `member`, as memberships made before roles were
 * named) may change the project; `viewer` may only read it (the dashboard API refuses its writes).
 */
export type Role = "owner" | "admin" | "viewer" | "member";
/** The roles `dmt members add --role` gives. */
export const GRANTED_ROLES = ["viewer", "admin"] as const;
export type GrantedRole = (typeof GRANTED_ROLES)[number];

export interface Membership {
  userId: string;
  projectId: string;
  role: Role;
  createdAt: number;
  /** The project made for this user at first sign-in. */
  personal?: boolean;
  /** The email the member was added by (`dmt members add`), for listing. */
  email?: string;
}

/** The membership port. DynamoDB implements it. */
export interface MemberStore {
  /** Adds a membership; throws ConflictError if the user is a member of that project already. */
  addMembership(membership: Membership): Promise<void>;
  getMembership(userId: string, projectId: string): Promise<Membership | undefined>;
  listMemberships(userId: string): Promise<Membership[]>;
  listProjectMembers(projectId: string): Promise<Membership[]>;
  /** False when there was no such membership. */
  removeMembership(userId: string, projectId: string): Promise<boolean>;
  /** Gives an existing membership another role; undefined when there was no such membership. */
  setRole(userId: string, projectId: string, role: Role): Promise<Membership | undefined>;
}

/** The identity provider's users, by email: the local provider's, or Cognito's user pool. */
export interface UserDirectory {
  /** The user's id (the tokens' `sub`), or undefined when nobody has that email. */
  findUserId(email: string): Promise<string | undefined>;
}

const EMAIL_PATTERN = /^[^\s@]{1,64}@[^\s@]{1,255}$/;

function parseEmail(email: string): string {
  const normalized = email.trim().toLowerCase();
  if (!EMAIL_PATTERN.test(normalized)) throw errors.invalidField("email", "must be an email address");
  return normalized;
}

async function userOf(directory: UserDirectory, email: string): Promise<string> {
  const userId = await directory.findUserId(email);
  if (userId === undefined) {
    throw errors.notFound(
      `No dashboard user has the email ${email}; create the user in the identity provider first.`,
    );
  }
  return userId;
}

/** Gives the user with `email` access to a project in the dashboard, or changes nothing if they have it. */
export async function addMember(
  store: Store,
  members: MemberStore,
  directory: UserDirectory,
  input: { projectId: string; email: string; role: GrantedRole },
  now: number,
): Promise<{ membership: Membership; added: boolean }> {
  if (!(GRANTED_ROLES as readonly string[]).includes(input.role)) {
    throw errors.invalidField("role", `must be one of ${GRANTED_ROLES.join(", ")}`);
  }
  const email = parseEmail(input.email);
  if (!(await store.getProject(input.projectId))) {
    throw errors.notFound(`Project '${input.projectId}' does not exist.`);
  }
  const userId = await userOf(directory, email);
  const membership: Membership = {
    userId,
    projectId: input.projectId,
    role: input.role,
    createdAt: now,
    email,
  };
  try {
    await members.addMembership(membership);
    return { membership, added: true };
  } catch (err) {
    if (!(err instanceof ConflictError)) throw err;
    const existing = await members.getMembership(userId, input.projectId);
    if (!existing) throw err;
    return { membership: existing, added: false };
  }
}

/** Takes a user's access to a project away; a 404 when they had none. */
export async function removeMember(
  members: MemberStore,
  directory: UserDirectory,
  input: { projectId: string; email: string },
): Promise<Membership> {
  const email = parseEmail(input.email);
  const userId = await userOf(directory, email);
  const existing = await members.getMembership(userId, input.projectId);
  if (!existing || !(await members.removeMembership(userId, input.projectId))) {
    throw errors.notFound(`${email} is not a member of '${input.projectId}'.`);
  }
  return existing;
}

/**
 * The membership the dashboard's Members page changes: a 404 when the user is not a member, and a
 * refusal for the personal project's owner, whose access is the project itself.
 */
async function changeableMembership(
  members: MemberStore,
  projectId: string,
  userId: string,
): Promise<Membership> {
  const existing = await members.getMembership(userId, projectId);
  if (!existing) throw errors.notFound(`That user is not a member of '${projectId}'.`);
  if (existing.role === "owner") {
    throw errors.badRequest(
      "owner_membership",
      "The owner of a personal project keeps their access and role; change other members only.",
    );
  }
  return existing;
}

/** Gives a member (not the owner) another role, viewer or admin; the membership as it now is. */
export async function changeMemberRole(
  members: MemberStore,
  input: { projectId: string; userId: string; role: string },
): Promise<Membership> {
  const role = GRANTED_ROLES.find((granted) => granted === input.role);
  if (role === undefined) throw errors.invalidField("role", `must be one of ${GRANTED_ROLES.join(", ")}`);
  await changeableMembership(members, input.projectId, input.userId);
  const changed = await members.setRole(input.userId, input.projectId, role);
  if (!changed) throw errors.notFound(`That user is not a member of '${input.projectId}'.`);
  return changed;
}

/** Takes a member's (not the owner's) access to a project away, by user id; the membership removed. */
export async function removeMemberById(
  members: MemberStore,
  input: { projectId: string; userId: string },
): Promise<Membership> {
  const existing = await changeableMembership(members, input.projectId, input.userId);
  if (!(await members.removeMembership(input.userId, input.projectId))) {
    throw errors.notFound(`That user is not a member of '${input.projectId}'.`);
  }
  return existing;
}

/** Whether a member with this role may change the project (not only read it). */
export const canWrite = (role: Role) => role !== "viewer";

/** A project as one of its members sees it. */
export interface MemberProject {
  projectId: string;
  tier: Project["tier"];
  role: Role;
  personal: boolean;
}

/**
 * The personal project's id is derived from the user id, so that two first sign-ins at once (two
 * tabs) converge on one project instead of making two.
 */
export function personalProjectId(userId: string): string {
  return `personal-${createHash("sha256").update(userId, "utf8").digest("hex").slice(0, 16)}`;
}

/** The user's projects, creating the personal project on first sign-in. */
export async function signIn(
  store: Store,
  members: MemberStore,
  userId: string,
  now: number,
): Promise<MemberProject[]> {
  let memberships = await members.listMemberships(userId);
  if (memberships.length === 0) {
    await createPersonalProject(store, members, userId, now);
    memberships = await members.listMemberships(userId);
  }
  const projects: MemberProject[] = [];
  for (const membership of memberships) {
    const project = await store.getProject(membership.projectId);
    if (!project) continue; // a project deleted by an operator leaves memberships behind
    projects.push({
      projectId: project.projectId,
      tier: project.tier,
      role: membership.role,
      personal: membership.personal === true,
    });
  }
  return projects.sort(
    (a, b) => Number(b.personal) - Number(a.personal) || a.projectId.localeCompare(b.projectId),
  );
}

async function createPersonalProject(
  store: Store,
  members: MemberStore,
  userId: string,
  now: number,
): Promise<void> {
  const projectId = personalProjectId(userId);
  try {
    await createProject(store, projectId, "free", now);
  } catch (err) {
    // The project exists: adopt it only if nobody belongs to it (an earlier sign-in of this user that
    // stopped between the two writes, or the other of two concurrent first sign-ins).
    const others = (await members.listProjectMembers(projectId)).filter((m) => m.userId !== userId);
    if (!(await store.getProject(projectId)) || others.length > 0) throw err;
  }
  try {
    await members.addMembership({ userId, projectId, role: "owner", createdAt: now, personal: true });
  } catch (err) {
    if (!(err instanceof ConflictError)) throw err;
  }
}

/** The caller's membership of a project; a project the user does not belong to does not exist for them. */
export async function requireMembership(
  members: MemberStore,
  userId: string,
  projectId: string,
): Promise<Membership> {
  const membership = await members.getMembership(userId, projectId);
  if (!membership) throw errors.notFound(`Project '${projectId}' was not found.`);
  return membership;
}

/** An idempotency record of a dashboard write: the first request wins, its retries replay its outcome. */
export interface RequestRecord {
  requestId: string;
  /** Hash of the request's meaning: a retry with a different body is refused. */
  fingerprint: string;
  state: "pending" | "done";
  /** The id of what the request created (never a secret). */
  resultId?: string;
  createdAt: number;
  expiresAt: number;
}

/** The idempotency port. DynamoDB implements it. */
export interface RequestLog {
  /** Records a new request; returns the existing record instead if the id is taken and not expired. */
  begin(record: RequestRecord, now: number): Promise<RequestRecord | undefined>;
  complete(requestId: string, resultId: string): Promise<void>;
  /** Forgets a request that failed without effect, so that it may be retried. */
  discard(requestId: string): Promise<void>;
}
