import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { createRequire } from "node:module";
import type { AddressInfo } from "node:net";
import { parquetReadObjects } from "hyparquet";
import { ByteWriter } from "hyparquet-writer";
import { writeRleBitPackedHybrid } from "hyparquet-writer/src/encoding.js";
import { snappyCompress } from "hyparquet-writer/src/snappy.js";
import { RequestAbortedError } from "undici/lib/core/errors.js";
import { parseHeaders } from "undici/lib/core/util.js";
import Pool from "undici/lib/dispatcher/pool.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parquetCodec } from "../../lambda/adapters/parquet/codec";
import { buildRecord } from "../../lambda/core/record";
import { emptyUsage } from "../../lambda/core/usage";
import { dynaliteAbstractLevel } from "../../lambda/local/dynalite-iterators.mjs";

/**
 * Three dependencies are used below their public API: undici's handler interface and internal modules
 * (the upstream client), hyparquet-writer's page writers (the Parquet codec), dynalite's validations,
 * actions and store (the local store's port, caches and iterator fix). They are pinned to one version
 * each, and each behaviour we rely on has a test here that fails when an upgrade changes it.
 */
const manifest = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
  dependencies: Record<string, string>;
};
const lock = JSON.parse(readFileSync(new URL("../../package-lock.json", import.meta.url), "utf8")) as {
  packages: Record<string, { version: string }>;
};

describe("pinned dependencies", () => {
  it.each(["undici", "hyparquet-writer", "hyparquet", "dynalite"])(
    "%s is pinned to the locked version",
    (name) => {
      const pinned = manifest.dependencies[name];
      expect(pinned, `${name} in package.json`).toMatch(/^\d+\.\d+\.\d+$/);
      expect(lock.packages[`node_modules/${name}`]?.version).toBe(pinned);
    },
  );
});

