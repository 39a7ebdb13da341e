import type { ApiKeyRecord, Project } from "../../core/model";
import { ConflictError, type Store } from "../../core/ports";
import { MemoryTable } from "./table";

/** Projects and API keys in memory, as adapters/dynamodb/store.ts keeps them (creation refuses a taken id). */
export class MemoryStore implements Store {
  private readonly projects = new MemoryTable<Project>();
  private readonly keys = new MemoryTable<ApiKeyRecord>();

  async createProject(project: Project): Promise<void> {
    if (!(await this.projects.put(project.projectId, project, (found) => !found))) {
      throw new ConflictError(`project '${project.projectId}' exists already`);
    }
  }

  getProject(projectId: string): Promise<Project | undefined> {
    return this.projects.get(projectId);
  }

  async listProjects(): Promise<Project[]> {
    return (await this.projects.scan()).map(([, project]) => project);
  }

  async createKey(key: ApiKeyRecord): Promise<void> {
    if (!(await this.keys.put(key.keyId, key, (found) => !found)))
      throw new ConflictError("key id collision");
  }

  getKey(keyId: string): Promise<ApiKeyRecord | undefined> {
    return this.keys.get(keyId);
  }

  /** Oldest first, as the DynamoDB index by project orders them. */
  async listKeys(projectId: string): Promise<ApiKeyRecord[]> {
    return (await this.keys.scan((_, key) => key.projectId === projectId))
      .map(([, key]) => key)
      .sort((a, b) => a.createdAt - b.createdAt);
  }

  revokeKey(keyId: string, at: number): Promise<ApiKeyRecord | undefined> {
    return this.keys.update(keyId, (key) => key && { ...key, revoked: true, revokedAt: key.revokedAt ?? at });
  }

  updateKeyPolicy(
    keyId: string,
    policy: { models?: string[] | null; tpm?: number | null },
  ): Promise<ApiKeyRecord | undefined> {
    return this.keys.update(keyId, (key) => {
      if (!key) return undefined;
      const next: ApiKeyRecord = { ...key };
      if (policy.models === null) delete next.models;
      else if (policy.models !== undefined) next.models = policy.models;
      if (policy.tpm === null) delete next.tpm;
      else if (policy.tpm !== undefined) next.tpm = policy.tpm;
      return next;
    });
  }

  async touchKey(keyId: string, at: number): Promise<void> {
    await this.keys.update(keyId, (key) =>
      key && (key.lastUsedAt === undefined || key.lastUsedAt < at) ? { ...key, lastUsedAt: at } : undefined,
    );
  }
}
