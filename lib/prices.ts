import { readFileSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { activePriceCatalogue } from "../lambda/adapters/fs/price-catalogue";

/** The override's name in each proxy function's bundle, and where Lambda unpacks it (its task root). */
export const PRICE_OVERRIDE_FILE = "prices-override.json";
export const PRICE_OVERRIDE_PATH = `/var/task/${PRICE_OVERRIDE_FILE}`;

/** The template metadata key that records the price settings, for `dmt prices list --stack`. */
export const PRICES_METADATA = "dmt:prices";
/** The output holding the price version the proxy functions charge with (records' `price_version`). */
export const PRICE_VERSION_OUTPUT = "PriceVersion";

export interface PriceSettings {
  /** A price override file (prices/README.md); a relative path is read from the current directory. */
  overrideFile?: string;
  /** The factor on every charged cost; default the override file's `markup`, else 1. */
  markup?: number;
}

/** What the stack gives the proxy functions, and publishes, for its price settings. */
export interface StackPrices {
  /** `DMT_PRICES_OVERRIDE` (the bundled copy) and `DMT_PRICE_MARKUP`, each when set. */
  environment: Record<string, string>;
  /** Files to add to the proxy bundles: name in the bundle to source path. */
  bundledFiles: Record<string, string>;
  priceVersion: string;
  /** The settings as `dmt prices list --stack` reads them back from the template. */
  metadata: { override?: unknown; markup?: number };
}

/**
 * The stack's price settings, checked at synth by the loader the proxy functions run at their cold
 * start (`activePriceCatalogue`), with the file they will read: a bad file or markup fails the synth
 * with the message the function would fail with (naming the model and field), instead of every call.
 */
export function stackPrices(settings: PriceSettings): StackPrices {
  const file = settings.overrideFile === undefined ? undefined : resolve(settings.overrideFile);
  const markup = settings.markup === undefined ? undefined : String(settings.markup);
  const given = [file && `override ${file}`, markup && `markup ${markup}`].filter(Boolean).join(", ");
  if (file !== undefined && !statSync(file, { throwIfNoEntry: false })?.isFile()) {
    throw new Error(`Stack prices (${given}): there is no such file.`);
  }
  let priceVersion: string;
  try {
    priceVersion = activePriceCatalogue({
      ...(file !== undefined && { DMT_PRICES_OVERRIDE: file }),
      ...(markup !== undefined && { DMT_PRICE_MARKUP: markup }),
    }).priceVersion;
  } catch (err) {
    throw new Error(`Stack prices (${given}): ${(err as Error).message}`);
  }
  return {
    environment: {
      ...(file !== undefined && { DMT_PRICES_OVERRIDE: PRICE_OVERRIDE_PATH }),
      ...(markup !== undefined && { DMT_PRICE_MARKUP: markup }),
    },
    bundledFiles: file === undefined ? {} : { [PRICE_OVERRIDE_FILE]: file },
    priceVersion,
    metadata: {
      ...(file !== undefined && { override: JSON.parse(readFileSync(file, "utf8")) }),
      ...(settings.markup !== undefined && { markup: settings.markup }),
    },
  };
}
