import {
  GetSecretValueCommand,
  ResourceNotFoundException,
  SecretsManagerClient,
} from "@aws-sdk/client-secrets-manager";
import { errorFields, type Logger } from "../../core/logger";
import { hmacUserIdHasher, type UserIdHasher } from "../../core/privacy";

/** One client per container; `endpoint` points it elsewhere (tests). */
export function createSecretsClient(endpoint?: string): SecretsManagerClient {
  return new SecretsManagerClient({
    region: process.env.AWS_REGION ?? "local",
    ...(endpoint !== undefined
      ? { endpoint, credentials: { accessKeyId: "local", secretAccessKey: "local" } }
      : {}),
    maxAttempts: 3,
  });
}

/** After a failed refresh, the last values serve this long before the next attempt. */
const RETRY_AFTER_FAILURE_MS = 10_000;

/**
 * Values of one Secrets Manager secret, read at first use and again once `ttlMs` passed. `stages` are
 * the version stages wanted (AWSCURRENT, AWSPREVIOUS during a rotation); a stage the secret does not
 * have yet (an empty secret) has no value. If a refresh fails, the last values keep serving a while:
 * a Secrets Manager hiccup must not take the proxy down.
 */
export class CachedSecret {
  private cached: { values: string[]; expiresAt: number } | undefined;

  constructor(
    private readonly client: SecretsManagerClient,
    private readonly secretId: string,
    private readonly stages: readonly string[],
    private readonly ttlMs: number,
    private readonly logger: Logger,
    private readonly clock: () => number = Date.now,
  ) {}

  /** The values of the stages that exist, in the order of `stages`. */
  async values(): Promise<string[]> {
    const now = this.clock();
    if (this.cached && now < this.cached.expiresAt) return this.cached.values;
    try {
      const values = await Promise.all(this.stages.map((stage) => this.read(stage)));
      this.cached = { values: values.filter((v) => v !== undefined), expiresAt: now + this.ttlMs };
    } catch (err) {
      if (!this.cached) throw err;
      this.logger.warn("secret refresh failed; serving the last values", errorFields(err));
      this.cached.expiresAt = now + Math.min(this.ttlMs, RETRY_AFTER_FAILURE_MS);
    }
    return this.cached.values;
  }

  private async read(stage: string): Promise<string | undefined> {
    try {
      const secret = await this.client.send(
        new GetSecretValueCommand({ SecretId: this.secretId, VersionStage: stage }),
      );
      return secret.SecretString || undefined;
    } catch (err) {
      if (err instanceof ResourceNotFoundException) return undefined;
      throw err;
    }
  }
}

/**
 * The keyed user-id hash of level `none`, its key the value of a generated secret. Read once per
 * container (an hour's cache): the key never changes, or stored hashes would stop matching.
 */
export function secretUserIdHasher(
  client: SecretsManagerClient,
  secretId: string,
  logger: Logger,
): UserIdHasher {
  const secret = new CachedSecret(client, secretId, ["AWSCURRENT"], 3_600_000, logger);
  return hmacUserIdHasher(async () => {
    const [value] = await secret.values();
    if (!value) throw new Error("the user-id hashing secret has no value");
    return Buffer.from(value, "utf8");
  });
}
