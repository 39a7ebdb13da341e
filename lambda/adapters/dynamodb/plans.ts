import {
  ConditionalCheckFailedException,
  DeleteItemCommand,
  type DynamoDBClient,
  PutItemCommand,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import { marshall } from "@aws-sdk/util-dynamodb";
import { liveEntries, namedPlans, type Plan, type PlanStore, type ProjectPlan } from "../../core/plans";
import { ConflictError } from "../../core/ports";
import { readItem, scanAll } from "./paging";
import type { TableNames } from "./tables";

const PLAN = "plan#";
const PROJECT = "project#";

/**
 * Price plans over DynamoDB (table `plans`, key `id`): a plan under `plan#<id>`, a project's plan
 * entries under `project#<id>`. DynamoDB has no transaction here (dynalite has none), so a plan in use
 * is kept from deletion by references: each plan item holds `projects.<project id> = <revision>`, set
 * before a project's entries naming it are written (revision = the write's), removed after a write
 * that drops it, each step conditional. A plan is deleted only when it holds no reference; a
 * reference left by a write that lost (or whose entry is over) is cleared by the delete itself when
 * the project's stored entries prove it stale. Every leftover errs towards refusing a delete, never
 * towards deleting a plan a project is on.
 */
export class DynamoPlans implements PlanStore {
  constructor(
    private readonly db: DynamoDBClient,
    private readonly tables: Pick<TableNames, "plans">,
  ) {}

  async createPlan(plan: Plan): Promise<void> {
    try {
      await this.db.send(
        new PutItemCommand({
          TableName: this.tables.plans,
          Item: marshall({
            id: PLAN + plan.planId,
            ...plan,
            versionCount: plan.versions.length,
            projects: {},
          }),
          ConditionExpression: "attribute_not_exists(id)",
        }),
      );
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException)
        throw new ConflictError(`plan ${plan.planId} exists`);
      throw err;
    }
  }

  async updatePlan(plan: Plan, expectedVersions: number): Promise<void> {
    try {
      await this.db.send(
        new UpdateItemCommand({
          TableName: this.tables.plans,
          Key: marshall({ id: PLAN + plan.planId }),
          UpdateExpression: "SET #name = :name, versions = :versions, versionCount = :count",
          ConditionExpression: "versionCount = :expected",
          ExpressionAttributeNames: { "#name": "name" },
          ExpressionAttributeValues: marshall({
            ":name": plan.name,
            ":versions": plan.versions,
            ":count": plan.versions.length,
            ":expected": expectedVersions,
          }),
        }),
      );
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException)
        throw new ConflictError(`plan ${plan.planId} changed`);
      throw err;
    }
  }

  async getPlan(planId: string): Promise<Plan | undefined> {
    const item = await readItem(this.db, this.tables.plans, { id: PLAN + planId });
    return item && planOf(item);
  }

  async listPlans(): Promise<Plan[]> {
    const items = await scanAll(this.db, {
      TableName: this.tables.plans,
      FilterExpression: "begins_with(id, :plan)",
      ExpressionAttributeValues: marshall({ ":plan": PLAN }),
      ConsistentRead: true,
    });
    return items.map(planOf).sort((a, b) => (a.planId < b.planId ? -1 : 1));
  }

  async deletePlan(planId: string, now: number) {
    for (let attempt = 0; attempt < 4; attempt++) {
      try {
        await this.db.send(
          new DeleteItemCommand({
            TableName: this.tables.plans,
            Key: marshall({ id: PLAN + planId }),
            ConditionExpression:
              "attribute_exists(id) AND (attribute_not_exists(projects) OR size(projects) = :zero)",
            ExpressionAttributeValues: marshall({ ":zero": 0 }),
          }),
        );
        return { outcome: "deleted" as const };
      } catch (err) {
        if (!(err instanceof ConditionalCheckFailedException)) throw err;
      }
      const item = await readItem(this.db, this.tables.plans, { id: PLAN + planId });
      if (!item) return { outcome: "missing" as const };
      const using: string[] = [];
      for (const [projectId, revision] of Object.entries((item.projects ?? {}) as Record<string, number>)) {
        if (!(await this.clearIfStale(planId, projectId, revision, now))) using.push(projectId);
      }
      if (using.length > 0) return { outcome: "in_use" as const, projects: using.sort() };
    }
    throw new ConflictError(`plan ${planId} keeps changing`);
  }

  async getProjectPlan(projectId: string): Promise<ProjectPlan | undefined> {
    const item = await readItem(this.db, this.tables.plans, { id: PROJECT + projectId });
    return item && { projectId, entries: item.entries, revision: item.revision };
  }

  async setProjectPlan(next: ProjectPlan, previous: ProjectPlan | undefined): Promise<void> {
    const revision = (previous?.revision ?? 0) + 1;
    const after = namedPlans(next.entries);
    // References first: from here a delete of these plans is refused.
    for (const planId of after) {
      try {
        await this.reference(planId, next.projectId, revision);
      } catch (err) {
        if (err instanceof ConditionalCheckFailedException)
          throw new ConflictError(`plan ${planId} does not exist`);
        throw err;
      }
    }
    try {
      await this.db.send(
        new PutItemCommand({
          TableName: this.tables.plans,
          Item: marshall({
            id: PROJECT + next.projectId,
            projectId: next.projectId,
            entries: next.entries,
            revision,
          }),
          ConditionExpression:
            previous?.revision === undefined ? "attribute_not_exists(id)" : "revision = :previous",
          ...(previous?.revision === undefined
            ? {}
            : { ExpressionAttributeValues: marshall({ ":previous": previous.revision }) }),
        }),
      );
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException)
        throw new ConflictError(`project ${next.projectId} changed`);
      throw err;
    }
    // The plans dropped: their references, if still the ones the previous write set.
    for (const planId of namedPlans(previous?.entries ?? [])) {
      if (!after.has(planId) && previous?.revision !== undefined) {
        await this.unreference(planId, next.projectId, previous.revision);
      }
    }
  }

  private reference(planId: string, projectId: string, revision: number) {
    return this.db.send(
      new UpdateItemCommand({
        TableName: this.tables.plans,
        Key: marshall({ id: PLAN + planId }),
        UpdateExpression: "SET projects.#p = :revision",
        ConditionExpression: "attribute_exists(id)",
        ExpressionAttributeNames: { "#p": projectId },
        ExpressionAttributeValues: marshall({ ":revision": revision }),
      }),
    );
  }

  /** Removes a reference if it is still `revision`; false when another write changed it. */
  private async unreference(planId: string, projectId: string, revision: number): Promise<boolean> {
    try {
      await this.db.send(
        new UpdateItemCommand({
          TableName: this.tables.plans,
          Key: marshall({ id: PLAN + planId }),
          UpdateExpression: "REMOVE projects.#p",
          ConditionExpression: "projects.#p = :revision",
          ExpressionAttributeNames: { "#p": projectId },
          ExpressionAttributeValues: marshall({ ":revision": revision }),
        }),
      );
      return true;
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return false;
      throw err;
    }
  }

  /**
   * Clears a reference the project's stored entries prove stale: set by a write that has landed or lost
   * (its revision not above the stored one) and naming no plan entry in force at `now` or later. A
   * reference above the stored revision may be a write in flight: it counts.
   */
  private async clearIfStale(
    planId: string,
    projectId: string,
    revision: number,
    now: number,
  ): Promise<boolean> {
    const stored = await this.getProjectPlan(projectId);
    if (revision > (stored?.revision ?? 0)) return false;
    if (namedPlans(liveEntries(stored?.entries ?? [], now)).has(planId)) return false;
    return this.unreference(planId, projectId, revision);
  }
}

function planOf(item: Record<string, unknown>): Plan {
  const { planId, name, createdAt, versions } = item as unknown as Plan;
  return { planId, name, createdAt, versions };
}
