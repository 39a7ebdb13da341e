/** The part of oidc-provider (which ships no types) that the local identity provider uses. */
declare module "oidc-provider" {
  import type { IncomingMessage, ServerResponse } from "node:http";

  export interface OidcContext {
    host: string;
    body?: unknown;
    type?: string;
    oidc: {
      client?: { clientId: string; clientName?: string };
      session?: { accountId?: string; grantIdFor(clientId: string): string | undefined };
      result?: { consent?: { grantId?: string } };
      provider: Provider;
    };
  }

  export interface Grant {
    addOIDCScope(scope: string): void;
    addResourceScope(resource: string, scope: string): void;
    save(): Promise<string>;
  }

  export interface InteractionDetails {
    uid: string;
    prompt: { name: string; reasons: string[] };
    params: Record<string, unknown>;
  }

  export class Provider {
    constructor(issuer: string, configuration: Record<string, unknown>);
    readonly issuer: string;
    Grant: {
      new (init: { accountId: string; clientId: string }): Grant;
      find(id: string): Promise<Grant | undefined>;
    };
    callback(): (req: IncomingMessage, res: ServerResponse) => void;
    interactionDetails(req: IncomingMessage, res: ServerResponse): Promise<InteractionDetails>;
    interactionFinished(
      req: IncomingMessage,
      res: ServerResponse,
      result: Record<string, unknown>,
      options?: { mergeWithLastSubmission?: boolean },
    ): Promise<void>;
    on(event: string, listener: (...args: unknown[]) => void): this;
  }

  export const errors: {
    InvalidTarget: new (description?: string) => Error;
    SessionNotFound: new (description?: string) => Error;
  };

  export default Provider;
}

declare module "oidc-provider/lib/adapters/memory_adapter.js" {
  /** The provider's own in-memory storage, as an explicit adapter (the implicit one logs a warning). */
  export function createMemoryAdapter(clockTolerance?: number): new (name: string) => unknown;
}
