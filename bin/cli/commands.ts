import { alertCommands } from "./alerts";
import { billingCommands } from "./billing";
import { budgetCommands } from "./budgets";
import type { Command } from "./command";
import { compactionCommands } from "./compaction";
import { creditCommands } from "./credits";
import { doctorCommands } from "./doctor";
import { keyCommands } from "./keys";
import { memberCommands } from "./members";
import { planCommands } from "./plans";
import { priceCommands } from "./prices";
import { projectCommands } from "./projects";
import { reconcileCommands } from "./reconcile";
import { retentionCommands } from "./retention";
import { serveCommands } from "./serve";
import { settingsCommands } from "./settings";
import { usageCommands } from "./usage";
import { vendorKeyCommands } from "./vendor-keys";
import { webhookCommands } from "./webhooks";

/** Every `dmt` command, in the order `dmt --help` lists them. */
export const COMMANDS: Command[] = [
  ...serveCommands,
  ...projectCommands,
  ...keyCommands,
  ...budgetCommands,
  ...creditCommands,
  ...usageCommands,
  ...memberCommands,
  ...vendorKeyCommands,
  ...settingsCommands,
  ...retentionCommands,
  ...compactionCommands,
  ...priceCommands,
  ...planCommands,
  ...reconcileCommands,
  ...alertCommands,
  ...webhookCommands,
  ...billingCommands,
  ...doctorCommands,
];
