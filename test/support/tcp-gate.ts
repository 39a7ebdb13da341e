import { type AddressInfo, connect, createServer, type Socket } from "node:net";

/**
 * A TCP forwarder that can hold what clients send: put in front of a store, it keeps a chosen
 * request "in flight" for exactly as long as a test wants, with no timing involved.
 */
export interface TcpGate {
  port: number;
  /**
   * Holds, from now on, client bytes for which `match` is true and everything after them on the same
   * connection (to keep order); resolves once something is held.
   */
  hold(match?: (chunk: Buffer) => boolean): Promise<void>;
  /** Forwards everything held, in order, and stops holding. */
  release(): void;
  close(): Promise<void>;
}

export async function startTcpGate(targetPort: number): Promise<TcpGate> {
  let match: ((chunk: Buffer) => boolean) | undefined;
  let onHeld: (() => void) | undefined;
  let held: { upstream: Socket; chunk: Buffer }[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(targetPort, "127.0.0.1");
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
      socket.on("error", () => {
        client.destroy();
        upstream.destroy();
      });
    }
    upstream.pipe(client);
    client.on("end", () => upstream.end());
    client.on("data", (chunk: Buffer) => {
      const behindHeld = held.some((h) => h.upstream === upstream);
      if (!behindHeld && !match?.(chunk)) {
        upstream.write(chunk);
        return;
      }
      held.push({ upstream, chunk });
      onHeld?.();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    hold(matching = () => true) {
      match = matching;
      return new Promise((resolve) => {
        onHeld = resolve;
      });
    },
    release() {
      match = undefined;
      onHeld = undefined;
      for (const { upstream, chunk } of held) upstream.write(chunk);
      held = [];
    },
    close() {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
