/**
 * The stack at production scale (issue 43): the proxies on Lambda Managed Instances as an option, with
 * the VPC they need; reserved concurrency for the functions every request needs and a cap on the
 * proxies. Synthesized as `cdk synth` does (cdk-nag included), without bundling (stack.test.ts checks
 * the bundles), with both proxy integrations and in two regions of one account.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { App, type Environment } from "aws-cdk-lib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CONTEXT, defineApp } from "../../lib/app";
import { REPO_ROOT } from "../../lib/lambda-defaults";
import { PROXY_MEMORY_MB } from "../../lib/proxy";
import { MANAGED_INSTANCES } from "../../lib/proxy-compute";
import { VENDORS } from "../../lib/secrets";
import { type DmtStack, RESERVED_CONCURRENCY } from "../../lib/stack";

type Resource = { Type: string; Properties: Record<string, unknown> };
type Resources = Record<string, Resource>;

const CDK_JSON_CONTEXT = JSON.parse(readFileSync(join(REPO_ROOT, "cdk.json"), "utf8")).context as Record<
  string,
  unknown
>;
const outdirs: string[] = [];
afterAll(() => {
  for (const dir of outdirs) rmSync(dir, { recursive: true, force: true });
});

interface Synthesized {
  stack: DmtStack;
  resources: Resources;
  fn(construct: { node: { defaultChild?: unknown } }): Record<string, unknown>;
}

/** The app as `cdk synth -c ...` makes it; throws on an unacknowledged cdk-nag finding. */
function synthesize(context: Record<string, unknown> = {}, env?: Environment): Synthesized {
  const outdir = mkdtempSync(join(tmpdir(), "dmt-scale-"));
  outdirs.push(outdir);
  const app = new App({
    outdir,
    context: { ...CDK_JSON_CONTEXT, ...context, "aws:cdk:bundling-stacks": [] },
  });
  const stack = env ? defineApp(app, env) : defineApp(app);
  const resources = app.synth().getStackByName(stack.stackName).template.Resources as Resources;
  return {
    stack,
    resources,
    fn: (construct) =>
      resources[stack.getLogicalId(construct.node.defaultChild as Parameters<DmtStack["getLogicalId"]>[0])]
        ?.Properties ?? {},
  };
}

/** A function's environment variable, as the template sets it. */
const variable = (properties: Record<string, unknown>, name: string) =>
  (properties.Environment as { Variables?: Record<string, unknown> } | undefined)?.Variables?.[name];

const ofType = (resources: Resources, type: string) =>
  Object.entries(resources).filter(([, r]) => r.Type === type);

let standard: Synthesized;
beforeAll(() => {
  standard = synthesize();
});

