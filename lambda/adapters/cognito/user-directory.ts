import { CognitoIdentityProviderClient, ListUsersCommand } from "@aws-sdk/client-cognito-identity-provider";
import type { UserDirectory } from "../../core/members";

export interface CognitoDirectoryOptions {
  userPoolId: string;
  region: string;
  /** A stand-in's URL in tests; Cognito's own endpoint otherwise. */
  endpoint?: string;
}

/**
 * The dashboard's users by email, from the stack's Cognito user pool (`cognito-idp:ListUsers`): how
 * the Members page and `dmt members add` find whom to invite. A user's id is the tokens' `sub`.
 */
export function cognitoUserDirectory(options: CognitoDirectoryOptions): UserDirectory & { close(): void } {
  const cognito = new CognitoIdentityProviderClient({
    region: options.region,
    ...(options.endpoint && { endpoint: options.endpoint }),
  });
  return {
    async findUserId(email) {
      // A filter value is quoted: an email with a quote cannot be one, so nobody has it.
      if (email.includes('"') || email.includes("\\")) return undefined;
      const out = await cognito.send(
        new ListUsersCommand({ UserPoolId: options.userPoolId, Filter: `email = "${email}"`, Limit: 2 }),
      );
      return out.Users?.[0]?.Attributes?.find((a) => a.Name === "sub")?.Value;
    },
    /** Ends the client's connections (a one-shot CLI command; a Lambda keeps its client). */
    close: () => cognito.destroy(),
  };
}
