import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import { finished } from "node:stream/promises";
import type { APIGatewayProxyEvent, Context, LambdaFunctionURLEvent } from "aws-lambda";

/** The HTTP metadata a streaming handler sends before its body (`awslambda.HttpResponseStream.from`). */
export interface ResponsePrelude {
  statusCode: number;
  headers: Record<string, string>;
  cookies?: string[];
}

/** The response stream the Lambda runtime hands a streaming handler, collecting what it was sent. */
export class CollectedResponse extends Writable {
  prelude: ResponsePrelude | undefined;
  contentType: string | undefined;
  /** Each write on its own, as the runtime would pass it on. */
  readonly chunks: Buffer[] = [];

  constructor() {
    super({
      write: (chunk: Buffer | string, _encoding, callback) => {
        this.chunks.push(Buffer.from(chunk));
        callback();
      },
    });
  }

  setContentType(type: string): void {
    this.contentType = type;
  }

  text(): string {
    return Buffer.concat(this.chunks).toString("utf8");
  }

  json(): unknown {
    return JSON.parse(this.text());
  }
}

/**
 * The `awslambda` global of the Node.js Lambda runtime, as it defines it: `streamifyResponse` marks
 * and returns the handler; `HttpResponseStream.from` sets the metadata that precedes the body, which
 * must happen before the first write.
 */
export function installStreamingRuntime(): void {
  (globalThis as unknown as { awslambda: unknown }).awslambda = {
    streamifyResponse: <T>(handler: T): T => handler,
    HttpResponseStream: {
      from(stream: CollectedResponse, prelude: ResponsePrelude): CollectedResponse {
        if (stream.chunks.length > 0) throw new Error("HttpResponseStream.from after the first write");
        stream.setContentType("application/vnd.awslambda.http-integration-response");
        stream.prelude = prelude;
        return stream;
      },
    },
  };
}

export type StreamingHandler = (
  event: LambdaFunctionURLEvent | APIGatewayProxyEvent,
  stream: CollectedResponse,
  context: Context,
) => Promise<void>;

/** Invokes a streaming handler as the runtime does, once the stream has ended. */
export async function invokeStreaming(
  handler: StreamingHandler,
  event: LambdaFunctionURLEvent | APIGatewayProxyEvent,
): Promise<CollectedResponse> {
  const stream = new CollectedResponse();
  await handler(event, stream, { awsRequestId: "test-request" } as Context);
  await finished(stream);
  return stream;
}

/** A Lambda context whose `getRemainingTimeInMillis` counts down from `timeoutMs`, as the runtime's does. */
export function lambdaContext(timeoutMs = 15 * 60_000): Context {
  const deadline = Date.now() + timeoutMs;
  return {
    awsRequestId: "test-request",
    getRemainingTimeInMillis: () => deadline - Date.now(),
  } as Context;
}

/** What a streaming handler answered, in the shape of a buffered one's result (REST: multi-value headers). */
export interface StreamedResult {
  statusCode: number;
  multiValueHeaders: Record<string, string[]>;
  body: string;
  bytes: Buffer;
}

export function streamedResult(stream: CollectedResponse): StreamedResult {
  const multiValueHeaders: Record<string, string[]> = {};
  for (const [name, value] of Object.entries(stream.prelude?.headers ?? {}))
    multiValueHeaders[name] = [value];
  if (stream.prelude?.cookies?.length) multiValueHeaders["set-cookie"] = stream.prelude.cookies;
  const bytes = Buffer.concat(stream.chunks);
  return {
    statusCode: stream.prelude?.statusCode ?? 0,
    multiValueHeaders,
    body: bytes.toString("utf8"),
    bytes,
  };
}

/** Invokes the streaming handler with a REST (payload 1.0) event as Lambda does, and reads what it sent. */
export async function invokeRest(
  handler: StreamingHandler,
  event: APIGatewayProxyEvent,
  context: Context = lambdaContext(),
): Promise<StreamedResult> {
  const stream = new CollectedResponse();
  await handler(event, stream, context);
  await finished(stream);
  return streamedResult(stream);
}

export interface UrlRequest {
  method?: string;
  path: string;
  query?: string;
  headers?: Record<string, string>;
  body?: string;
}

/** A Lambda function URL event (payload 2.0): header names in lower case, as function URLs send them. */
export function functionUrlEvent({
  method = "GET",
  path,
  query = "",
  headers = {},
  body,
}: UrlRequest): LambdaFunctionURLEvent {
  const domainName = "abcdefghijklmnopqrstuvwxyz012345.lambda-url.eu-west-1.on.aws";
  return {
    version: "2.0",
    routeKey: "$default",
    rawPath: path,
    rawQueryString: query,
    headers: {
      host: domainName,
      ...Object.fromEntries(Object.entries(headers).map(([name, value]) => [name.toLowerCase(), value])),
    },
    ...(body !== undefined ? { body: Buffer.from(body).toString("base64") } : {}),
    isBase64Encoded: body !== undefined,
    requestContext: {
      accountId: "anonymous",
      apiId: "abcdefghijklmnopqrstuvwxyz012345",
      domainName,
      domainPrefix: "abcdefghijklmnopqrstuvwxyz012345",
      http: { method, path, protocol: "HTTP/1.1", sourceIp: "203.0.113.7", userAgent: "test" },
      requestId: "test-request",
      routeKey: "$default",
      stage: "$default",
      time: "01/Jan/2026:00:00:00 +0000",
      timeEpoch: 1767225600000,
    },
  };
}

