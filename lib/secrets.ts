import { type RemovalPolicy, SecretValue, Validations } from "aws-cdk-lib";
import { Key } from "aws-cdk-lib/aws-kms";
import { type CfnSecret, Secret } from "aws-cdk-lib/aws-secretsmanager";
import { Construct } from "constructs";
import { VENDOR_NAMES, type VendorName } from "../lambda/core/vendor-names";
import { constructId } from "./store";

export type Vendor = VendorName;
export const VENDORS = VENDOR_NAMES;

export interface SecretsProps {
  /** For the BYOK key: RETAIN keeps it, so stored customer vendor keys stay decryptable. */
  removalPolicy: RemovalPolicy;
  /** The origin secret is the function-URL integration's (default true). */
  originSecret?: boolean;
}

/**
 * The stack's secrets: one managed vendor key per vendor (created empty; the operator fills it), the
 * KMS key that envelope-encrypts customers' own vendor keys (BYOK), and the origin secret that API
 * Gateway sends to the proxy functions' URLs so that direct calls to them can be refused.
 */
export class Secrets extends Construct {
  readonly vendorKeys: Record<Vendor, Secret>;
  readonly byokKey: Key;
  /** Only with the function-URL integration. */
  readonly originSecret: Secret | undefined;
  /** Keys the user-id hash of level `none`: the proxy functions and the deletion steps read it. */
  readonly userIdKey: Secret;

  constructor(scope: Construct, id: string, props: SecretsProps) {
    super(scope, id);
    const vendorKeys = {} as Record<Vendor, Secret>;
    for (const vendor of VENDORS) {
      const secret = new Secret(this, `VendorKey${constructId(vendor)}`, {
        description: `dmt: the managed ${vendor} API key (fill with: aws secretsmanager put-secret-value)`,
      });
      // Without a value CloudFormation creates the secret empty; CDK would otherwise generate a password.
      (secret.node.defaultChild as CfnSecret).addPropertyDeletionOverride("GenerateSecretString");
      Validations.of(secret).acknowledge({
        id: "AwsSolutions-SMG4",
        reason: `The ${vendor} key is issued in the vendor's console; the operator rotates it there and puts the new value here.`,
      });
      vendorKeys[vendor] = secret;
    }
    this.vendorKeys = vendorKeys;

    this.byokKey = new Key(this, "ByokKey", {
      description: "dmt: envelope encryption of customers' own vendor keys (BYOK)",
      enableKeyRotation: true,
      removalPolicy: props.removalPolicy,
    });

    this.userIdKey = new Secret(this, "UserIdKey", {
      description: "dmt: keys the user-id hash of projects that store at level none; never rotate it",
      generateSecretString: { passwordLength: 64, excludePunctuation: true },
      removalPolicy: props.removalPolicy,
    });
    Validations.of(this.userIdKey).acknowledge({
      id: "AwsSolutions-SMG4",
      reason:
        "Records of level none keep users as an HMAC under this key; a new key would stop deletion requests and per-user figures from matching the stored hashes (docs/privacy.md).",
    });

    this.originSecret = props.originSecret === false ? undefined : this.createOriginSecret();
  }

  private createOriginSecret(): Secret {
    const originSecret = new Secret(this, "OriginSecret", {
      description:
        "dmt: shared by API Gateway and the proxy functions; refuses direct calls to function URLs",
      // A header value: letters and digits only, ~285 bits.
      generateSecretString: { passwordLength: 48, excludePunctuation: true },
    });
    Validations.of(originSecret).acknowledge({
      id: "AwsSolutions-SMG4",
      reason:
        "API Gateway's integrations take the origin secret at deploy time; it is rotated by putting a new value and deploying with its version id, while the functions accept the current and the previous value (docs/aws.md).",
    });
    return originSecret;
  }

  /**
   * The origin secret as CloudFormation resolves it at deploy time: a dynamic reference, never the value.
   * CloudFormation reads it again only when the reference changes, so a rotation names the new version.
   */
  originSecretReference(secret: Secret, versionId?: string): string {
    return SecretValue.secretsManager(secret.secretArn, {
      ...(versionId !== undefined && { versionId }),
    }).unsafeUnwrap();
  }
}
