import { describe, expect, it } from "vitest";
import { CLAIM_LEASE_MS, type DeliveryLedger } from "../../../lambda/core/delivery-ledger";

export interface DeliveryLedgerOptions {
  /** Claims end with their lease (CLAIM_LEASE_MS) by the clock: ledgers shared by several consumers. */
  claimsExpire: boolean;
}

/**
 * The cases every adapter of the delivery ledger (`core/delivery-ledger.ts`) must pass. `open` gives a
 * fresh ledger on the clock given.
 */
export function deliveryLedgerContract(
  name: string,
  open: (clock: () => number) => Promise<DeliveryLedger>,
  options: DeliveryLedgerOptions,
): void {
  describe(`delivery ledger contract: ${name}`, () => {
    let serial = 0;
    const unique = (prefix: string) => `${prefix}-${Math.random().toString(36).slice(2)}-${++serial}`;

    it("knows exactly the written ids, across more ids than one request carries", async () => {
      const ledger = await open(() => Date.UTC(2026, 0, 15));
      const ids = Array.from({ length: 130 }, (_, i) => `t-${Math.random().toString(36).slice(2)}-${i}`);
      expect(await ledger.lookup(ids)).toEqual(new Map());
      const file = `interactions/project=p/dt=2026-01-15/${ids[0]}.parquet`;
      const claimed = ids.slice(0, 120);
      expect(
        await ledger.claim(
          file,
          claimed.map((id) => ({ id })),
        ),
      ).toEqual(new Set(claimed));
      await ledger.commit(file);
      await ledger.commit(file);
      const found = await ledger.lookup([...ids, ids[0] as string]);
      expect([...found.keys()].sort()).toEqual(claimed.sort());
      expect([...found.values()].every((d) => d.state === "written")).toBe(true);
    });

    it("moves a claim only from the file the caller saw", async () => {
      const ledger = await open(() => Date.UTC(2026, 0, 15, 12));
      const [a, b] = [unique("a"), unique("b")];
      const [one, two] = [`f/${unique("one")}`, `f/${unique("two")}`];
      expect(await ledger.claim(one, [{ id: a }, { id: b }])).toEqual(new Set([a, b]));
      expect(await ledger.lookup([a])).toEqual(new Map([[a, { state: "claimed", file: one, live: true }]]));
      expect(await ledger.claim(two, [{ id: a }, { id: b, replaces: "f/other" }])).toEqual(new Set());
      await ledger.abandon(one);
      expect(await ledger.claim(two, [{ id: a, replaces: one }])).toEqual(new Set([a]));
      expect(await ledger.lookup([a, b])).toEqual(
        new Map([
          [a, { state: "claimed", file: two, live: true }],
          [b, { state: "claimed", file: one, live: false }],
        ]),
      );
    });

    it("of two writers claiming the same ids at once, each id goes to one", async () => {
      const ledger = await open(() => Date.UTC(2026, 0, 15, 12));
      const ids = Array.from({ length: 20 }, () => unique("race"));
      const [first, second] = await Promise.all([
        ledger.claim(
          `f/${unique("first")}`,
          ids.map((id) => ({ id })),
        ),
        ledger.claim(
          `f/${unique("second")}`,
          [...ids].reverse().map((id) => ({ id })),
        ),
      ]);
      expect([...first, ...second].sort()).toEqual([...ids].sort());
    });

    it("never abandons a committed file", async () => {
      const ledger = await open(() => Date.UTC(2026, 0, 15, 12));
      const id = unique("kept");
      const file = `f/${unique("kept")}`;
      await ledger.claim(file, [{ id }]);
      await ledger.commit(file);
      await ledger.abandon(file);
      expect(await ledger.lookup([id])).toEqual(new Map([[id, { state: "written" }]]));
    });

    // A ledger whose claims live per process (the file ledger) has no lease to run out: no case, not a skipped one.
    if (options.claimsExpire) {
      it("ends a claim whose file never came once its lease ran out", async () => {
        let now = Date.UTC(2026, 0, 15, 12);
        const ledger = await open(() => now);
        const id = unique("leased");
        const file = `f/${unique("leased")}`;
        await ledger.claim(file, [{ id }]);
        now += CLAIM_LEASE_MS - 1;
        expect(await ledger.lookup([id])).toEqual(new Map([[id, { state: "claimed", file, live: true }]]));
        now += 1;
        expect(await ledger.lookup([id])).toEqual(new Map([[id, { state: "claimed", file, live: false }]]));
        // Its writer, back, retries its own claim: it still holds it.
        expect(await ledger.claim(file, [{ id }])).toEqual(new Set([id]));
      });
    }
  });
}