/**
 * API Gateway's Lambda proxy event (REST, payload 1.0) for `/{vendor}/{proxy+}`, as its streaming
 * integration sends it: the authorizer's context in `requestContext.authorizer`, the body in base64
 * (the API takes every media type as binary).
 */
export function gatewayProxyEvent(
  { method = "GET", path, headers = {}, body }: UrlRequest,
  authorizer: Record<string, string | number>,
): APIGatewayProxyEvent {
  const [, vendor = "", ...rest] = path.split("/");
  const domainName = "abcdefghij.execute-api.eu-west-1.amazonaws.com";
  const nullIdentity = {
    accessKey: null,
    accountId: null,
    apiKey: null,
    apiKeyId: null,
    caller: null,
    clientCert: null,
    cognitoAuthenticationProvider: null,
    cognitoAuthenticationType: null,
    cognitoIdentityId: null,
    cognitoIdentityPoolId: null,
    principalOrgId: null,
    user: null,
    userArn: null,
  };
  return {
    httpMethod: method,
    path,
    resource: `/${vendor}/{proxy+}`,
    pathParameters: { proxy: rest.join("/") },
    headers: { host: domainName, ...headers },
    multiValueHeaders: Object.fromEntries(
      Object.entries({ host: domainName, ...headers }).map(([name, value]) => [name, [value]]),
    ),
    queryStringParameters: null,
    multiValueQueryStringParameters: null,
    stageVariables: null,
    body: body === undefined ? null : Buffer.from(body).toString("base64"),
    isBase64Encoded: body !== undefined,
    requestContext: {
      accountId: "123456789012",
      apiId: "abcdefghij",
      domainName,
      authorizer: { ...authorizer, principalId: String(authorizer.keyId ?? "") },
      httpMethod: method,
      path: `/prod${path}`,
      protocol: "HTTP/1.1",
      requestId: "test-request",
      requestTimeEpoch: 1767225600000,
      resourceId: "abc123",
      resourcePath: `/${vendor}/{proxy+}`,
      stage: "prod",
      identity: { ...nullIdentity, sourceIp: "203.0.113.7", userAgent: "test" },
    },
  };
}

/**
 * A Secrets Manager endpoint on 127.0.0.1 for GetSecretValue (its JSON 1.1 protocol), answering as
 * Secrets Manager does: a version stage the secret lacks is a ResourceNotFoundException. It records
 * which secrets were read, and can be made to refuse every call.
 */
export interface SecretsEndpoint {
  url: string;
  /** Secret id -> version stage -> value. */
  secrets: Map<string, Record<string, string>>;
  reads: { secretId: string; stage: string }[];
  failing: boolean;
  close(): Promise<void>;
}

export async function startSecretsEndpoint(): Promise<SecretsEndpoint> {
  const endpoint: Omit<SecretsEndpoint, "url" | "close"> = { secrets: new Map(), reads: [], failing: false };
  const answer = (res: ServerResponse, status: number, body: Record<string, unknown>) => {
    const type = typeof body.__type === "string" ? { "x-amzn-errortype": body.__type } : {};
    res.writeHead(status, { "content-type": "application/x-amz-json-1.1", ...type });
    res.end(JSON.stringify(body));
  };
  const server = createServer(async (req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const { SecretId: secretId, VersionStage: stage = "AWSCURRENT" } = JSON.parse(
      Buffer.concat(chunks).toString("utf8"),
    ) as { SecretId: string; VersionStage?: string };
    if (req.headers["x-amz-target"] !== "secretsmanager.GetSecretValue") {
      return answer(res, 400, { __type: "UnknownOperationException", message: "Not served here." });
    }
    endpoint.reads.push({ secretId, stage });
    if (endpoint.failing) {
      return answer(res, 400, { __type: "AccessDeniedException", message: "Access denied." });
    }
    const value = endpoint.secrets.get(secretId)?.[stage];
    if (value === undefined) {
      return answer(res, 400, {
        __type: "ResourceNotFoundException",
        message: `Secrets Manager can't find the specified secret value for staging label: ${stage}`,
      });
    }
    answer(res, 200, {
      ARN: secretId,
      Name: secretId.split(":").at(-1),
      VersionId: `${stage}-version`,
      SecretString: value,
      VersionStages: [stage],
      CreatedDate: 1767225600,
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return Object.assign(endpoint, {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  });
}