describe("undici's handler interface, as lambda/adapters/undici/client.ts drives it", () => {
  let server: Server;
  let origin: string;
  beforeAll(async () => {
    server = createServer((_req, res) => {
      res.writeHead(200, { "X-Vendor": "a", "set-cookie": ["x=1", "y=2"] });
      res.write("first,");
      setImmediate(() => res.end("second"));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  /** Dispatches one GET with a handler that records each callback; `pauseFirst` answers false once. */
  function exchange(options: { pauseFirst?: boolean; abortAtConnect?: boolean }) {
    const pool = new Pool(origin, {});
    const seen: string[] = [];
    let resumeBody: (() => void) | undefined;
    const done = new Promise<{ status?: number; headers?: Record<string, string | string[]>; body: string }>(
      (resolve, reject) => {
        let body = "";
        let status: number | undefined;
        let headers: Record<string, string | string[]> | undefined;
        pool.dispatch(
          { method: "GET", path: "/", headers: {}, body: null },
          {
            onConnect(abort: (reason: Error) => void) {
              seen.push("connect");
              if (options.abortAtConnect) abort(new RequestAbortedError());
            },
            onHeaders(code: number, raw: Buffer[], resume: () => void) {
              seen.push("headers");
              status = code;
              headers = parseHeaders(raw);
              resumeBody = resume;
              return true;
            },
            onData(chunk: Buffer) {
              seen.push("data");
              body += chunk.toString();
              if (options.pauseFirst && seen.filter((s) => s === "data").length === 1) {
                setImmediate(() => {
                  seen.push("resume");
                  resumeBody?.();
                });
                return false;
              }
              return true;
            },
            onComplete() {
              seen.push("complete");
              resolve({ ...(status !== undefined && { status }), ...(headers && { headers }), body });
            },
            onError(error: Error) {
              seen.push("error");
              reject(error);
            },
          },
        );
      },
    );
    return { seen, done: done.finally(() => pool.destroy()) };
  }

  it("calls connect, headers, data and complete in order, with raw headers parseHeaders reads", async () => {
    const { seen, done } = exchange({});
    const answer = await done;
    expect(answer.status).toBe(200);
    expect(answer.headers?.["x-vendor"]).toBe("a");
    expect(answer.headers?.["set-cookie"]).toEqual(["x=1", "y=2"]);
    expect(answer.body).toBe("first,second");
    expect(seen[0]).toBe("connect");
    expect(seen[1]).toBe("headers");
    expect(seen.at(-1)).toBe("complete");
  });

  it("pauses the socket when onData answers false until the headers' resume is called", async () => {
    const { seen, done } = exchange({ pauseFirst: true });
    expect((await done).body).toBe("first,second");
    // Nothing more was read while paused: the next callback after the first chunk is our resume.
    expect(seen.slice(seen.indexOf("data"), seen.indexOf("data") + 2)).toEqual(["data", "resume"]);
  });

  it("an abort at connect fails the exchange with undici's own aborted error", async () => {
    const { done } = exchange({ abortAtConnect: true });
    await expect(done).rejects.toMatchObject({ code: "UND_ERR_ABORTED" });
  });
});

describe("hyparquet-writer's page writers, as lambda/adapters/parquet/codec.ts uses them", () => {
  it("the codec's file reads back through hyparquet, row for row", async () => {
    const records = ["txn-1", "txn-2"].map((transactionId) =>
      buildRecord({
        transactionId,
        projectId: "proj-deps",
        keyId: "abcdefghijklmnop",
        vendor: "openai",
        endpoint: "/v1/chat/completions",
        model: "gpt-4o-mini",
        billingMode: "managed",
        statusCode: 200,
        streamed: false,
        startedAt: Date.UTC(2026, 11, 1),
        latencyMs: 100,
        usage: { ...emptyUsage(), inputTokens: 10, outputTokens: 5 },
        costMicros: 7,
        request: { text: "{}", bytes: 2, truncated: false },
        response: { text: "{}", bytes: 2, truncated: false },
        store: "full",
      }),
    );
    const file = parquetCodec.encode(records);
    const bytes = file.buffer.slice(file.byteOffset, file.byteOffset + file.byteLength) as ArrayBuffer;
    const rows = await parquetReadObjects({ file: bytes, columns: ["transaction_id"] });
    expect(rows).toEqual([{ transaction_id: "txn-1" }, { transaction_id: "txn-2" }]);
  });

  it("ByteWriter, the RLE/bit-packed hybrid and snappy keep their signatures", () => {
    const out = new ByteWriter(8);
    writeRleBitPackedHybrid(out, [1, 1, 1, 1, 0, 1], 1);
    expect(out.getBuffer().byteLength).toBeGreaterThan(0);
    const compressed = snappyCompress(new TextEncoder().encode("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
    expect(compressed.byteLength).toBeLessThan(32);
  });
});

describe("dynalite's internals, as lambda/local/dynalite-*.mjs use them", () => {
  const fromDynalite = createRequire(createRequire(import.meta.url).resolve("dynalite"));

  it("has the validations, actions and store modules the local store's port calls directly", () => {
    const validations = fromDynalite("./validations") as { toLowerFirst(s: string): string };
    for (const operation of ["GetItem", "PutItem", "UpdateItem", "Query", "Scan", "BatchWriteItem"]) {
      const name = validations.toLowerFirst(operation);
      expect(typeof fromDynalite(`./actions/${name}`)).toBe("function");
      expect(fromDynalite(`./validations/${name}`)).toBeTypeOf("object");
    }
    expect(typeof (fromDynalite("./db") as { create: unknown }).create).toBe("function");
  });

  it("its LevelDB iterators still lack return(), which the iterator fix adds (remove the fix when this fails)", () => {
    const common = Object.getPrototypeOf(dynaliteAbstractLevel().AbstractIterator.prototype);
    const own = Object.getOwnPropertyDescriptor(common, "return");
    // Either untouched (no return at all) or the fix's own definition, which closes the iterator.
    if (own) expect(own.value.toString()).toContain("this.close()");
    else expect(common.return).toBeUndefined();
  });
});
