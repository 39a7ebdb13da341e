import type { ApiKeyRecord, Project, Tier } from "./model";

/** A conditional write lost: the item exists already, or no longer matches. */
export class ConflictError extends Error {
  override name = "ConflictError";
}

/** The store port. DynamoDB implements it (in AWS, and over dynalite locally). */
export interface Store {
  createProject(project: Project): Promise<void>;
  getProject(projectId: string): Promise<Project | undefined>;
  listProjects(): Promise<Project[]>;

  /** Creates a key; throws ConflictError if the id is taken. */
  createKey(key: ApiKeyRecord): Promise<void>;
  getKey(keyId: string): Promise<ApiKeyRecord | undefined>;
  listKeys(projectId: string): Promise<ApiKeyRecord[]>;
  /** Marks a key revoked; returns it, or undefined if there is no such key. Revoking twice keeps the first time. */
  revokeKey(keyId: string, at: number): Promise<ApiKeyRecord | undefined>;
  /**
   * Sets or removes (null) a key's policies; returns the key, or undefined if there is no such key.
   */
  updateKeyPolicy(
    keyId: string,
    policy: { models?: string[] | null; tpm?: number | null },
  ): Promise<ApiKeyRecord | undefined>;
  /** Records use of a key; callers throttle this, it is not on the request path. */
  touchKey(keyId: string, at: number): Promise<void>;
}

/** What authentication needs of the store, possibly cached. */
export interface KeyLookup {
  lookup(keyId: string): Promise<{ key: ApiKeyRecord; project: Project } | undefined>;
}

/** A project's tier, set by an operator. */
export interface ProjectTiers {
  /** The project with its new tier, or undefined if it does not exist. */
  setTier(projectId: string, tier: Tier): Promise<Project | undefined>;
}
