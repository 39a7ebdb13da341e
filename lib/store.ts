import { RemovalPolicy } from "aws-cdk-lib";
import { AttributeType, BillingMode, ProjectionType, Table, TableEncryption } from "aws-cdk-lib/aws-dynamodb";
import { Grant, type IGrantable } from "aws-cdk-lib/aws-iam";
import { Function as LambdaFunction } from "aws-cdk-lib/aws-lambda";
import { Construct } from "constructs";
import { TABLES, type TableName } from "../lambda/adapters/dynamodb/tables";

export interface StoreProps {
  /** RETAIN keeps the tables (and turns on deletion protection) when the stack is deleted. */
  removalPolicy: RemovalPolicy;
}

const ATTRIBUTE_TYPES = { S: AttributeType.STRING, N: AttributeType.NUMBER } as const;

/**
 * The DynamoDB tables, generated from `TABLES` (the declaration the local stack creates in dynalite),
 * so AWS and local cannot drift: on demand, point-in-time recovery, KMS encryption, TTL where declared.
 */
export class Store extends Construct {
  readonly tables: Record<TableName, Table>;

  constructor(scope: Construct, id: string, props: StoreProps) {
    super(scope, id);
    const tables = {} as Record<TableName, Table>;
    for (const name of Object.keys(TABLES) as TableName[]) {
      const definition = TABLES[name];
      const table = new Table(this, constructId(name), {
        partitionKey: { name: definition.partitionKey, type: AttributeType.STRING },
        ...(definition.sortKey && {
          sortKey: { name: definition.sortKey.name, type: ATTRIBUTE_TYPES[definition.sortKey.type] },
        }),
        billingMode: BillingMode.PAY_PER_REQUEST,
        pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
        encryption: TableEncryption.AWS_MANAGED,
        ...(definition.ttlAttribute && { timeToLiveAttribute: definition.ttlAttribute }),
        removalPolicy: props.removalPolicy,
        deletionProtection: props.removalPolicy === RemovalPolicy.RETAIN,
      });
      for (const index of definition.indexes ?? []) {
        table.addGlobalSecondaryIndex({
          indexName: index.name,
          partitionKey: { name: index.partitionKey, type: AttributeType.STRING },
          sortKey: { name: index.sortKey.name, type: ATTRIBUTE_TYPES[index.sortKey.type] },
          projectionType: index.projection === "keys" ? ProjectionType.KEYS_ONLY : ProjectionType.ALL,
        });
      }
      tables[name] = table;
    }
    this.tables = tables;
  }

  /**
   * Query on a table's indexes: the holds' sparse index (`holdsDue`) of the credits and the budget
   * counters, read by whoever reads open holds' charges or sweeps them.
   */
  grantIndexQuery(grantee: IGrantable, table: TableName): Grant {
    return Grant.addToPrincipal({
      grantee,
      actions: ["dynamodb:Query"],
      resourceArns: (TABLES[table].indexes ?? []).map(
        (index) => `${this.tables[table].tableArn}/index/${index.name}`,
      ),
    });
  }

  /**
   * Exactly these DynamoDB actions on one table (not its indexes), under optional IAM conditions. A
   * function granted a table is told its name (`DMT_TABLE_<NAME>`, what `tableNames()` reads in the
   * handlers), and only the names of the tables it may use: Lambda's environment holds 4 KB in all.
   */
  grant(
    grantee: IGrantable,
    table: TableName,
    actions: string[],
    conditions?: Record<string, Record<string, unknown>>,
  ): Grant {
    if (grantee instanceof LambdaFunction) {
      grantee.addEnvironment(`DMT_TABLE_${table.toUpperCase()}`, this.tables[table].tableName);
    }
    return Grant.addToPrincipal({
      grantee,
      actions: actions.map((action) => `dynamodb:${action}`),
      resourceArns: [this.tables[table].tableArn],
      ...(conditions && { conditions }),
    });
  }
}

/** `keys` -> `Keys`, `idempotency_records` -> `IdempotencyRecords`. */
export function constructId(name: string): string {
  return name.replace(/(^|[-_])([a-z])/g, (_, _sep: string, c: string) => c.toUpperCase());
}