describe("concurrency you can rely on", () => {
  it("reserves concurrency for the authorizer, the data API and the dashboard API, and caps each proxy", () => {
    const { stack, fn } = standard;
    expect(fn(stack.authorizer.function).ReservedConcurrentExecutions).toBe(RESERVED_CONCURRENCY.authorizer);
    expect(fn(stack.dataApi.function).ReservedConcurrentExecutions).toBe(RESERVED_CONCURRENCY.dataApi);
    expect(fn(stack.dashboard.api.function).ReservedConcurrentExecutions).toBe(
      RESERVED_CONCURRENCY.dashboardApi,
    );
    for (const vendor of VENDORS) {
      expect(fn(stack.proxies[vendor].fn.function).ReservedConcurrentExecutions).toBe(
        RESERVED_CONCURRENCY.proxy,
      );
    }
    // Lambda refuses reservations that leave less than 100 of the default quota of 1,000 unreserved.
    const reserved =
      RESERVED_CONCURRENCY.authorizer +
      RESERVED_CONCURRENCY.dataApi +
      RESERVED_CONCURRENCY.dashboardApi +
      VENDORS.length * RESERVED_CONCURRENCY.proxy;
    expect(reserved).toBeLessThanOrEqual(900);
  });

  it("takes each reservation from context", () => {
    const { stack, fn } = synthesize({
      [CONTEXT.authorizerConcurrency]: "400",
      [CONTEXT.dataApiConcurrency]: 50,
      [CONTEXT.dashboardApiConcurrency]: "30",
      [CONTEXT.proxyReservedConcurrency]: '{"openai":800}',
    });
    expect(fn(stack.authorizer.function).ReservedConcurrentExecutions).toBe(400);
    expect(fn(stack.dataApi.function).ReservedConcurrentExecutions).toBe(50);
    expect(fn(stack.dashboard.api.function).ReservedConcurrentExecutions).toBe(30);
    expect(fn(stack.proxies.openai.fn.function).ReservedConcurrentExecutions).toBe(800);
    expect(fn(stack.proxies.anthropic.fn.function).ReservedConcurrentExecutions).toBe(
      RESERVED_CONCURRENCY.proxy,
    );
  });

  it("refuses a reservation that is not a whole number of at least 1, naming the key", () => {
    expect(() => synthesize({ [CONTEXT.authorizerConcurrency]: "0" })).toThrow(
      'dmt:authorizerConcurrency: "0" is not a whole number >= 1.',
    );
    expect(() => synthesize({ [CONTEXT.dataApiConcurrency]: "lots" })).toThrow(
      'dmt:dataApiConcurrency: "lots" is not a whole number >= 1.',
    );
    expect(() => synthesize({ [CONTEXT.dashboardApiConcurrency]: 2.5 })).toThrow(
      "dmt:dashboardApiConcurrency: 2.5 is not a whole number >= 1.",
    );
  });
});

describe("standard compute (the default)", () => {
  it("has no VPC and no capacity provider, and gives the proxies the measured memory", () => {
    const { stack, resources, fn } = standard;
    expect(ofType(resources, "AWS::EC2::VPC")).toEqual([]);
    expect(ofType(resources, "AWS::Lambda::CapacityProvider")).toEqual([]);
    expect(stack.proxyCapacity).toBeUndefined();
    for (const vendor of VENDORS) {
      const proxy = fn(stack.proxies[vendor].fn.function);
      expect(proxy.MemorySize).toBe(PROXY_MEMORY_MB);
      expect(proxy.CapacityProviderConfig).toBeUndefined();
      // The handler keeps a frozen container's lease through idle time (lambda/handlers/proxy.ts).
      expect(variable(proxy, "DMT_PROXY_COMPUTE")).toBe("standard");
    }
  });

  it("refuses a compute it does not know, naming it", () => {
    expect(() => synthesize({ [CONTEXT.proxyCompute]: "fargate" })).toThrow(
      'dmt:proxyCompute: "fargate" is not one of standard, managed-instances.',
    );
    expect(() => synthesize({ [CONTEXT.proxyCompute]: "" })).toThrow(
      'dmt:proxyCompute: "" is not one of standard, managed-instances.',
    );
  });
});

