import { describe, expect, it } from "vitest";
import { findProjectKey, keyNames } from "../../../lambda/core/key-names";
import type { ApiKeyRecord } from "../../../lambda/core/model";

const key = (keyId: string, projectId: string, name: string): ApiKeyRecord => ({
  keyId,
  projectId,
  name,
  secretHash: "0".repeat(64),
  createdAt: 0,
  revoked: false,
});

const KEYS = [
  key("aaaaaaaaaaaaaaaa", "acme", "laptop"),
  key("bbbbbbbbbbbbbbbb", "acme", "twin"),
  key("cccccccccccccccc", "acme", "twin"),
  key("dddddddddddddddd", "other", "laptop"),
];
const store = {
  listKeys: async (projectId: string) => KEYS.filter((k) => k.projectId === projectId),
  getKey: async (keyId: string) => KEYS.find((k) => k.keyId === keyId),
};

describe("findProjectKey", () => {
  it("finds a key by its id, or by a name no other key of the project has", async () => {
    expect((await findProjectKey(store, "acme", "bbbbbbbbbbbbbbbb")).keyId).toBe("bbbbbbbbbbbbbbbb");
    // Another project's key of the same name does not make the name ambiguous here.
    expect((await findProjectKey(store, "acme", "laptop")).keyId).toBe("aaaaaaaaaaaaaaaa");
    expect((await findProjectKey(store, "other", "laptop")).keyId).toBe("dddddddddddddddd");
  });

  it("refuses a name two keys share, naming both ids", async () => {
    await expect(findProjectKey(store, "acme", "twin")).rejects.toThrow(
      "Invalid field 'key': 'twin' names 2 keys of project 'acme' (bbbbbbbbbbbbbbbb, cccccccccccccccc): give the key's id",
    );
  });

  it("refuses another project's key and a key that no id or name matches", async () => {
    await expect(findProjectKey(store, "acme", "dddddddddddddddd")).rejects.toThrow(
      "key dddddddddddddddd belongs to another project, not 'acme'",
    );
    await expect(findProjectKey(store, "acme", "desk")).rejects.toMatchObject({
      status: 404,
      message: "Project 'acme' has no key with the id or name 'desk'.",
    });
  });
});

it("keyNames maps ids to names", () => {
  expect(keyNames(KEYS).get("cccccccccccccccc")).toBe("twin");
});
