import { command } from "./command";
import { table } from "./format";
import { text } from "./options";

/** `dmt compaction run`: what AWS runs daily, now, over the local data dir. */
export const compactionCommands = [
  command({
    name: "compaction run",
    summary: "merges each closed day's small warehouse files now (AWS runs it daily)",
    options: { project: text("<id>", "only this project (default: every project)") },
    examples: ["dmt compaction run"],
    run: async ({ values, open }) => {
      const services = await open();
      const projectId = values.project === undefined ? undefined : await services.project(values.project);
      return services.compaction({ ...(projectId !== undefined && { projectId }) });
    },
    print: (report) => {
      const rows = report.partitions.map((p) => ({
        project: p.projectId,
        day: p.day,
        outcome: p.outcome,
        filesBefore: p.filesBefore,
        filesAfter: p.filesAfter,
        rows: p.rows,
      }));
      return rows.length === 0
        ? `Compaction run ${report.runId}: no closed day had files to merge.`
        : `Compaction run ${report.runId}:\n${table(rows, ["project", "day", "outcome", "filesBefore", "filesAfter", "rows"])}`;
    },
  }),
];
