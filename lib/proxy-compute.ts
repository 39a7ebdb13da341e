import { Annotations, RemovalPolicy, Validations } from "aws-cdk-lib";
import {
  FlowLogDestination,
  FlowLogTrafficType,
  GatewayVpcEndpointAwsService,
  IpAddresses,
  IpProtocol,
  SecurityGroup,
  SubnetType,
  Vpc,
} from "aws-cdk-lib/aws-ec2";
import { Architecture, CapacityProvider, type Function as LambdaFunction } from "aws-cdk-lib/aws-lambda";
import { LogGroup, type RetentionDays } from "aws-cdk-lib/aws-logs";
import { Construct } from "constructs";

/**
 * Where the proxy functions run: `standard` Lambda (the default: one call per execution environment,
 * billed for the whole vendor wait), or `managed-instances`: Lambda Managed Instances, many calls at
 * once per environment on EC2 capacity that Lambda runs in the stack's VPC (docs/aws.md). The handler
 * learns which from `DMT_PROXY_COMPUTE` (lib/proxy.ts).
 */
export { PROXY_COMPUTES, type ProxyCompute } from "../lambda/handlers/runtime/config";

/**
 * Managed-instance settings. Memory at its minimum: 2 GiB per environment, at the smallest ratio of
 * 2 GiB per vCPU, so one vCPU each. Concurrency per environment set, not left to the runtime's default
 * (64 per vCPU): a call costs the proxy ~1 ms of CPU (bench/proxy-cpu.ts) plus ~1 ms allowed for TLS and
 * the SDK's requests, so 256 calls of 20 s (12.8 a second) use ~3% of the vCPU, 256 calls of 2 s ~26%;
 * the cap is memory, ~2 MB a call at most against 2 GiB (docs/aws.md, "Lambda Managed Instances").
 */
export const MANAGED_INSTANCES = {
  memoryMiB: 2048,
  memoryGiBPerVCpu: 2,
  concurrencyPerEnvironment: 256,
  /** Lambda's own default: one per Availability Zone, so an AZ going away leaves two (`dmt:proxyMinEnvironments`). */
  minEnvironments: 3,
  /** The environments at most each vendor adds by default: 5 × 256 = 1,280 of its calls at once. */
  maxEnvironmentsPerVendor: 5,
} as const;

export interface ProxyCapacityProps {
  logRetention: RetentionDays;
  /** The capacity provider's vCPUs at most (Lambda's default is 400). */
  maxVCpus?: number;
}

/**
 * The VPC and capacity provider of `managed-instances`. The instances live in private subnets of the
 * stack's own VPC, dual-stack: a vendor host with an IPv6 address is reached through the egress-only
 * internet gateway, which charges nothing per GB (Node tries IPv6 and IPv4 at once, autoSelectFamily,
 * and keeps the first to connect); IPv4 (AWS's APIs, IPv4-only vendors) goes through a NAT gateway
 * per Availability Zone; DynamoDB and S3 through gateway endpoints (free, and off the NAT's per-GB
 * charge). No inbound rule: Lambda routes invocations to the environments itself, and an egress-only
 * gateway admits no connection from outside. Rejected traffic is logged (flow logs).
 */
export class ProxyCapacity extends Construct {
  readonly vpc: Vpc;
  readonly securityGroup: SecurityGroup;
  readonly provider: CapacityProvider;

  constructor(scope: Construct, id: string, props: ProxyCapacityProps) {
    super(scope, id);
    this.vpc = new Vpc(this, "Vpc", {
      ipAddresses: IpAddresses.cidr("10.40.0.0/16"),
      // An Amazon-provided /56; each subnet a /64, its instances given an IPv6 address at launch.
      ipProtocol: IpProtocol.DUAL_STACK,
      maxAzs: 3,
      subnetConfiguration: [
        { name: "Public", subnetType: SubnetType.PUBLIC, cidrMask: 24 },
        { name: "Instances", subnetType: SubnetType.PRIVATE_WITH_EGRESS, cidrMask: 20 },
      ],
      gatewayEndpoints: {
        DynamoDb: { service: GatewayVpcEndpointAwsService.DYNAMODB },
        S3: { service: GatewayVpcEndpointAwsService.S3 },
      },
    });
    const flowLogs = new LogGroup(this, "FlowLogs", {
      retention: props.logRetention,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    this.vpc.addFlowLog("Rejected", {
      destination: FlowLogDestination.toCloudWatchLogs(flowLogs),
      trafficType: FlowLogTrafficType.REJECT,
    });
    this.securityGroup = new SecurityGroup(this, "Instances", {
      vpc: this.vpc,
      description: "dmt proxy instances: no inbound; outbound to the vendors and AWS APIs",
      allowAllOutbound: true,
      allowAllIpv6Outbound: true,
    });
    this.provider = new CapacityProvider(this, "Provider", {
      subnets: this.vpc.privateSubnets,
      securityGroups: [this.securityGroup],
      architectures: [Architecture.ARM_64],
      ...(props.maxVCpus !== undefined && { maxVCpuCount: props.maxVCpus }),
    });
    const operatorRole = this.provider.node.tryFindChild("OperatorRole");
    if (operatorRole) {
      Validations.of(operatorRole).acknowledge({
        id: "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AWSLambdaManagedEC2ResourceOperator]",
        reason:
          "Lambda's own policy for running a capacity provider's instances (launch, terminate, ENIs); Lambda keeps it current as the service changes.",
      });
    }
  }

  /**
   * Puts a proxy function on the instances: memory at its minimum, concurrency per environment set,
   * `minEnvironments` kept warm (never more than `maxEnvironments`).
   */
  addProxy(
    fn: LambdaFunction,
    maxEnvironments: number,
    minEnvironments: number = MANAGED_INSTANCES.minEnvironments,
  ): void {
    this.provider.addFunction(fn, {
      perExecutionEnvironmentMaxConcurrency: MANAGED_INSTANCES.concurrencyPerEnvironment,
      executionEnvironmentMemoryGiBPerVCpu: MANAGED_INSTANCES.memoryGiBPerVCpu,
      latestPublishedScalingConfig: {
        minExecutionEnvironments: Math.min(minEnvironments, maxEnvironments),
        maxExecutionEnvironments: maxEnvironments,
      },
    });
    // Lambda's note that the configuration can only be changed, never removed: the proxy's construct id
    // differs by compute (lib/proxy.ts), so a switch replaces the function.
    Annotations.of(fn).acknowledgeInfo(
      "aws-lambda:Function.CapacityProviderConfiguration",
      "The proxy function's id differs by compute: switching compute replaces it.",
    );
  }
}
