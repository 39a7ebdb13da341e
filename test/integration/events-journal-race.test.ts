import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, expect, it } from "vitest";
import { buildEvent, type CloudEvent } from "../../lambda/core/cloudevent";
import { eventMessage } from "../../lambda/events/delivery";
import { eventsJournalDir } from "../../lambda/local/events";
import { dmtJson, runDmt } from "../support/cli";
import { startTestHost, type TestHost } from "../support/host";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver";

/**
 * CLI commands racing a running server on one data dir: each command's event goes through the data
 * dir's delivery journal, which the server takes over, delivers and removes while other commands open
 * it. A command whose change is applied exits 0, and its event is delivered exactly once.
 */

const COMMANDS = 18;
const AT_ONCE = 6;
/** Segments left by other commands gone meanwhile, written while these run: the server's backlog. */
const BACKLOG = 3_000;
/** No process has this pid (Linux's pid_max is at most 2^22). */
const GONE_PID = 4_194_304 + 11;

let stack: TestHost;
let receiver: WebhookReceiver;

beforeAll(async () => {
  stack = await startTestHost();
  receiver = await startWebhookReceiver();
});

afterAll(async () => {
  await receiver?.close();
  await stack?.stop();
});

it("grants and key creations racing the server all exit 0, each event delivered once", {
  timeout: 900_000,
}, async () => {
  const dir = stack.dataDir;
  await dmtJson(["projects", "create", "racing"], dir);
  const { secret } = await dmtJson<{ secret: string }>(
    ["webhooks", "add", "--project", "racing", "--url", receiver.url],
    dir,
  );
  const commands = Array.from({ length: COMMANDS }, (_, n) =>
    n % 3 === 2
      ? ["keys", "create", "--project", "racing", "--name", `k${n}`]
      : ["credits", "grant", "--project", "racing", "--usd", `${n + 1}`],
  );
  const results: { args: string[]; code: number; stderr: string }[] = [];
  const commandsDone = { now: false };
  let backlog = 0;
  const leftBehind = (async () => {
    while (!commandsDone.now && backlog < BACKLOG) {
      for (let n = 0; n < 100; n++, backlog++) {
        const event = buildEvent(
          { type: "deletion.completed", projectId: "racing", subject: "backlog", data: { n: backlog } },
          Date.now(),
        );
        const name = `${GONE_PID}-${String(backlog).padStart(9, "0")}.jsonl`;
        writeFileSync(join(eventsJournalDir(dir), name), `${eventMessage(event)}\n`);
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  })();
  let next = 0;
  const worker = async () => {
    for (let n = next++; n < commands.length; n = next++) {
      const args = commands[n] as string[];
      const { code, stderr } = await runDmt(args, dir);
      results.push({ args, code, stderr });
    }
  };
  await Promise.all(Array.from({ length: AT_ONCE }, worker));
  commandsDone.now = true;
  await leftBehind;
  expect(results.filter((r) => r.code !== 0)).toEqual([]);

  const total = COMMANDS + backlog;
  await expect
    .poll(() => receiver.received.length, { timeout: 120_000, interval: 100 })
    .toBeGreaterThanOrEqual(total);
  // What a second delivery of an event would take to arrive: the next ticks of the server's queue.
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  const events = receiver.received.map(
    (r) => new Webhook(secret).verify(r.body, r.headers as Record<string, string>) as CloudEvent,
  );
  expect(new Set(events.map((e) => e.id)).size).toBe(events.length);
  expect(events).toHaveLength(total);
  const granted = events
    .filter((e) => e.type === "credits.granted")
    .map((e) => (e.data as { amount_usd: string }).amount_usd);
  const wanted = commands.filter((c) => c[0] === "credits").map((c) => Number(c[5]).toFixed(2));
  expect(granted.sort()).toEqual(wanted.sort());
  expect(events.filter((e) => e.type === "key.created")).toHaveLength(COMMANDS / 3);
  expect(events.filter((e) => e.type === "deletion.completed")).toHaveLength(backlog);
});
