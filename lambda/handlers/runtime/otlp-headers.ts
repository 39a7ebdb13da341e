import { CachedSecret, createSecretsClient } from "../../adapters/secrets-manager/secrets";
import { errorFields, type Logger } from "../../core/logger";
import { type OtlpSettings, parseOtlpHeaders } from "../../telemetry/config";

/** How long a container keeps the headers before reading the secret again (a rotated API key applies). */
const HEADERS_CACHE_MS = 300_000;

/**
 * The export's headers from a Secrets Manager secret holding an `OTEL_EXPORTER_OTLP_HEADERS` value
 * (`x-honeycomb-team=...`): an API key kept out of the function's environment and the template. Read
 * on each export, cached; the exporter's contract is a factory that never throws, so a secret that
 * cannot be read or parsed sends no headers (the receiver refuses, the drops are counted and logged).
 */
export function secretOtlpHeaders(
  settings: OtlpSettings,
  config: { DMT_OTLP_HEADERS_SECRET_ARN?: string | undefined; DMT_SECRETS_ENDPOINT?: string | undefined },
  logger: Logger,
): OtlpSettings {
  const arn = config.DMT_OTLP_HEADERS_SECRET_ARN;
  if (arn === undefined) return settings;
  const secret = new CachedSecret(
    createSecretsClient(config.DMT_SECRETS_ENDPOINT),
    arn,
    ["AWSCURRENT"],
    HEADERS_CACHE_MS,
    logger,
  );
  const fixed = settings.headers;
  return {
    ...settings,
    headers: async () => {
      try {
        const [value] = await secret.values();
        return { ...(typeof fixed === "function" ? {} : fixed), ...parseOtlpHeaders(value ?? "") };
      } catch (err) {
        logger.error("the OTLP headers secret could not be used", {
          ...errorFields(err),
          secret: "DMT_OTLP_HEADERS_SECRET_ARN",
        });
        return typeof fixed === "function" ? {} : fixed;
      }
    },
  };
}