describe("managed instances (dmt:proxyCompute=managed-instances)", () => {
  const account = "123456789012";
  const variants: [string, Record<string, unknown>, Environment | undefined][] = [
    ["function URLs, no region", {}, undefined],
    ["function URLs, eu-west-1", {}, { account, region: "eu-west-1" }],
    [
      "lambda-stream, us-east-1",
      { [CONTEXT.proxyIntegration]: "lambda-stream" },
      { account, region: "us-east-1" },
    ],
  ];
  const synthesized = new Map<string, Synthesized>();
  beforeAll(() => {
    for (const [name, context, env] of variants) {
      synthesized.set(name, synthesize({ [CONTEXT.proxyCompute]: "managed-instances", ...context }, env));
    }
  });
  const each = (check: (s: Synthesized, name: string) => void) => {
    for (const [name] of variants) {
      const s = synthesized.get(name);
      if (!s) throw new Error(`${name} was not synthesized`);
      check(s, name);
    }
  };

  it("serves every vendor from one proxy function on the capacity provider: memory at its minimum, concurrency per environment set", () => {
    each(({ stack, resources, fn }) => {
      const providers = ofType(resources, "AWS::Lambda::CapacityProvider");
      expect(providers).toHaveLength(1);
      const [providerId] = providers[0] as [string, Resource];
      // One function: the minimum environments are kept once, not once per vendor.
      expect(stack.proxyFunctions).toHaveLength(1);
      for (const vendor of VENDORS) expect(stack.proxies[vendor]).toBe(stack.proxyFunctions[0]);
      const proxy = fn(stack.proxies.openai.fn.function);
      expect(proxy.MemorySize).toBe(2048);
      expect(variable(proxy, "DMT_PROXY_COMPUTE")).toBe("managed-instances");
      expect(variable(proxy, "DMT_VENDORS")).toBe(VENDORS.join(","));
      expect(proxy.CapacityProviderConfig).toEqual({
        LambdaManagedInstancesCapacityProviderConfig: {
          CapacityProviderArn: { "Fn::GetAtt": [providerId, "Arn"] },
          PerExecutionEnvironmentMaxConcurrency: MANAGED_INSTANCES.concurrencyPerEnvironment,
          ExecutionEnvironmentMemoryGiBPerVCpu: 2,
        },
      });
      expect(proxy.FunctionScalingConfig).toEqual({
        MinExecutionEnvironments: 3,
        MaxExecutionEnvironments: VENDORS.length * MANAGED_INSTANCES.maxEnvironmentsPerVendor,
      });
      // Capped by environments: Lambda does not reserve concurrency for managed instances.
      expect(proxy.ReservedConcurrentExecutions).toBeUndefined();
      expect(
        ofType(resources, "AWS::Lambda::Function").filter(([, f]) => f.Properties.CapacityProviderConfig),
      ).toHaveLength(1);
      // The functions every request needs keep their reservations.
      expect(fn(stack.authorizer.function).ReservedConcurrentExecutions).toBe(
        RESERVED_CONCURRENCY.authorizer,
      );
    });
  });

  it("launches the instances in private subnets of the stack's VPC, with NAT egress, free gateway endpoints and no inbound rule", () => {
    each(({ stack, resources }) => {
      const capacity = stack.proxyCapacity;
      if (!capacity) throw new Error("no capacity provider");
      expect(ofType(resources, "AWS::EC2::VPC")).toHaveLength(1);
      const provider = (ofType(resources, "AWS::Lambda::CapacityProvider")[0] as [string, Resource])[1]
        .Properties as {
        VpcConfig: { SubnetIds: { Ref: string }[]; SecurityGroupIds: unknown[] };
        InstanceRequirements: { Architectures: string[] };
      };
      const privateIds = capacity.vpc.privateSubnets.map((subnet) =>
        stack.getLogicalId(subnet.node.defaultChild as Parameters<DmtStack["getLogicalId"]>[0]),
      );
      expect(provider.VpcConfig.SubnetIds.map((ref) => ref.Ref)).toEqual(privateIds);
      expect(privateIds.length).toBeGreaterThanOrEqual(2);
      expect(provider.InstanceRequirements.Architectures).toEqual(["arm64"]);
      // One NAT gateway per Availability Zone: an AZ's loss leaves the others their egress.
      expect(ofType(resources, "AWS::EC2::NatGateway")).toHaveLength(privateIds.length);
      const endpoints = ofType(resources, "AWS::EC2::VPCEndpoint").map(([, e]) =>
        JSON.stringify(e.Properties.ServiceName),
      );
      expect(endpoints.some((name) => name.includes("dynamodb"))).toBe(true);
      expect(endpoints.some((name) => name.includes(".s3"))).toBe(true);
      const groups = ofType(resources, "AWS::EC2::SecurityGroup").map(([, g]) => g.Properties);
      expect(groups).toHaveLength(1);
      expect(groups[0]?.SecurityGroupIngress).toBeUndefined();
      expect(ofType(resources, "AWS::EC2::FlowLog")).toHaveLength(1);
    });
  });

  it("gives the instances IPv6 through an egress-only internet gateway, off the NAT's per-GB charge, IPv4 through the NAT", () => {
    each(({ stack, resources }) => {
      const capacity = stack.proxyCapacity;
      if (!capacity) throw new Error("no capacity provider");
      const logicalId = (c: { node: { defaultChild?: unknown } }) =>
        stack.getLogicalId(c.node.defaultChild as Parameters<DmtStack["getLogicalId"]>[0]);
      const blocks = ofType(resources, "AWS::EC2::VPCCidrBlock").map(([, b]) => b.Properties);
      expect(blocks).toEqual([
        expect.objectContaining({
          AmazonProvidedIpv6CidrBlock: true,
          VpcId: { Ref: logicalId(capacity.vpc) },
        }),
      ]);
      const gateways = ofType(resources, "AWS::EC2::EgressOnlyInternetGateway");
      expect(gateways).toHaveLength(1);
      const [gatewayId] = gateways[0] as [string, Resource];
      const routes = ofType(resources, "AWS::EC2::Route").map(([, r]) => r.Properties);
      for (const subnet of capacity.vpc.privateSubnets) {
        const props = resources[logicalId(subnet)]?.Properties ?? {};
        // Each instance gets an IPv6 address at launch, from the subnet's /64 of the VPC's block.
        expect(props.AssignIpv6AddressOnCreation).toBe(true);
        expect(props.Ipv6CidrBlock).toBeDefined();
        const table = { Ref: stack.getLogicalId(subnet.node.findChild("RouteTable") as never) };
        const fromSubnet = routes.filter((r) => JSON.stringify(r.RouteTableId) === JSON.stringify(table));
        expect(fromSubnet).toContainEqual(
          expect.objectContaining({
            DestinationIpv6CidrBlock: "::/0",
            EgressOnlyInternetGatewayId: { Ref: gatewayId },
          }),
        );
        // IPv4 (AWS's APIs, vendors without IPv6) keeps its NAT gateway.
        expect(fromSubnet).toContainEqual(
          expect.objectContaining({ DestinationCidrBlock: "0.0.0.0/0", NatGatewayId: expect.anything() }),
        );
      }
      const [group] = ofType(resources, "AWS::EC2::SecurityGroup").map(([, g]) => g.Properties);
      expect(group?.SecurityGroupEgress).toContainEqual(
        expect.objectContaining({ CidrIpv6: "::/0", IpProtocol: "-1" }),
      );
      expect(group?.SecurityGroupEgress).toContainEqual(
        expect.objectContaining({ CidrIp: "0.0.0.0/0", IpProtocol: "-1" }),
      );
    });
  });

  it("gives each proxy function another id than standard compute's, so switching compute replaces it", () => {
    // Lambda cannot take a capacity provider off a function: an update in place would fail.
    const ids = (s: Synthesized) =>
      VENDORS.map((vendor) =>
        s.stack.getLogicalId(
          s.stack.proxies[vendor].fn.function.node.defaultChild as Parameters<DmtStack["getLogicalId"]>[0],
        ),
      );
    const managed = synthesized.get("function URLs, no region") as Synthesized;
    const standardIds = ids(standard);
    for (const id of ids(managed)) {
      expect(standardIds).not.toContain(id);
      expect(managed.resources[id]?.Type).toBe("AWS::Lambda::Function");
    }
  });

  it("keeps both integrations working: one function URL for every vendor's routes, or API Gateway's streaming invocations", () => {
    const urls = synthesized.get("function URLs, eu-west-1") as Synthesized;
    expect(ofType(urls.resources, "AWS::Lambda::Url")).toHaveLength(1);
    const integrations = ofType(urls.resources, "AWS::ApiGateway::Method")
      .map(([, m]) => JSON.stringify((m.Properties.Integration as { Uri?: unknown } | undefined)?.Uri ?? ""))
      .filter((uri) => uri.includes("FunctionUrl"));
    expect(integrations).toHaveLength(VENDORS.length * 2);
    expect(ofType(synthesized.get("lambda-stream, us-east-1")?.resources ?? {}, "AWS::Lambda::Url")).toEqual(
      [],
    );
  });

  it("caps the function by its environments: the vendors' calls at once over the calls per environment; a vendor at 0 is not served", () => {
    const { stack, fn } = synthesize({
      [CONTEXT.proxyCompute]: "managed-instances",
      [CONTEXT.proxyReservedConcurrency]: '{"openai":1000,"gemini":0}',
    });
    const proxy = fn(stack.proxies.openai.fn.function);
    // openai's 1,000 and the default 1,280 of anthropic and groq, 256 calls an environment.
    expect(proxy.FunctionScalingConfig).toEqual({
      MinExecutionEnvironments: 3,
      MaxExecutionEnvironments: Math.ceil((1000 + 2 * 1280) / MANAGED_INSTANCES.concurrencyPerEnvironment),
    });
    expect(variable(proxy, "DMT_VENDORS")).toBe(VENDORS.filter((v) => v !== "gemini").join(","));
    // The function may read the managed keys of the vendors it serves, not gemini's.
    expect(
      Object.keys((proxy as { Environment: { Variables: object } }).Environment.Variables),
    ).not.toContain("DMT_VENDOR_KEY_SECRET_ARN_GEMINI");
    expect(() =>
      synthesize({
        [CONTEXT.proxyCompute]: "managed-instances",
        [CONTEXT.proxyReservedConcurrency]: "0",
      }),
    ).toThrow("dmt:proxyReservedConcurrency turns every vendor off.");
  });

  it("keeps the environments at least that dmt:proxyMinEnvironments asks, never above the most", () => {
    const scaling = (s: Synthesized) => s.fn(s.stack.proxies.openai.fn.function).FunctionScalingConfig;
    expect(
      scaling(
        synthesize({ [CONTEXT.proxyCompute]: "managed-instances", [CONTEXT.proxyMinEnvironments]: "1" }),
      ),
    ).toEqual({ MinExecutionEnvironments: 1, MaxExecutionEnvironments: 20 });
    // One environment at most (256 calls): one at least, whatever was asked.
    expect(
      scaling(
        synthesize({
          [CONTEXT.proxyCompute]: "managed-instances",
          [CONTEXT.proxyReservedConcurrency]: '{"openai":256,"anthropic":0,"groq":0,"gemini":0}',
          [CONTEXT.proxyMinEnvironments]: "3",
        }),
      ),
    ).toEqual({ MinExecutionEnvironments: 1, MaxExecutionEnvironments: 1 });
  });

  it("refuses a minimum below 1, one per vendor, or without managed instances, naming the key", () => {
    const mi = { [CONTEXT.proxyCompute]: "managed-instances" };
    expect(() => synthesize({ ...mi, [CONTEXT.proxyMinEnvironments]: "0" })).toThrow(
      /dmt:proxyMinEnvironments: 0 is not a whole number >= 1/,
    );
    expect(() => synthesize({ ...mi, [CONTEXT.proxyMinEnvironments]: '{"openai":1}' })).toThrow(
      /dmt:proxyMinEnvironments: one number for the proxy function every vendor shares/,
    );
    expect(() => synthesize({ ...mi, [CONTEXT.proxyMinEnvironments]: '{"mistral":1}' })).toThrow(
      /dmt:proxyMinEnvironments: 'mistral' is not one of/,
    );
    expect(() => synthesize({ [CONTEXT.proxyMinEnvironments]: "1" })).toThrow(
      /dmt:proxyMinEnvironments applies to dmt:proxyCompute=managed-instances only/,
    );
  });
});

