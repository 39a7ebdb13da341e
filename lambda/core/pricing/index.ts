/** Prices and exact costs. The data lives in `prices/catalogue.json`; its format is in `prices/README.md`. */
export {
  type AudioUnit,
  loadPriceCatalogue,
  type ModelPrice,
  PriceCatalogue,
  type PriceListRow,
  type TokenRates,
} from "./catalogue";
export { type CostOptions, costMicros, type HoldUnits, maxCostMicros } from "./cost";
export { formatPriceTable } from "./format";
export { KINDS, type ModelKind, VENDORS, type Vendor } from "./schema";
