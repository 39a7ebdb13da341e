import { createHmac, randomBytes } from "node:crypto";
import { linkSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { aesGcmDecrypt, aesGcmEncrypt, type KeyWrapper } from "../../core/crypto";
import { hmacUserIdHasher, USER_ID_KEY_PURPOSE, type UserIdHasher } from "../../core/privacy";

/**
 * The local master key: 32 random bytes in `<data dir>/master.key`, mode 0600, created on first use.
 * Losing the file makes every stored vendor key unreadable; copying it gives them away. In AWS a KMS
 * key replaces it behind the same `KeyWrapper` port.
 */
export class LocalMasterKey implements KeyWrapper {
  private key: Buffer | undefined;

  constructor(readonly path: string) {}

  static inDataDir(dataDir: string): LocalMasterKey {
    return new LocalMasterKey(join(dataDir, "master.key"));
  }

  async generateDataKey(context: string): Promise<{ plaintext: Buffer; wrapped: Uint8Array }> {
    const plaintext = randomBytes(32);
    return { plaintext, wrapped: aesGcmEncrypt(this.masterKey(), plaintext, context) };
  }

  async unwrap(wrapped: Uint8Array, context: string): Promise<Buffer> {
    return aesGcmDecrypt(this.masterKey(), wrapped, context);
  }

  /** A key for another purpose, derived from the master key (HMAC-SHA256 of the purpose's name). */
  derive(purpose: string): Buffer {
    return createHmac("sha256", this.masterKey()).update(purpose, "utf8").digest();
  }

  private masterKey(): Buffer {
    this.key ??= loadOrCreate(this.path);
    return this.key;
  }
}

function loadOrCreate(path: string): Buffer {
  try {
    return readKey(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  // Written whole under a temporary name, then linked into place: a process racing us either links
  // first (and we read its key) or reads ours complete, never a half-written file.
  const temp = `${path}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`;
  writeFileSync(temp, randomBytes(32), { mode: 0o600, flag: "wx" });
  try {
    linkSync(temp, path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
  } finally {
    rmSync(temp, { force: true });
  }
  return readKey(path);
}

function readKey(path: string): Buffer {
  const mode = statSync(path).mode & 0o777;
  if ((mode & 0o077) !== 0) {
    throw new Error(
      `The master key file ${path} is open to other users (mode ${mode.toString(8)}): chmod 600 it.`,
    );
  }
  const key = readFileSync(path);
  if (key.length !== 32) throw new Error(`The master key file ${path} must hold exactly 32 bytes.`);
  return key;
}

/** The keyed user-id hash of level `none`: its key derived from the data dir's master key file. */
export function localUserIdHasher(dataDir: string): UserIdHasher {
  const master = LocalMasterKey.inDataDir(dataDir);
  return hmacUserIdHasher(() => master.derive(USER_ID_KEY_PURPOSE));
}
