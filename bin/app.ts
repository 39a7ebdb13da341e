import { App } from "aws-cdk-lib";
import { defineApp } from "../lib/app";

// The CDK app (`npx cdk synth`, `npx cdk deploy`): see docs/aws.md.
defineApp(new App());
