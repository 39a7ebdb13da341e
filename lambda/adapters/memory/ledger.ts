import {
  CLAIM_LEASE_MS,
  type ClaimRequest,
  type Delivery,
  type DeliveryLedger,
  WRITTEN,
} from "../../core/delivery-ledger";
import { MemoryTable } from "./table";

/** An id's latest claim; or a file's outcome. The two never share a key (files hold `/`, ids never). */
type Item = { file: string; claimedAt: number } | { outcome: "committed" | "abandoned" };

/**
 * The delivery ledger in memory, by the protocol of core/delivery-ledger.ts as the DynamoDB adapter
 * keeps it: per id its latest claim (a compare-and-set on the file it was claimed on), per file its
 * outcome; a claim is live while no outcome is known and its lease (CLAIM_LEASE_MS, by the injected
 * clock) runs. Several consumers sharing one object behave as Lambda consumers sharing the table.
 */
export class MemoryDeliveryLedger implements DeliveryLedger {
  private readonly items = new MemoryTable<Item>();

  constructor(private readonly clock: () => number = Date.now) {}

  async lookup(ids: readonly string[]): Promise<Map<string, Delivery>> {
    const now = this.clock();
    const found = new Map<string, Delivery>();
    for (const id of new Set(ids)) {
      const claim = await this.items.get(id);
      if (!claim || !("file" in claim)) continue;
      const file = await this.items.get(claim.file);
      const outcome = file && "outcome" in file ? file.outcome : undefined;
      if (outcome === "committed") {
        found.set(id, WRITTEN);
        continue;
      }
      const live = outcome === undefined && now < claim.claimedAt + CLAIM_LEASE_MS;
      found.set(id, { state: "claimed", file: claim.file, live });
    }
    return found;
  }

  async claim(file: string, requests: readonly ClaimRequest[]): Promise<Set<string>> {
    const claimedAt = this.clock();
    const won = new Set<string>();
    await Promise.all(
      requests.map(async ({ id, replaces }) => {
        const claimed = await this.items.put(id, { file, claimedAt }, (found) => {
          const current = found && "file" in found ? found.file : undefined;
          // Still as the caller saw it, or our own claim already (a retry).
          return current === replaces || current === file;
        });
        if (claimed) won.add(id);
      }),
    );
    return won;
  }

  async commit(file: string): Promise<void> {
    await this.items.put(file, { outcome: "committed" });
  }

  async abandon(file: string): Promise<void> {
    // Never over a commit: a file found there after all stays committed.
    await this.items.put(file, { outcome: "abandoned" }, (found) => found === undefined);
  }
}
