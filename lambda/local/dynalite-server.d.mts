// Types of dynalite-server.mjs.

/** dynalite's server: an http.Server whose close() also closes the LevelDB files. */
export function startDynalite(
  path: string,
  listening: (port: number) => void,
  failed: (err: Error) => void,
): { close(callback: () => void): void };
