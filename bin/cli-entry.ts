/**
 * The `dmt` command's entry (bin/dmt.mjs runs it, as the bundle's dmt.js or through tsx): `--version`
 * is answered here, before anything else loads; every other command runs from cli.ts.
 */

/** Set by the bundle (bin/build-cli.mjs); under tsx, package.json is read. */
declare const DMT_VERSION: string | undefined;

/** The package's version. */
async function version(): Promise<string> {
  if (typeof DMT_VERSION === "string") return DMT_VERSION;
  const { readFile } = await import("node:fs/promises");
  const pkg = JSON.parse(await readFile(new URL("../package.json", import.meta.url), "utf8")) as {
    version: string;
  };
  return pkg.version;
}

const first = process.argv[2];
if (first === "--version" || first === "-v") process.stdout.write(`dmt ${await version()}\n`);
else await import("./cli");
