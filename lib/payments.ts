import { Duration, Validations } from "aws-cdk-lib";
import type { Function as LambdaFunction } from "aws-cdk-lib/aws-lambda";
import { type CfnSecret, type ISecret, Secret } from "aws-cdk-lib/aws-secretsmanager";
import { Construct } from "constructs";
import { parseAmounts } from "../lambda/core/payments";
import { DmtFunction, type LambdaDefaults } from "./lambda-defaults";
import type { Store } from "./store";

export interface StripePaymentsProps {
  /** The deployment's Stripe secret key: the one secret billing exports send with too (lib/billing.ts). */
  secretKey: ISecret;
  store: Store;
  defaults: LambdaDefaults;
  /** Written in each payment's metadata; events of another deployment's payments are ignored. */
  deployment: string;
  /** The amounts an admin may buy, whole dollars (`10,25,100`; context `dmt:stripeAmountsUsd`). */
  amountsUsd?: string;
}

/**
 * Credits bought through Stripe in AWS (docs/billing.md): the webhook's signing secret, created empty
 * beside the secret key, the webhook's function (the data API's route `POST /stripe/webhook`, lib/api.ts),
 * and what each function that takes part may do. Functions get the secrets'
 * ARNs and read the values from Secrets Manager (lambda/handlers/runtime/stripe.ts); the template never
 * holds them. While either secret is empty, payments are not configured.
 */
export class StripePayments extends Construct {
  readonly secretKey: ISecret;
  readonly webhookSecret: Secret;
  /** `POST /stripe/webhook`: its own function, so that Stripe's SDK stays out of the data API's bundle. */
  readonly webhook: DmtFunction;
  private readonly props: StripePaymentsProps;

  constructor(scope: Construct, id: string, props: StripePaymentsProps) {
    super(scope, id);
    this.props = props;
    this.secretKey = props.secretKey;
    this.webhookSecret = new Secret(this, "WebhookSecret", {
      description:
        "dmt: the signing secret (whsec_...) of the Stripe webhook endpoint (fill with: aws secretsmanager put-secret-value)",
    });
    // Without a value CloudFormation creates the secret empty; CDK would otherwise generate a password.
    (this.webhookSecret.node.defaultChild as CfnSecret).addPropertyDeletionOverride("GenerateSecretString");
    Validations.of(this.webhookSecret).acknowledge({
      id: "AwsSolutions-SMG4",
      reason:
        "Stripe issues the signing secret with the webhook endpoint; the operator rolls it in Stripe's dashboard and puts the new value here.",
    });
    this.webhook = new DmtFunction(this, "Webhook", {
      handler: "stripe-webhook",
      description: "dmt: Stripe webhook (/stripe/webhook)",
      defaults: props.defaults,
      // Stripe waits up to 20 s for an answer; a grant is a few DynamoDB writes.
      timeout: Duration.seconds(20),
    });
    this.connect(this.webhook.function);
  }

  /**
   * A function that applies Stripe's events or charges recharges: the two secrets (read only), the
   * payments table, the credits it grants or takes back, the project a payment names, and the alert
   * rules a grant re-checks.
   */
  connect(fn: LambdaFunction, { scan = false }: { scan?: boolean } = {}): void {
    const { store } = this.props;
    this.settings(fn);
    // Auto-recharge's check reads every rule: one scan of the payments table per sweep.
    const paymentActions = ["GetItem", "PutItem", "UpdateItem", "Query", ...(scan ? ["Scan"] : [])];
    store.grant(fn, "payments", paymentActions);
    store.grant(fn, "credits", ["GetItem", "PutItem", "UpdateItem"]);
    store.grant(fn, "ledger", ["GetItem", "PutItem"]);
    store.grant(fn, "projects", ["GetItem"]);
    // A grant re-checks the project's low-balance alert at once, as locally: read the rules, and fire
    // or re-arm one with a conditional update (lambda/handlers/runtime/stripe.ts).
    store.grant(fn, "alertRules", ["Query", "UpdateItem"]);
  }

  /**
   * The dashboard API: Buy credits (a Checkout session for one of the amounts, back to `dashboardUrl`)
   * and the auto-recharge rule. It reads both secrets (payments are on only once both are filled, as
   * in every function: a purchase whose webhook cannot be verified would never be granted) and the
   * project's billing profile in the payments table, and writes only the profile's rule; it grants
   * nothing (the webhook does), so no credits or ledger rights beyond the dashboard's own.
   */
  connectDashboard(fn: LambdaFunction, dashboardUrl: string): void {
    this.settings(fn);
    fn.addEnvironment("DMT_DASHBOARD_URL", dashboardUrl);
    this.props.store.grant(fn, "payments", ["GetItem", "UpdateItem"]);
  }

  /** The secrets' ARNs (never values), read access to those two only, and the deployment's settings. */
  private settings(fn: LambdaFunction): void {
    fn.addEnvironment("DMT_STRIPE_SECRET_ARN", this.secretKey.secretArn);
    fn.addEnvironment("DMT_STRIPE_WEBHOOK_SECRET_ARN", this.webhookSecret.secretArn);
    fn.addEnvironment("DMT_STRIPE_DEPLOYMENT", this.props.deployment);
    if (this.props.amountsUsd !== undefined) {
      // Refused at synth, naming the setting, rather than at the functions' cold start.
      parseAmounts(this.props.amountsUsd);
      fn.addEnvironment("DMT_STRIPE_AMOUNTS_USD", this.props.amountsUsd);
    }
    this.secretKey.grantRead(fn);
    this.webhookSecret.grantRead(fn);
  }
}
