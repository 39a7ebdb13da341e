import { Duration, Stack } from "aws-cdk-lib";
import {
  Alarm,
  ComparisonOperator,
  GraphWidget,
  type IMetric,
  Metric,
  TreatMissingData,
} from "aws-cdk-lib/aws-cloudwatch";
import { Rule, Schedule } from "aws-cdk-lib/aws-events";
import { LambdaFunction } from "aws-cdk-lib/aws-events-targets";
import { Construct } from "constructs";
import { DmtFunction, type LambdaDefaults } from "./lambda-defaults";
import type { Observability } from "./observability";
import type { Vendor } from "./secrets";
import type { Store } from "./store";

/** How often expired credit holds are released. */
export const SWEEP_SCHEDULE = Duration.minutes(1);

/** Where the functions' Powertools metrics go: the namespace the log-based metrics use too. */
export function metricsNamespace(scope: Construct): string {
  return `dmt/${Stack.of(scope).stackName}`;
}

export interface MeteringProps {
  defaults: LambdaDefaults;
  store: Store;
  observability: Observability;
  vendors: readonly Vendor[];
}

/**
 * Metering's own parts in AWS: the credit sweeper (`lambda/handlers/sweeper.ts`), run every minute,
 * which releases the holds a crashed or frozen call left open once expired (it may read and scan the
 * credits table and write the ledger, nothing else), its alarm, and a dashboard row of the proxy
 * functions' metering metrics.
 */
export class Metering extends Construct {
  readonly sweeper: DmtFunction;

  constructor(scope: Construct, id: string, props: MeteringProps) {
    super(scope, id);
    const namespace = metricsNamespace(this);
    this.sweeper = new DmtFunction(this, "Sweeper", {
      handler: "sweeper",
      description: "dmt: releases expired credit holds (every minute)",
      defaults: props.defaults,
      // Runs may overlap (the protocol is idempotent); a long one still ends before the next few pile up.
      timeout: Duration.minutes(2),
      environment: { DMT_METRICS_NAMESPACE: namespace },
    });
    const fn = this.sweeper.function;
    // It reads what is open through the holds' sparse index, never a scan (hold-items.ts).
    for (const table of ["credits", "budgetCounters"] as const) {
      props.store.grant(fn, table, ["GetItem", "PutItem", "UpdateItem", "DeleteItem"]);
      props.store.grantIndexQuery(fn, table);
    }
    props.store.grant(fn, "ledger", ["GetItem", "PutItem"]);
    new Rule(this, "Schedule", {
      description: "dmt: release expired credit holds",
      schedule: Schedule.rate(SWEEP_SCHEDULE),
      // The next run is a minute away; a failed one is not retried.
      targets: [new LambdaFunction(fn, { retryAttempts: 0 })],
    });

    const { observability } = props;
    const errors = fn.metricErrors({ statistic: "Sum", period: Duration.minutes(5) });
    observability.alarms.push(
      new Alarm(this, "SweeperFailing", {
        metric: errors,
        alarmDescription:
          "The credit sweeper failed in each of the last 15 minutes' 5-minute periods: expired holds stay debited.",
        threshold: 1,
        evaluationPeriods: 3,
        datapointsToAlarm: 3,
        comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: TreatMissingData.NOT_BREACHING,
      }),
    );

    // Powertools puts `service` and the handler's `function` (and the proxies' `vendor`) on each metric.
    const metric = (metricName: string, dimensions: Record<string, string>, label?: string): IMetric =>
      new Metric({
        namespace,
        metricName,
        dimensionsMap: { service: "dmt", ...dimensions },
        statistic: "Sum",
        period: Duration.minutes(1),
        ...(label !== undefined && { label }),
      });
    const perVendor = (metricName: string) =>
      props.vendors.map((vendor) =>
        metric(metricName, { function: "proxy", vendor }, `${metricName} ${vendor}`),
      );
    observability.dashboard.addWidgets(
      new GraphWidget({ title: "Metering: proxied calls", left: perVendor("ProxyCalls") }),
      new GraphWidget({
        title: "Metering: refused (rate limit, credits)",
        left: [
          ...perVendor("RateLimited"),
          ...perVendor("InsufficientCredits"),
          metric("RateLimited", { function: "data-api" }, "RateLimited data API"),
        ],
      }),
      new GraphWidget({ title: "Metering: charged (micro-USD)", left: perVendor("ChargedMicros") }),
      new GraphWidget({
        title: "Credit sweeper",
        left: ["HoldsReleased", "SettlementsCompleted", "GrantsCompleted"].map((name) =>
          metric(name, { function: "sweeper" }),
        ),
        right: [errors],
      }),
    );
  }
}
