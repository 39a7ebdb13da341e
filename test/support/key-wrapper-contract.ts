import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DecryptionError, type KeyWrapper } from "../../lambda/core/crypto";

export interface KeyWrapperUnderTest {
  wrapper: KeyWrapper;
  /** The same adapter over another master key. */
  other: KeyWrapper;
  close(): Promise<void>;
}

/** The cases every adapter of the key wrapper port (`core/crypto.ts`) must pass. */
export function keyWrapperContract(name: string, make: () => Promise<KeyWrapperUnderTest>): void {
  describe(`key wrapper contract: ${name}`, () => {
    let subject: KeyWrapperUnderTest;
    beforeAll(async () => {
      subject = await make();
    });
    afterAll(() => subject.close());

    it("unwraps a data key under the context it was wrapped with", async () => {
      const { plaintext, wrapped } = await subject.wrapper.generateDataKey("proj-1/openai");
      expect(plaintext).toHaveLength(32);
      expect(Buffer.from(wrapped).includes(plaintext)).toBe(false);
      expect(await subject.wrapper.unwrap(wrapped, "proj-1/openai")).toEqual(plaintext);
    });

    it("makes a fresh data key every time", async () => {
      const a = await subject.wrapper.generateDataKey("proj-1/openai");
      const b = await subject.wrapper.generateDataKey("proj-1/openai");
      expect(a.plaintext.equals(b.plaintext)).toBe(false);
    });

    it("refuses another context", async () => {
      const { wrapped } = await subject.wrapper.generateDataKey("proj-1/openai");
      await expect(subject.wrapper.unwrap(wrapped, "proj-2/openai")).rejects.toBeInstanceOf(DecryptionError);
    });

    it("refuses another master key", async () => {
      const { wrapped } = await subject.wrapper.generateDataKey("proj-1/openai");
      await expect(subject.other.unwrap(wrapped, "proj-1/openai")).rejects.toBeInstanceOf(DecryptionError);
    });

    it("refuses bytes that are no wrapped key", async () => {
      const { wrapped } = await subject.wrapper.generateDataKey("proj-1/openai");
      const tampered = Uint8Array.from(wrapped);
      tampered[tampered.length - 1] = (tampered[tampered.length - 1] ?? 0) ^ 1;
      await expect(subject.wrapper.unwrap(tampered, "proj-1/openai")).rejects.toBeInstanceOf(DecryptionError);
    });
  });
}
