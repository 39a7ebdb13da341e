/**
 * How a call is paid: from prepaid credits (`managed`), with the project's stored vendor key (`byok`),
 * or with the vendor half of a dual key sent with the request (`dual`). The record's `billing_mode`.
 */
export const BILLING_MODES = ["managed", "byok", "dual"] as const;
export type BillingMode = (typeof BILLING_MODES)[number];
