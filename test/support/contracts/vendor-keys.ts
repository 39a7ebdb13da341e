import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DecryptionError } from "../../../lambda/core/crypto";
import { ApiError } from "../../../lambda/core/errors";
import type { VendorKeyStore } from "../../../lambda/core/vendor-keys";
import type { VendorName } from "../../../lambda/core/vendor-names";

export interface VendorKeysUnderTest {
  store: VendorKeyStore;
  /** The same records read with another master key. */
  withOtherMasterKey(): VendorKeyStore;
  /** Every stored record, as stored: to look for plaintext where there must be none. */
  stored(): Promise<unknown[]>;
  /** Copies a stored record, as it is, under another project: a thief's move. */
  copy(projectId: string, vendor: VendorName, toProjectId: string): Promise<void>;
  close(): Promise<void>;
}

const T0 = 1_700_000_000_000;

/**
 * The cases every adapter of the vendor-key port (`core/vendor-keys.ts`) must pass: keys stored
 * sealed and bound to their project and vendor, listed by their last 4 characters only, bad keys
 * refused without echoing them.
 */
export function vendorKeysContract(
  name: string,
  make: (clock: () => number) => Promise<VendorKeysUnderTest>,
): void {
  describe(`vendor keys contract: ${name}`, () => {
    let now = T0;
    const clock = () => now;
    let subject: VendorKeysUnderTest;
    beforeAll(async () => {
      subject = await make(clock);
    });
    afterAll(() => subject.close());
    const store = () => subject.store;
    const secret = `sk-proj-${randomBytes(24).toString("base64url")}`;

    it("stores encrypted, lists the last 4 only, reveals for forwarding, replaces and deletes", async () => {
      now = T0;
      const project = "vk-project-one";
      const view = await store().set(project, "openai", secret);
      expect(view).toEqual({
        projectId: project,
        vendor: "openai",
        last4: secret.slice(-4),
        createdAt: T0,
        updatedAt: T0,
      });

      await store().set(project, "groq", `gsk_${"a".repeat(40)}wxyz`);
      expect(await store().list(project)).toEqual([
        { projectId: project, vendor: "groq", last4: "wxyz", createdAt: T0, updatedAt: T0 },
        view,
      ]);
      expect(JSON.stringify(await store().list(project))).not.toContain(secret);
      expect(await store().reveal(project, "openai")).toBe(secret);
      expect(await store().reveal(project, "anthropic")).toBeUndefined();
      expect(await store().reveal("vk-other-project", "openai")).toBeUndefined();

      now = T0 + 5000;
      const replaced = `sk-proj-${randomBytes(24).toString("base64url")}`;
      expect(await store().set(project, "openai", replaced)).toMatchObject({
        createdAt: T0,
        updatedAt: T0 + 5000,
      });
      expect(await store().reveal(project, "openai")).toBe(replaced);

      expect(await store().delete(project, "groq")).toBe(true);
      expect(await store().delete(project, "groq")).toBe(false);
      expect((await store().list(project)).map((k) => k.vendor)).toEqual(["openai"]);
      await store().set(project, "openai", secret);
    });

    it("keeps no plaintext in what it stores", async () => {
      const project = `vk-stored-${randomBytes(6).toString("hex")}`;
      await store().set(project, "anthropic", secret);
      const forms = [secret, Buffer.from(secret).toString("base64"), Buffer.from(secret).toString("hex")];
      const stored = (await subject.stored()).map((item) =>
        JSON.stringify(item, (_, value) =>
          value instanceof Uint8Array ? Buffer.from(value).toString("base64") : value,
        ),
      );
      const mine = stored.filter((item) => item.includes(project));
      expect(mine).toHaveLength(1);
      for (const form of forms) for (const item of stored) expect(item).not.toContain(form);
    });

    it("does not decrypt with another master key, nor as another project's key", async () => {
      const project = "vk-project-two";
      await store().set(project, "gemini", `AIza${"Q".repeat(35)}`);
      await expect(subject.withOtherMasterKey().reveal(project, "gemini")).rejects.toThrow(DecryptionError);
      // The same record copied under another project fails its authentication.
      await subject.copy(project, "gemini", "vk-thief");
      await expect(store().reveal("vk-thief", "gemini")).rejects.toThrow(DecryptionError);
    });

    it.each([
      ["a vendor we do not know", "azure", secret, "'vendor'"],
      ["a trailing newline", "openai", `${secret}\n`, "whitespace"],
      ["an inner space", "openai", "sk-proj abcdefghijklmnop", "whitespace"],
      ["a control character", "openai", "sk-proj-\u0007abcdefghijklmnop", "control characters"],
      ["a key too short", "openai", "sk-1234", "16 to 512"],
    ])("refuses %s with 400 and stores nothing", async (_label, vendor, key, why) => {
      const project = `vk-bad-${randomBytes(4).toString("hex")}`;
      const err = await store()
        .set(project, vendor, key)
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ApiError);
      expect((err as ApiError).status).toBe(400);
      expect((err as ApiError).message).toContain(why);
      expect((err as ApiError).message).not.toContain(key.trim());
      expect(await store().list(project)).toEqual([]);
    });
  });
}
