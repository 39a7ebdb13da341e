import type { DescribeStacksCommandOutput } from "@aws-sdk/client-cloudformation";
import { setupProblem } from "../aws-target";

/** The deployed stack's `ApiUrl` output, read with the caller's AWS credentials and region. */
export async function stackApiUrl(stackName: string): Promise<string> {
  const { CloudFormationClient, DescribeStacksCommand } = await import("@aws-sdk/client-cloudformation");
  const cloudFormation = new CloudFormationClient({});
  let described: DescribeStacksCommandOutput;
  try {
    described = await cloudFormation.send(new DescribeStacksCommand({ StackName: stackName }));
  } catch (err) {
    throw setupProblem(err instanceof Error ? err : new Error(String(err)), stackName);
  } finally {
    cloudFormation.destroy();
  }
  const url = described.Stacks?.[0]?.Outputs?.find((o) => o.OutputKey === "ApiUrl")?.OutputValue;
  if (!url)
    throw new Error(`Stack '${stackName}' has no ApiUrl output: deploy the current version of the stack.`);
  return url;
}
