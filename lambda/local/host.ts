import type { Hono, MiddlewareHandler } from "hono";
import type { DynamoDBClient } from "../adapters/dynamodb/client";
import { DynamoPorts } from "../adapters/dynamodb/ports";
import { LocalMasterKey, localUserIdHasher } from "../adapters/fs/master-key";
import { activePriceCatalogue } from "../adapters/fs/price-catalogue";
import type { InProcessQueue } from "../adapters/in-process/queue";
import { createUpstreamClient } from "../adapters/undici/client";
import type { AppEnv } from "../app/env";
import { createRootApp } from "../app/root";
import { composeKeyAuth } from "../compose/authorizer";
import { composeDataApi } from "../compose/data-api";
import { composeEvents, type Events, type EventsSettings } from "../compose/events";
import type { Infrastructure } from "../compose/infrastructure";
import { composePayments } from "../compose/payments";
import { composeProxy } from "../compose/proxy";
import { composeSweeper } from "../compose/sweeper";
import { type AuthContext, authenticate } from "../core/auth";
import { meterConfigOf } from "../core/billing-meter";
import type { ProxyHooks } from "../core/call";
import { presentedCredentials } from "../core/credentials";
import { endpointOf } from "../core/endpoints";
import { errors } from "../core/errors";
import { errorFields, type Logger } from "../core/logger";
import { noMetrics } from "../core/metrics";
import type { KeyLookup, Store } from "../core/ports";
import type { UpstreamClient } from "../core/upstream";
import { VENDOR_NAMES, type VendorName } from "../core/vendor-model";
import { type Sweeper, startSweeper } from "../metering/sweeper";
import { otlpSettings } from "../telemetry/config";
import { VENDOR_DEFINITIONS } from "../vendors";
import { type LocalConfig, localStripeSettings, vendorSettings } from "./config";
import { type LocalEventsOptions, openLocalEvents } from "./events";
import { createHttpServer } from "./http-server";
import { type DashboardSignIn, localDashboard } from "./oidc-dashboard";
import { type Simulator, startSimulator } from "./simulator";
import { type LocalStore, openLocalStore } from "./store";
import { startThreadedWarehouse } from "./warehouse-thread";

/** A long-lived process notes finished calls' charges on the store in batches, once a second at most. */
const NOTE_CHARGES_MS = 1000;

export interface EmbeddedHost {
  url: string;
  port: number;
  store: Store;
  /** The store's client: what the service's store round trips go through. */
  db: DynamoDBClient;
  /** Vendors answered by the built-in simulator (no key or upstream configured). */
  simulatedVendors: VendorName[];
  /** Where the dashboard is and the development user that signs in to it. */
  dashboard: DashboardSignIn;
  /** Events, alert rules, webhooks and their delivery, over the in-process queue (lambda/local/events.ts). */
  events: Events & { queue: InProcessQueue };
  /** Resolves once the after-work of every call answered so far is done: credit leases settled, records written to the warehouse. */
  drain(): Promise<void>;
  close(): Promise<void>;
}

export interface EmbeddedHostOptions {
  /** Where access-log lines go when DMT_ACCESS_LOG is on: stdout unless a test reads them. */
  accessLog?: (line: string) => void;
  /** The clock of metering (rate limits, holds, idempotency records); tests inject one. */
  clock?: () => number;
  /** More proxy hooks, run after metering's, which they see on the call (the warehouse's record). */
  hooks?: ProxyHooks[];
  /** Webhook delivery: the waits before retries (the default spans over an hour) and the receiver's time. */
  webhooks?: Pick<LocalEventsOptions, "webhookTimeoutMs"> & EventsSettings;
  /**
   * The server's store client is the AWS SDK's, as in Lambda, not the lean one (dynalite-client.ts):
   * for tests that act inside the SDK's request pipeline, such as store faults inside its retry loop.
   */
  sdkStoreClient?: boolean;
}

/** The whole service in one process: the same apps the Lambda handlers wrap, over embedded parts. */
export async function startEmbeddedHost(
  config: LocalConfig,
  logger: Logger,
  options: EmbeddedHostOptions = {},
): Promise<EmbeddedHost> {
  // First: a bad price file stops the start before anything runs, naming the model and field.
  const prices = activePriceCatalogue({
    DMT_PRICES_OVERRIDE: config.DMT_PRICES_OVERRIDE,
    DMT_PRICE_MARKUP: config.DMT_PRICE_MARKUP,
  });
  const local = await openLocalStore(config.dataDir, config.DMT_DYNAMODB_ENDPOINT, {
    sdkClient: options.sdkStoreClient,
    log: (line) => logger.info(line),
  });
  // What the start opens is closed again, newest first, if a later step fails: the store's and the
  // warehouse's worker threads and the simulator's server would otherwise keep the process alive.
  const opened: (() => Promise<unknown>)[] = [() => local.close()];
  try {
    return await startOnStore(config, logger, options, prices, local, opened);
  } catch (err) {
    // The start's own error is the one reported; a part that also fails to close is only logged.
    for (const close of opened.reverse()) {
      await close().catch((closeErr: unknown) =>
        logger.warn("a part the failed start opened did not close", errorFields(closeErr)),
      );
    }
    throw err;
  }
}

