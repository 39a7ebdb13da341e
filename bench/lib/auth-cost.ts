import { authenticate } from "../../lambda/core/auth";
import { presentedCredentials } from "../../lambda/core/credentials";
import { CachedKeyLookup } from "../../lambda/core/key-cache";
import type { Store } from "../../lambda/core/ports";

export interface AuthCost {
  iterations: number;
  opsPerSecond: number;
  cpuMicrosPerOp: number;
  wallMicrosPerOp: number;
}

/**
 * CPU cost of authenticating a request whose key is in the cache: credential parsing, key parsing,
 * the cached lookup, the constant-time hash comparison and the endpoint check. The median of `rounds`.
 */
export async function measureCachedAuth(
  store: Store,
  key: string,
  iterations = 100_000,
  rounds = 5,
): Promise<AuthCost> {
  const keys = new CachedKeyLookup(store, 3_600_000);
  const headers: Record<string, string> = { authorization: `Bearer ${key}` };
  const source = {
    header: (name: string) => headers[name],
    query: () => undefined,
    geminiFamily: false,
  };
  const once = () => authenticate(presentedCredentials(source), "api:/api/v1/status", keys, Date.now());
  await once(); // warms the cache: the only store read
  for (let i = 0; i < iterations / 10; i++) await once(); // and the JIT

  const results: AuthCost[] = [];
  for (let round = 0; round < rounds; round++) {
    const cpuBefore = process.cpuUsage();
    const wallBefore = process.hrtime.bigint();
    for (let i = 0; i < iterations; i++) await once();
    const wallMicros = Number(process.hrtime.bigint() - wallBefore) / 1000;
    const cpu = process.cpuUsage(cpuBefore);
    results.push({
      iterations,
      opsPerSecond: iterations / (wallMicros / 1e6),
      cpuMicrosPerOp: (cpu.user + cpu.system) / iterations,
      wallMicrosPerOp: wallMicros / iterations,
    });
  }
  results.sort((a, b) => a.cpuMicrosPerOp - b.cpuMicrosPerOp);
  return results[Math.floor(results.length / 2)] as AuthCost;
}
