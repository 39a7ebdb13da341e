import type { SQSClient } from "@aws-sdk/client-sqs";
import { buildEvent, type CloudEvent, type EventPublisher } from "../../core/cloudevent";
import { SigningKeys, sendSigned } from "../sigv4";
import { busEntry, checkPut } from "./bus";

export interface SignedPublisherOptions {
  busName: string;
  /** Another EventBridge endpoint (tests); unset in AWS. */
  endpoint?: string;
  /** The function's credentials and region, as one of its SDK clients resolved them. */
  credentials: SQSClient["config"]["credentials"];
  region: SQSClient["config"]["region"];
  clock?: () => number;
}

/**
 * The proxy functions' publisher: each event is one SigV4-signed PutEvents request (EventBridge's JSON
 * protocol), the same entry as `EventBridgePublisher` puts, without the EventBridge client, which
 * would take the proxy bundle past its 1 MB budget (docs/aws.md "Bundle"), as `S3SpoolWriter` does
 * for S3.
 */
export class SignedEventBridgePublisher implements EventPublisher {
  private readonly keys = new SigningKeys();

  constructor(private readonly options: SignedPublisherOptions) {}

  async publish(input: Parameters<EventPublisher["publish"]>[0]): Promise<CloudEvent> {
    const event = buildEvent(input, (this.options.clock ?? Date.now)());
    const region = await this.options.region();
    const url = new URL(this.options.endpoint ?? `https://events.${region}.amazonaws.com/`);
    const body = JSON.stringify({
      Entries: [{ ...busEntry(this.options.busName, event), Time: Date.parse(event.time) / 1000 }],
    });
    const response = await sendSigned(
      { service: "events", region, credentials: this.options.credentials, keys: this.keys },
      {
        method: "POST",
        url,
        headers: { "content-type": "application/x-amz-json-1.1", "x-amz-target": "AWSEvents.PutEvents" },
        body,
      },
    );
    const answer = await response.text();
    if (!response.ok) {
      const type = response.headers.get("x-amzn-errortype") ?? /"__type":"([^"]+)"/.exec(answer)?.[1];
      throw new Error(`the event bus refused the event: ${response.status} ${type ?? "no error type"}`);
    }
    checkPut(JSON.parse(answer) as Parameters<typeof checkPut>[0]);
    return event;
  }
}