/** A daily fan-out (lib/daily-run.ts `fanOut`): its queue, dead-letter queue, mappings and alarms. */
function fanOutOf(part: DmtStack["compaction"] | DmtStack["retention"]) {
  const { stack, resources } = standard;
  const idOf = (construct: { node: { defaultChild?: unknown } }) =>
    stack.getLogicalId(construct.node.defaultChild as Parameters<DmtStack["getLogicalId"]>[0]);
  const queueId = idOf(part.queue);
  const deadId = idOf(part.deadLetterQueue);
  const sources = ofType(resources, "AWS::Lambda::EventSourceMapping").filter(([, m]) =>
    JSON.stringify(m.Properties.EventSourceArn).includes(queueId),
  );
  const alarms = ofType(resources, "AWS::CloudWatch::Alarm").map(([, a]) => a.Properties);
  const alarmsOn = (metric: string, queue: string) =>
    alarms.filter(
      (a) =>
        a.MetricName === metric &&
        JSON.stringify(a.Dimensions).includes(queue) &&
        (a.AlarmActions as unknown[] | undefined)?.length === 1,
    );
  return { queueId, deadId, sources, alarmsOn, functionId: idOf(part.fn.function) };
}

/** The function plans onto its queue (`queueVariable`) and works it one message at a time, 5 at once. */
function expectQueuedWork(part: DmtStack["compaction"] | DmtStack["retention"], queueVariable: string) {
  const { resources, fn } = standard;
  const { queueId, deadId, sources } = fanOutOf(part);
  const worker = fn(part.fn.function) as { Environment: { Variables: Record<string, unknown> } };
  expect(worker.Environment.Variables[queueVariable]).toEqual({ Ref: queueId });
  expect(resources[queueId]?.Properties).toMatchObject({
    VisibilityTimeout: 5400,
    RedrivePolicy: { deadLetterTargetArn: { "Fn::GetAtt": [deadId, "Arn"] }, maxReceiveCount: 3 },
  });
  expect(sources).toHaveLength(1);
  expect(sources[0]?.[1].Properties).toMatchObject({
    BatchSize: 1,
    ScalingConfig: { MaximumConcurrency: 5 },
    FunctionResponseTypes: ["ReportBatchItemFailures"],
  });
}

