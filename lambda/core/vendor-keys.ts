import { errors } from "./errors";
import { VENDOR_NAMES, type VendorName } from "./vendor-names";

/**
 * BYOK: a project's own key for a vendor, stored encrypted (core/crypto.ts) and used instead of the
 * service's key, with no credit charge. Listings show only the last 4 characters. The plaintext goes
 * to the proxy's forwarder and nowhere else: never a log line, an error, a response or a stored record.
 */

export interface VendorKeyView {
  projectId: string;
  vendor: VendorName;
  last4: string;
  createdAt: number;
  updatedAt: number;
}

/** The vendor-key port. Invalid arguments throw ApiError 400. */
export interface VendorKeyStore {
  /** Stores or replaces the project's key for the vendor. */
  set(projectId: string, vendor: string, key: string): Promise<VendorKeyView>;
  list(projectId: string): Promise<VendorKeyView[]>;
  /** False when there was no key to delete. */
  delete(projectId: string, vendor: string): Promise<boolean>;
  /** The plaintext key, for the proxy's forwarder only. */
  reveal(projectId: string, vendor: VendorName): Promise<string | undefined>;
}

const MIN_KEY = 16;
const MAX_KEY = 512;

export function parseVendor(value: string): VendorName {
  const vendor = VENDOR_NAMES.find((candidate) => candidate === value);
  if (!vendor) throw errors.invalidField("vendor", `must be one of ${VENDOR_NAMES.join(", ")}`);
  return vendor;
}

/** Refuses keys that cannot be right, with a reason a person can act on (never echoing the key). */
export function validateVendorKey(key: string): void {
  if (/\s/.test(key)) {
    throw errors.invalidField("key", "must not contain whitespace (check for a trailing newline or space)");
  }
  // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
  if (/[\u0000-\u001f\u007f-\u009f]/.test(key)) {
    throw errors.invalidField("key", "must not contain control characters");
  }
  if (!/^[\x21-\x7e]*$/.test(key))
    throw errors.invalidField("key", "must be printable ASCII characters only");
  if (key.length < MIN_KEY || key.length > MAX_KEY) {
    throw errors.invalidField("key", `must be ${MIN_KEY} to ${MAX_KEY} characters long`);
  }
}

/** Binds a stored key to its project and vendor: the ciphertext of one does not open as another. */
export function vendorKeyContext(projectId: string, vendor: VendorName): string {
  return `dmt vendor key\n${projectId}\n${vendor}`;
}
