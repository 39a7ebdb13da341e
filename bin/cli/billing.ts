import { meterStatus, resendFailed } from "../../lambda/billing/meter";
import {
  type MeterConnection,
  type MeterTarget,
  parseCustomerId,
  parseMeterName,
} from "../../lambda/core/billing-meter";
import { errors } from "../../lambda/core/errors";
import { type Context, command } from "./command";
import { iso, table } from "./format";
import { flag, oneOf, required, text, UsageError } from "./options";

const project = required("<id>", "the project");
const perUser = flag("bills each call's end user (its user_id) as the customer mapped to it");
const value = oneOf(["cost", "tokens"], "what each event counts: the billed micro-USD (default) or tokens");

/** The project (checked to exist) and the billing exports' store and queue. */
async function opened(open: Context["open"], projectId: string) {
  const services = await open();
  return { projectId: await services.project(projectId), billing: await services.billing() };
}

function connectionLine(c: MeterConnection): string {
  const who = c.perUser
    ? `each end user's ${c.target === "stripe" ? "mapped customer" : "id"}${c.customer ? ` (else ${c.customer})` : ""}`
    : (c.customer ?? c.projectId);
  return `${c.target}: meter '${c.meter}', counting ${c.value === "cost" ? "micro-USD billed" : "tokens"}, for ${who}`;
}

function disconnect(target: MeterTarget) {
  return command({
    name: `billing ${target} disconnect`,
    summary: `stops sending a project's calls to ${target === "stripe" ? "Stripe" : "the OpenMeter endpoint"}; what was sent stays`,
    options: { project },
    examples: [`dmt billing ${target} disconnect --project demo`],
    run: async ({ values, open }) => {
      const { projectId, billing } = await opened(open, values.project);
      if (!(await billing.store.disconnect(projectId, target))) {
        throw errors.notFound(`Project '${projectId}' has no ${target} connection.`);
      }
      return { projectId, target, disconnected: true };
    },
    print: (done) => `Disconnected ${done.projectId} from ${done.target}.`,
  });
}

