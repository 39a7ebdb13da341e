import { describe, expect, it } from "vitest";
import { startTestHost } from "../support/host";

const GEMINI_PATH = "/gemini/v1beta/models/gemini-2.5-flash:generateContent";
const GEMINI_BODY = '{"contents":[{"parts":[{"text":"a secret prompt"}]}]}';

describe("local server access log", () => {
  it("prints one line per request: method, path without query, status, ms, transaction id; no key", async () => {
    const lines: string[] = [];
    const stack = await startTestHost({ DMT_ACCESS_LOG: "on" }, undefined, {
      accessLog: (line) => lines.push(line),
    });
    const { key } = await stack.newKey();
    const byQuery = await fetch(`${stack.url}${GEMINI_PATH}?key=${key}&alt=sse`, {
      method: "POST",
      body: GEMINI_BODY,
    });
    expect(byQuery.status).toBe(200);
    await byQuery.arrayBuffer();
    const transactionId = byQuery.headers.get("x-dmt-transaction-id");
    expect(transactionId).toBeTruthy();
    const refused = await fetch(`${stack.url}/openai/v1/chat/completions`, {
      method: "POST",
      headers: { Authorization: `Bearer ${key}x`, "Content-Type": "application/json" },
      body: '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"a secret prompt"}]}',
    });
    expect(refused.status).toBe(401);
    await refused.arrayBuffer();
    // Closing waits for every request in flight, so every line is written by then.
    await stack.stop();

    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(new RegExp(`^POST ${GEMINI_PATH} 200 \\d+ms ${transactionId}\\n$`));
    expect(lines[1]).toMatch(/^POST \/openai\/v1\/chat\/completions 401 \d+ms( \S+)?\n$/);
    const secret = key.slice(key.lastIndexOf("_") + 1);
    for (const line of lines) {
      expect(line).not.toContain(secret);
      expect(line).not.toContain("dmt_");
      expect(line).not.toContain("?");
      expect(line).not.toContain("secret prompt");
    }
  });

  it("prints nothing when DMT_ACCESS_LOG is off (the test host's default)", async () => {
    const lines: string[] = [];
    const stack = await startTestHost({}, undefined, { accessLog: (line) => lines.push(line) });
    const { key } = await stack.newKey();
    const res = await fetch(`${stack.url}${GEMINI_PATH}?key=${key}`, { method: "POST", body: GEMINI_BODY });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    await stack.stop();
    expect(lines).toEqual([]);
  });
});
