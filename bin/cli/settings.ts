import { errors } from "../../lambda/core/errors";
import { DestinationError, parseExportDestination } from "../../lambda/core/export-destination";
import { privacyView, updatePrivacySettings } from "../../lambda/core/privacy";
import { command } from "./command";
import { flag, required, text, UsageError, wholeNumber } from "./options";

type PrivacyResult = { projectId: string } & ReturnType<typeof privacyView>;

function printPrivacy({ projectId, store, retentionDays, bodyRetentionDays }: PrivacyResult): string {
  const days = (n: number | null) => (n === null ? "kept until deleted" : `${n} days`);
  return [
    `${projectId}: store level ${store}`,
    `  records: ${days(retentionDays)}`,
    `  bodies:  ${days(bodyRetentionDays ?? retentionDays)}`,
  ].join("\n");
}

/** An export destination refused, as the field it came from. */
function destinationProblem(err: unknown): unknown {
  return err instanceof DestinationError ? errors.invalidField("export-bucket", err.message) : err;
}

/** `dmt settings ...`: where a project's exports go, what its records keep and for how long. */
export const settingsCommands = [
  command({
    name: "settings show",
    summary: "what records keep and for how long",
    options: { project: required("<id>", "the project") },
    examples: ["dmt settings show --project demo"],
    run: async ({ values, open }) => {
      const project = await (await open()).store.getProject(values.project);
      if (!project) throw errors.notFound(`Project '${values.project}' does not exist.`);
      return { projectId: values.project, ...privacyView(project) };
    },
    print: printPrivacy,
  }),
  command({
    name: "settings set",
    summary: "where exports go, what records keep and for how long",
    options: {
      project: required("<id>", "the project"),
      "export-bucket": text(
        "<s3://bucket/prefix | file:///folder>",
        "where exports are written (a folder only locally)",
      ),
      "no-export-bucket": flag("streams exports back again instead"),
      store: text("full|metadata|none", "what a call's record keeps: bodies too, metadata only, nothing"),
      "retention-days": wholeNumber("N", "days a record is kept, 1 to 3650 (default: until deleted)"),
      "body-retention-days": wholeNumber("N", "days bodies are kept, at most --retention-days"),
    },
    examples: [
      "dmt settings set --project demo --store metadata --retention-days 90",
      "dmt settings set --project demo --export-bucket s3://acme-exports/dmt",
    ],
    run: async ({ values, open }) => {
      const url = values["export-bucket"];
      const clear = values["no-export-bucket"];
      if (url !== undefined && clear)
        throw new UsageError("give one of --export-bucket and --no-export-bucket");
      const privacy = {
        ...(values.store !== undefined && { store: values.store }),
        ...(values["retention-days"] !== undefined && { retentionDays: values["retention-days"] }),
        ...(values["body-retention-days"] !== undefined && {
          bodyRetentionDays: values["body-retention-days"],
        }),
      };
      const changesPrivacy = Object.keys(privacy).length > 0;
      if (url === undefined && !clear && !changesPrivacy) {
        throw new UsageError(
          "give --export-bucket, --no-export-bucket, --store, --retention-days or --body-retention-days",
        );
      }
      if (changesPrivacy) {
        const services = await open();
        const settings = await updatePrivacySettings(
          services.store,
          services.privacy,
          values.project,
          privacy,
        );
        if (url === undefined && !clear) return { projectId: values.project, ...privacyView(settings) };
      }
      try {
        if (url !== undefined) parseExportDestination(url);
        const services = await open();
        const projectId = await services.project(values.project);
        // In AWS a folder means nothing to the data API: s3:// only.
        await services.exportSettings.setExportDestination(projectId, url);
        return { projectId, exportBucket: url ?? null };
      } catch (err) {
        throw destinationProblem(err);
      }
    },
    print: (result) => {
      if ("store" in result) return printPrivacy(result);
      return result.exportBucket
        ? `Exports of ${result.projectId} now go to ${result.exportBucket}.`
        : `Exports of ${result.projectId} are streamed back again.`;
    },
  }),
];