/** `dmt billing ...`: each managed call's billed amount sent to Stripe meters or an OpenMeter endpoint. */
export const billingCommands = [
  command({
    name: "billing stripe connect",
    summary: "sends each managed call of a project to a Stripe meter, as a meter event",
    details: [
      "Each call's billed amount in micro-USD (or its tokens) goes to the meter's event name as a meter",
      "event whose identifier is the call's transaction id, so a retry never bills twice. The customer is",
      "--customer, or with --per-user the customer `billing stripe map-user` maps to the call's user_id.",
      "The deployment's Stripe key is DMT_STRIPE_SECRET_KEY (locally) or its Secrets Manager secret (AWS).",
    ].join("\n"),
    options: {
      project,
      meter: required("<event name>", "the Stripe meter's event_name"),
      customer: text("<cus_...>", "the project's Stripe customer (required without --per-user)"),
      "per-user": perUser,
      value,
    },
    examples: [
      "dmt billing stripe connect --project demo --meter dmt_usage --customer cus_Q8x2",
      "dmt billing stripe connect --project demo --meter dmt_tokens --per-user --value tokens",
    ],
    run: async ({ values, open }) => {
      const meter = parseMeterName(values.meter);
      const customer = values.customer === undefined ? undefined : parseCustomerId(values.customer);
      if (!customer && !values["per-user"]) throw new UsageError("--customer is required without --per-user");
      const { projectId, billing } = await opened(open, values.project);
      const connection: MeterConnection = {
        projectId,
        target: "stripe",
        meter,
        value: values.value ?? "cost",
        perUser: values["per-user"],
        ...(customer && { customer }),
        createdAt: Date.now(),
      };
      await billing.store.connect(connection);
      return connection;
    },
    print: (c) => `Connected ${c.projectId} to Stripe. ${connectionLine(c)}`,
  }),
  command({
    name: "billing stripe map-user",
    summary: "maps an end user (the calls' user_id) to a Stripe customer, for a --per-user connection",
    options: {
      project,
      user: required("<user id>", "the end user, as calls name it (X-User-ID)"),
      customer: required("<cus_...>", "their Stripe customer"),
    },
    examples: ["dmt billing stripe map-user --project demo --user alice@example.com --customer cus_Q8x2"],
    run: async ({ values, open }) => {
      const customer = parseCustomerId(values.customer);
      if (values.user.length > 256) throw errors.invalidField("user", "at most 256 characters");
      const { projectId, billing } = await opened(open, values.project);
      await billing.store.mapUser(projectId, values.user, customer);
      return { projectId, userId: values.user, customer };
    },
    print: (m) =>
      `Mapped end user '${m.userId}' to ${m.customer}. Their failed events go out with: dmt billing resend --project ${m.projectId}`,
  }),
  command({
    name: "billing stripe unmap-user",
    summary: "removes an end user's Stripe customer",
    options: { project, user: required("<user id>", "the end user") },
    examples: ["dmt billing stripe unmap-user --project demo --user alice@example.com"],
    run: async ({ values, open }) => {
      const { projectId, billing } = await opened(open, values.project);
      if (!(await billing.store.unmapUser(projectId, values.user))) {
        throw errors.notFound(`End user '${values.user}' has no Stripe customer in project '${projectId}'.`);
      }
      return { projectId, userId: values.user, unmapped: true };
    },
    print: (m) => `End user '${m.userId}' has no Stripe customer now.`,
  }),
  disconnect("stripe"),
  command({
    name: "billing openmeter connect",
    summary: "sends each managed call of a project to the OpenMeter endpoint, as a CloudEvent",
    details: [
      "Each call becomes a CloudEvent: id the transaction id, source this deployment (DMT_METER_SOURCE),",
      "type the --meter name, subject the project or, with --per-user, the call's user_id, data the usage",
      "under the OpenTelemetry GenAI names and the cost. The endpoint is DMT_OPENMETER_URL, with the token",
      "DMT_OPENMETER_TOKEN (locally) or its Secrets Manager secret (AWS).",
    ].join("\n"),
    options: {
      project,
      meter: required("<event type>", "the CloudEvent type the endpoint's meters select"),
      "per-user": flag("makes the call's user_id the subject (default: the project)"),
      value,
    },
    examples: ["dmt billing openmeter connect --project demo --meter dmt.usage --per-user"],
    run: async ({ values, open }) => {
      const meter = parseMeterName(values.meter);
      const { projectId, billing } = await opened(open, values.project);
      const connection: MeterConnection = {
        projectId,
        target: "openmeter",
        meter,
        value: values.value ?? "cost",
        perUser: values["per-user"],
        createdAt: Date.now(),
      };
      await billing.store.connect(connection);
      return connection;
    },
    print: (c) => `Connected ${c.projectId} to the OpenMeter endpoint. ${connectionLine(c)}`,
  }),
  disconnect("openmeter"),
  command({
    name: "billing status",
    summary: "a project's billing connections: events sent, waiting and failed, and why the latest failed",
    options: { project },
    examples: ["dmt billing status --project demo", "dmt billing status --project demo --json"],
    run: async ({ values, open }) => {
      const { projectId, billing } = await opened(open, values.project);
      return meterStatus(billing.store, projectId);
    },
    print: (status) => {
      if (status.connections.length === 0) {
        return `Project ${status.projectId} has no billing connection (dmt billing stripe connect --help).`;
      }
      return status.connections
        .map((c) =>
          [
            connectionLine(c),
            `  sent ${c.counts.sent}, waiting ${c.counts.waiting}, failed ${c.counts.failed}`,
            ...(c.failed.length > 0
              ? [
                  "",
                  table(
                    c.failed.map((f) => ({
                      transaction: f.transactionId,
                      user: f.userId ?? undefined,
                      call_ended: iso(f.endedAt),
                      error: f.lastError,
                    })),
                    ["transaction", "user", "call_ended", "error"],
                  ),
                  "",
                  `  resend after a fix: dmt billing resend --project ${status.projectId} --target ${c.target}`,
                ]
              : []),
          ].join("\n"),
        )
        .join("\n\n");
    },
  }),
  command({
    name: "billing resend",
    summary: "sends a project's failed meter events again, with their same ids (after a mapping is fixed)",
    options: {
      project,
      target: oneOf(["stripe", "openmeter"], "which connection's events (default stripe)"),
    },
    examples: ["dmt billing resend --project demo", "dmt billing resend --project demo --target openmeter"],
    run: async ({ values, open }) => {
      const { projectId, billing } = await opened(open, values.project);
      const target = values.target ?? "stripe";
      return { projectId, target, ...(await resendFailed(billing, projectId, target)) };
    },
    print: (r) =>
      r.queued === 0
        ? `No failed ${r.target} events in ${r.projectId}.`
        : `Queued ${r.queued} failed ${r.target} events of ${r.projectId} again; see dmt billing status --project ${r.projectId}.`,
  }),
];
