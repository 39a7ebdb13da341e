import * as z from "zod/mini";
import { stripeMeterSender } from "../adapters/stripe/meter-sender";
import { openMeterSender } from "../adapters/undici/openmeter-sender";
import { createMeterSender } from "../billing/meter";
import {
  METER_ENV,
  type MeterConfig,
  type MeterSender,
  type MeterStore,
  type MeterTarget,
} from "../core/billing-meter";
import { parseEnv } from "../core/config";
import type { Logger } from "../core/logger";
import type { BatchHandler } from "../core/queue";

export type { MeterConfig } from "../core/billing-meter";

/** The billing exports' settings from an environment (a Lambda function's; the local host's are in its config). */
export function parseMeterConfig(env: Record<string, string | undefined>): MeterConfig {
  return parseEnv(z.object(METER_ENV), env);
}

/** The billing systems this deployment can send to: those it has credentials or an address for. */
export function meterSenders(config: MeterConfig): Partial<Record<MeterTarget, MeterSender>> {
  return {
    ...(config.DMT_STRIPE_SECRET_KEY && {
      stripe: stripeMeterSender({
        secretKey: config.DMT_STRIPE_SECRET_KEY,
        ...(config.DMT_STRIPE_API_URL && { apiUrl: config.DMT_STRIPE_API_URL }),
      }),
    }),
    ...(config.DMT_OPENMETER_URL && {
      openmeter: openMeterSender({
        url: config.DMT_OPENMETER_URL,
        source: config.DMT_METER_SOURCE,
        ...(config.DMT_OPENMETER_TOKEN && { token: config.DMT_OPENMETER_TOKEN }),
      }),
    }),
  };
}

export interface MeterInfrastructure {
  meterStore: MeterStore;
  logger: Logger;
  clock: () => number;
}

/** The meter queue's handler: the same behind SQS (handlers/meter-sender.ts) and the local queue. */
export function composeMeterSender(infra: MeterInfrastructure, config: MeterConfig): BatchHandler {
  return createMeterSender({
    store: infra.meterStore,
    senders: meterSenders(config),
    logger: infra.logger,
    clock: infra.clock,
  });
}
