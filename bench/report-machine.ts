import { cpus, loadavg, totalmem } from "node:os";

/** The machine a benchmark ran on: results name it, since this one is shared and its load varies. */
export interface Machine {
  node: string;
  cpus: number;
  cpu: string | undefined;
  memoryGb: number;
  loadavg: number[];
}

export function machine(): Machine {
  return {
    node: process.version,
    cpus: cpus().length,
    cpu: cpus()[0]?.model,
    memoryGb: Math.round(totalmem() / 2 ** 30),
    loadavg: loadavg().map((l) => Math.round(l * 100) / 100),
  };
}