/** An alarm on work left undone (the dead-letter queue) and one on work waiting a day. */
function expectFanOutAlarms(part: DmtStack["compaction"] | DmtStack["retention"]) {
  const { queueId, deadId, alarmsOn } = fanOutOf(part);
  expect(alarmsOn("ApproximateNumberOfMessagesVisible", deadId)).toEqual([
    expect.objectContaining({ Threshold: 1, ComparisonOperator: "GreaterThanOrEqualToThreshold" }),
  ]);
  expect(alarmsOn("ApproximateAgeOfOldestMessage", queueId)).toEqual([
    expect.objectContaining({ Threshold: 86_400 }),
  ]);
}

describe("compaction that scales with projects", () => {
  it("plans once a day onto a queue of partitions that the same function works one at a time, 5 at once", () => {
    expectQueuedWork(standard.stack.compaction, "DMT_PARTITION_QUEUE_URL");
  });

  it("alarms on partitions left undone and on partitions waiting a day", () => {
    expectFanOutAlarms(standard.stack.compaction);
  });
});

describe("retention that scales with projects", () => {
  it("plans once a day onto a queue of projects that the same function works one at a time, 5 at once", () => {
    const retention = standard.stack.retention;
    expectQueuedWork(retention, "DMT_PROJECT_QUEUE_URL");
    // The mapping invokes the retention function, not compaction's.
    const { sources, functionId } = fanOutOf(retention);
    expect(JSON.stringify(sources[0]?.[1].Properties.FunctionName)).toContain(functionId);
  });

  it("alarms on projects left undone and on projects waiting a day", () => {
    expectFanOutAlarms(standard.stack.retention);
  });
});
