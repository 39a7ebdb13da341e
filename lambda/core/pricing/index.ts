/** Prices and exact costs. The data lives in `prices/catalogue.json`; its format is in `prices/README.md`. */
export {
  type AudioUnit,
  loadPriceCatalogue,
  type ModelPrice,
  mergeOverride,
  PriceCatalogue,
  type PriceListRow,
  type TokenRates,
} from "./catalogue";
export {
  type CostBreakdown,
  type CostOptions,
  costBreakdown,
  costMicros,
  type HoldUnits,
  type LineItem,
  maxCostMicros,
} from "./cost";
export { formatPriceTable } from "./format";
export {
  KINDS,
  type ModelKind,
  SERVICE_TIERS,
  type ServiceTier,
  TOOLS,
  type Tool,
} from "./schema";
