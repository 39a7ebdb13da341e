import type { Reply, SimRequest, SimState, SimulatedError } from "./reply";

export type Route = (req: SimRequest, state: SimState) => Reply;

/** One vendor's wire behaviour, as the simulator's dispatcher uses it. */
export interface VendorSim {
  /** The vendor's refusal (a 401) when its own auth header is missing, else undefined. */
  authenticate(req: SimRequest): SimulatedError | undefined;
  /** The route for a request, or undefined when the vendor has no such route. */
  route(req: SimRequest): Route | undefined;
  /** The vendor's answer to an unknown route. */
  notFound(req: SimRequest): SimulatedError;
  /** An error in the vendor's own shape. */
  errorReply(error: SimulatedError, req: SimRequest): Reply;
  /** Headers every answer of the vendor carries (its request id). */
  headers(req: SimRequest): Record<string, string>;
}

/** Default messages for faults injected with a bare status. */
export function defaultMessage(status: number): string {
  switch (status) {
    case 400:
      return "Simulated bad request.";
    case 401:
      return "Simulated authentication failure.";
    case 403:
      return "Simulated permission failure.";
    case 404:
      return "Simulated not found.";
    case 429:
      return "Rate limit reached (simulated). Please try again later.";
    case 529:
      return "Overloaded (simulated).";
    default:
      return status >= 500
        ? "The server had an error while processing your request (simulated)."
        : "Simulated error.";
  }
}