/** The rest of the start, over the open store; each part it opens goes on `opened`. */
async function startOnStore(
  config: LocalConfig,
  logger: Logger,
  options: EmbeddedHostOptions,
  prices: ReturnType<typeof activePriceCatalogue>,
  local: LocalStore,
  opened: (() => Promise<unknown>)[],
): Promise<EmbeddedHost> {
  const clock = options.clock ?? Date.now;
  const store = new DynamoPorts(
    local.db,
    local.tables,
    () => LocalMasterKey.inDataDir(config.dataDir),
    clock,
  );
  const { keys, usage } = composeKeyAuth({ store, logger }, config.DMT_KEY_CACHE_MS);
  const auth = requireKey({ keys, clock: Date.now, onAuthenticated: (a) => usage.touch(a.keyId) });

  const eventParts = await openLocalEvents({
    dataDir: config.dataDir,
    db: local.db,
    tables: local.tables,
    logger,
    clock,
    ...(options.webhooks?.webhookTimeoutMs !== undefined && {
      webhookTimeoutMs: options.webhooks.webhookTimeoutMs,
    }),
  });
  opened.push(() => eventParts.stop());

  // Every finished call becomes one interaction record: queued, written to Parquet within the flush interval.
  // Once written, the dashboard's index and daily rollups get it too; that work runs in a worker thread.
  const warehouse = await startThreadedWarehouse({
    dataDir: config.dataDir,
    logger,
    flushIntervalMs: config.DMT_WAREHOUSE_FLUSH_MS,
    meter: meterConfigOf(config),
    store: local,
    // Deletion requests run here; they purge the dashboard's index and rollups too.
    purgers: [store.interactions],
    events: eventParts.events,
  });
  opened.push(() => warehouse.close());
  // The local host's parts, for the same compositions the Lambda entries call (lambda/compose/).
  const infra = {
    clock,
    logger,
    metrics: noMetrics,
    store,
    recordQueue: warehouse.queue,
    userIds: localUserIdHasher(config.dataDir),
    warehouseQuery: warehouse.exports.query,
    exportSettings: warehouse.settings,
    openDestination: warehouse.exports.openDestination,
    events: eventParts.events,
    webhooks: eventParts.webhooks,
    deliveryLog: eventParts.deliveryLog,
    deliveryQueue: eventParts.deliveryQueue,
    webhookSender: eventParts.webhookSender,
  } satisfies Partial<Infrastructure>;
  // One process serves what are separate functions in AWS: the events are composed once, and the
  // proxy and the dashboard share them (a rule edited in the dashboard applies to the next call).
  const events = composeEvents(
    infra,
    options.webhooks?.retryDelaysMs ? { retryDelaysMs: options.webhooks.retryDelaysMs } : {},
  );
  eventParts.start(events.deliveries.handler);
  const otlp = otlpSettings(config);
  const proxy = composeProxy(infra, {
    ...(config.DMT_METERING === "on" && {
      metering: {
        prices,
        keyCacheMs: config.DMT_KEY_CACHE_MS,
        holdTtlMs: config.DMT_HOLD_TTL_MS,
        noteChargesMs: NOTE_CHARGES_MS,
      },
    }),
    alerts: events,
    ...(options.hooks && { hooks: options.hooks }),
    ...(otlp && { telemetry: { otlp, flushEachCall: false } }),
  });
  const { metering, pending } = proxy;
  const deletionStarter = warehouse.deletion?.runner;
  // Credits bought through Stripe; a grant re-arms the project's low-balance alert as a CLI grant does.
  const billing = composePayments(infra, localStripeSettings(config), {
    publisher: events.publisher,
    afterGrant: (projectId) => events.alerts.check(projectId),
  });
  const dataApp = composeDataApi(infra, {
    auth,
    rateLimited: metering !== undefined,
    ...(deletionStarter && { deletionStarter }),
    ...(billing && { payments: billing.payments }),
  });
  // The dashboard: identity provider at /oidc, dashboard API at /dashboard/api, SPA at /dashboard.
  const dashboard = localDashboard({
    dataDir: config.dataDir,
    infra,
    settings: {
      prices,
      onKeyRevoked: (keyId) => keys.forget(keyId),
      ...(deletionStarter && { deletionStarter }),
      // Locally a webhook may be a receiver on this machine.
      webhookPolicy: "public-or-loopback",
      events,
      ...(billing && { billing }),
    },
  });
  const fallback = createRootApp(logger);

  // Vendors without a key or an upstream of their own are answered by the simulator, in process.
  const simulatedVendors = VENDOR_NAMES.filter((name) => vendorSettings(config, name).simulated);
  const simulator: Simulator | undefined = simulatedVendors.length > 0 ? await startSimulator() : undefined;
  if (simulator) {
    opened.push(() => simulator.close());
    logger.info(
      `vendor simulator answers ${simulatedVendors.join(", ")} (no API key set; marked x-dmt-simulated)`,
    );
  }
  const upstreams: UpstreamClient[] = [];
  const proxies = new Map<string, Hono<AppEnv>>(
    VENDOR_NAMES.map((name) => {
      const settings = vendorSettings(config, name);
      const upstream = createUpstreamClient({
        target:
          simulator && settings.simulated
            ? simulator.origins[name]
            : (settings.upstream ?? VENDOR_DEFINITIONS[name].defaultUpstream),
        connectTimeoutMs: config.DMT_UPSTREAM_CONNECT_TIMEOUT_MS,
        idleTimeoutMs: config.DMT_UPSTREAM_IDLE_TIMEOUT_MS,
      });
      upstreams.push(upstream);
      opened.push(() => upstream.close());
      const app = proxy.app({
        vendor: VENDOR_DEFINITIONS[name],
        upstream,
        // The simulator wants a key like the vendor does; any value serves.
        managedKey: settings.apiKey ?? (settings.simulated ? "simulated-key" : undefined),
        upstreamState: settings.simulated ? "simulated" : settings.apiKey ? "configured" : "missing_key",
        auth,
      });
      return [`/${name}`, app] as const;
    }),
  );

  // Path prefix -> app, as API Gateway routes to one Lambda per concern in AWS.
  const fetch = (request: Request, env: AppEnv["Bindings"]) => {
    const path = new URL(request.url).pathname;
    if (dashboard.handles(path)) return dashboard.fetch(request, env);
    const slash = path.indexOf("/", 1);
    const prefix = slash === -1 ? path : path.slice(0, slash);
    // `/stripe/webhook` is the data API's too, outside `/api/*` and its key check (as in AWS).
    const app = prefix === "/api" || prefix === "/stripe" ? dataApp : (proxies.get(prefix) ?? fallback);
    return app.fetch(request, env);
  };

  const server = createHttpServer({
    fetch,
    ...(config.DMT_TLS_CERT && config.DMT_TLS_KEY
      ? { tls: { cert: config.DMT_TLS_CERT, key: config.DMT_TLS_KEY } }
      : {}),
    ...(config.DMT_PUBLIC_URL ? { publicUrl: config.DMT_PUBLIC_URL } : {}),
    headersTimeoutMs: config.DMT_HEADERS_TIMEOUT_MS,
    maxConnectionsPerClient: config.DMT_MAX_CONNECTIONS_PER_CLIENT,
    ...(config.DMT_ACCESS_LOG === "on"
      ? { accessLog: options.accessLog ?? ((line: string) => process.stdout.write(line)) }
      : {}),
  });
  const port = await server.listen(config.PORT, config.HOST);
  opened.push(() => server.close(0));
  const scheme = config.DMT_TLS_CERT ? "https" : "http";
  const host = config.HOST.includes(":") ? `[${config.HOST}]` : config.HOST;
  const url = `${scheme}://${host}:${port}`;
  const signIn = await dashboard.start(url);
  const sweeper: Sweeper | undefined = metering
    ? startSweeper(composeSweeper(infra, billing), config.DMT_SWEEP_INTERVAL_MS, logger)
    : undefined;
  return {
    url,
    port,
    store: local.store,
    db: local.db,
    dashboard: signIn,
    simulatedVendors,
    events: { ...events, queue: eventParts.queue },
    async drain() {
      await pending.drain();
      await proxy.telemetry?.flush();
      await metering?.settle();
      await warehouse.queue.deliver();
      await eventParts.queue.deliver();
    },
    async close() {
      await server.close(10_000);
      // Settlements of the calls just answered need the store: before it closes.
      await pending.drain();
      await metering?.settle();
      await proxy.telemetry?.shutdown();
      // Deliveries stop here; events published later (a deletion finishing) wait in the journal.
      await eventParts.stop();
      await warehouse.close();
      await sweeper?.stop();
      await Promise.all(upstreams.map((u) => u.close()));
      await simulator?.close();
      await usage.flush();
      await local.close();
    },
  };
}

export interface KeyAuthDeps {
  keys: KeyLookup;
  clock: () => number;
  /** Called after a successful authentication, off the request path (last-used tracking). */
  onAuthenticated?: (auth: AuthContext) => void;
}

/**
 * The local stand-in for API Gateway's authorizer, in front of the proxies and the data API:
 * authenticates the service key against the store, as the Lambda authorizer does in AWS.
 */
export function requireKey(deps: KeyAuthDeps): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const endpoint = endpointOf(c.req.path);
    if (!endpoint) throw errors.notFound();
    const credentials = presentedCredentials({
      header: (name) => c.req.header(name),
      query: (name) => c.req.query(name),
      geminiFamily: endpoint.startsWith("gemini:"),
    });
    const auth = await authenticate(credentials, endpoint, deps.keys, deps.clock());
    c.set("auth", auth);
    deps.onAuthenticated?.(auth);
    await next();
  };
}
