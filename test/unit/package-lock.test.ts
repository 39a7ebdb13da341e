import { readFileSync } from "node:fs";
import { expect, it } from "vitest";

/**
 * The committed lock file is the one a fresh clone's `npm install` writes, so that install leaves
 * `git status` clean. npm 11 drops other platforms' optional packages (biome's and DuckDB's binaries
 * for macOS, Windows, musl...) from the lock when a package is added with node_modules present; the
 * next fresh install puts them back and dirties the clone. `rm -rf node_modules && npm install` writes
 * them back.
 */

interface Locked {
  optionalDependencies?: Record<string, string>;
}

it("locks every optional dependency, for every platform", () => {
  const lock = JSON.parse(readFileSync("package-lock.json", "utf8")) as { packages: Record<string, Locked> };
  const paths = Object.keys(lock.packages);
  const missing = Object.entries(lock.packages).flatMap(([path, entry]) =>
    Object.keys(entry.optionalDependencies ?? {})
      .filter((name) => !paths.some((p) => p.endsWith(`node_modules/${name}`)))
      .map((name) => `${path || "(root)"} -> ${name}`),
  );
  expect(missing).toEqual([]);
});
