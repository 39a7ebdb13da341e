import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Duration, RemovalPolicy } from "aws-cdk-lib";
import { Role, ServicePrincipal } from "aws-cdk-lib/aws-iam";
import { Architecture, Runtime } from "aws-cdk-lib/aws-lambda";
import {
  type BundlingOptions,
  type ICommandHooks,
  LogLevel,
  NodejsFunction,
  OutputFormat,
} from "aws-cdk-lib/aws-lambda-nodejs";
import { LogGroup, type RetentionDays } from "aws-cdk-lib/aws-logs";
import { Construct } from "constructs";
import type { LogLevel as ServiceLogLevel } from "../lambda/core/logger";

export const REPO_ROOT = fileURLToPath(new URL("..", import.meta.url));

/** Settings every function of the stack shares. */
export interface LambdaDefaults {
  logRetention: RetentionDays;
  logLevel: ServiceLogLevel;
}

export const RUNTIME = Runtime.NODEJS_24_X;

/** esbuild on this machine (never Docker): one minified ESM file per handler, with a source map. */
export const BUNDLING: BundlingOptions = {
  format: OutputFormat.ESM,
  target: "node24",
  mainFields: ["module", "main"],
  minify: true,
  sourceMap: true,
  sourcesContent: false,
  // Pinned SDK versions, and one minified file loads faster than the runtime's own copy.
  bundleAwsSDK: true,
  // CommonJS dependencies inside an ESM bundle still call require() for Node built-ins.
  banner: "import{createRequire as __cr}from'node:module';const require=__cr(import.meta.url);",
  logLevel: LogLevel.WARNING,
  forceDockerBundling: false,
};

export interface DmtFunctionProps {
  /** The file under `lambda/handlers/` (without `.ts`) that exports `handler`. */
  handler: string;
  description: string;
  defaults: LambdaDefaults;
  environment?: Record<string, string>;
  memorySize?: number;
  timeout?: Duration;
  /** Concurrency set aside for (and capping) this function; unset, it shares the account's pool. */
  reservedConcurrency?: number;
  /** Files copied next to the handler (name in the bundle to source path); Lambda has them in /var/task. */
  bundledFiles?: Record<string, string>;
}

/**
 * A Lambda function with every default of the stack: ARM64, the current Node runtime, ESM, minified,
 * source maps, its own log group with retention, and a role that may write only to that log group.
 */
export class DmtFunction extends Construct {
  readonly function: NodejsFunction;
  readonly logGroup: LogGroup;

  constructor(scope: Construct, id: string, props: DmtFunctionProps) {
    super(scope, id);
    this.logGroup = new LogGroup(this, "Logs", {
      retention: props.defaults.logRetention,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    // Not AWSLambdaBasicExecutionRole: that one may create and write any log group in the account.
    const role = new Role(this, "Role", { assumedBy: new ServicePrincipal("lambda.amazonaws.com") });
    this.logGroup.grantWrite(role);
    this.function = new NodejsFunction(this, "Function", {
      entry: join(REPO_ROOT, "lambda", "handlers", `${props.handler}.ts`),
      handler: "handler",
      projectRoot: REPO_ROOT,
      depsLockFilePath: join(REPO_ROOT, "package-lock.json"),
      runtime: RUNTIME,
      architecture: Architecture.ARM_64,
      memorySize: props.memorySize ?? 512,
      timeout: props.timeout ?? Duration.seconds(10),
      ...(props.reservedConcurrency !== undefined && {
        reservedConcurrentExecutions: props.reservedConcurrency,
      }),
      description: props.description,
      role,
      logGroup: this.logGroup,
      environment: {
        // Stack traces of uncaught errors point into the TypeScript sources, for ~20 ms of the
        // authorizer's cold start (bench/bundles.ts measures it; drop this line to save them).
        NODE_OPTIONS: "--enable-source-maps",
        DMT_LOG_LEVEL: props.defaults.logLevel,
        ...props.environment,
      },
      bundling: props.bundledFiles ? { ...BUNDLING, commandHooks: copyFiles(props.bundledFiles) } : BUNDLING,
    });
  }
}

/** esbuild bundles code only: other files are copied into its output after it ran (local bundling: bash). */
function copyFiles(files: Record<string, string>): ICommandHooks {
  const quote = (text: string) => `'${text.replaceAll("'", "'\\''")}'`;
  return {
    beforeBundling: () => [],
    beforeInstall: () => [],
    afterBundling: (_inputDir, outputDir) =>
      Object.entries(files).map(([name, source]) => `cp ${quote(source)} ${quote(join(outputDir, name))}`),
  };
}
