import { VENDOR_NAMES } from "../../../lambda/core/vendor-names";
import type { ExportInput, PrivacyView, StoreLevel, Vendor, VendorKeyView } from "../api";
import { type Child, h, icon, replace } from "../dom";
import { formError, onSubmit } from "../form";
import { timeCell } from "../format";
import { VENDOR_LABELS } from "../labels";
import { errorMessage, loadInto, modal, type Page, type PageContext, pageHead } from "./page";
import { alertsSection, webhooksSection } from "./settings-alerts";
import { deletionSection } from "./settings-deletion";

const VENDORS = VENDOR_NAMES.map((vendor): [vendor: Vendor, label: string] => [
  vendor,
  VENDOR_LABELS[vendor],
]);

function section(title: string, ...children: Child[]): HTMLElement {
  return h("section", { class: "card" }, h("h2", { class: "card-title" }, title), ...children);
}

/** Sets or replaces a vendor key. The key goes to the API once and is never shown again. */
function openVendorKeyDialog(ctx: PageContext, vendor: Vendor, label: string, onSaved: () => void): void {
  const el = modal("vendor-key-title");
  const input = h("input", {
    id: "vendor-key",
    type: "password",
    autocomplete: "off",
    spellcheck: "false",
    required: true,
    "aria-describedby": "vendor-key-hint",
  });
  const error = formError();
  const save = h("button", { type: "submit", class: "button primary" }, "Save key");
  const form = h(
    "form",
    { class: "form", novalidate: true },
    h("h2", { id: "vendor-key-title" }, `${label} API key`),
    error,
    h("label", { for: "vendor-key", class: "field-label" }, "Key"),
    input,
    h(
      "p",
      { class: "hint", id: "vendor-key-hint" },
      "Stored encrypted. Only its last 4 characters are ever shown again. Calls to this vendor then use it and spend no credits.",
    ),
    h(
      "div",
      { class: "dialog-actions" },
      h("button", { type: "button", class: "button", on: { click: () => el.close() } }, "Cancel"),
      save,
    ),
  );
  onSubmit(form, {
    error,
    button: save,
    busyLabel: "Saving…",
    read: () => input.value,
    send: async (key) => {
      await ctx.api.setVendorKey(ctx.project.projectId, vendor, key);
      el.close();
      ctx.toast(`The ${label} key was saved.`);
      onSaved();
    },
    fieldOf: () => input,
  });
  el.append(form);
  el.showModal();
  input.focus();
}

function openDeleteDialog(ctx: PageContext, vendor: Vendor, label: string, onDeleted: () => void): void {
  const el = modal("delete-vendor-key-title");
  const error = formError();
  const confirm = h("button", { type: "button", class: "button danger" }, "Delete key");
  const cancel = h("button", { type: "button", class: "button", on: { click: () => el.close() } }, "Cancel");
  confirm.addEventListener("click", async () => {
    confirm.disabled = true;
    try {
      await ctx.api.deleteVendorKey(ctx.project.projectId, vendor);
      el.close();
      ctx.toast(`The ${label} key was deleted.`);
      onDeleted();
    } catch (err) {
      error.textContent = errorMessage(err);
      confirm.disabled = false;
    }
  });
  el.append(
    h("h2", { id: "delete-vendor-key-title" }, `Delete the ${label} key?`),
    error,
    h("p", {}, `Calls to ${label} will use the service's key again and be billed to credits.`),
    h("div", { class: "dialog-actions" }, cancel, confirm),
  );
  el.showModal();
  cancel.focus();
}

function vendorKeysTable(ctx: PageContext, keys: VendorKeyView[], reload: () => void): HTMLElement {
  const byVendor = new Map(keys.map((k) => [k.vendor, k]));
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      { class: "table" },
      h("caption", { class: "sr-only" }, "Vendor keys"),
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          ...["Vendor", "Key", "Updated"].map((t) => h("th", { scope: "col" }, t)),
          h("th", { scope: "col" }, h("span", { class: "sr-only" }, "Actions")),
        ),
      ),
      h(
        "tbody",
        {},
        ...VENDORS.map(([vendor, label]) => {
          const stored = byVendor.get(vendor);
          return h(
            "tr",
            { "data-vendor": vendor },
            h("td", {}, h("strong", {}, label)),
            h(
              "td",
              {},
              stored ? h("code", {}, `••••${stored.last4}`) : h("span", { class: "muted" }, "Not set"),
            ),
            h("td", {}, stored ? timeCell(stored.updatedAt, "") : h("span", { class: "muted" }, "—")),
            h(
              "td",
              { class: "row-actions" },
              h(
                "button",
                {
                  type: "button",
                  class: "button small",
                  "data-writes": "",
                  "aria-label": `${stored ? "Replace" : "Set"} the ${label} key`,
                  on: { click: () => openVendorKeyDialog(ctx, vendor, label, reload) },
                },
                stored ? "Replace" : "Set key",
              ),
              stored
                ? h(
                    "button",
                    {
                      type: "button",
                      class: "button small danger-quiet",
                      "data-writes": "",
                      "aria-label": `Delete the ${label} key`,
                      on: { click: () => openDeleteDialog(ctx, vendor, label, reload) },
                    },
                    "Delete",
                  )
                : null,
            ),
          );
        }),
      ),
    ),
  );
}

/** The bucket exports go to, instead of a download from `POST /api/v1/exports`. */
function destinationSection(ctx: PageContext): HTMLElement {
  const body = h("div", {});
  loadInto(
    body,
    { loading: "Loading the export destination…", failed: "The export destination", rows: 1 },
    () => ctx.api.exportDestination(ctx.project.projectId),
    (destination, reload) => destinationForm(ctx, destination, reload),
  );
  return section(
    "Export destination",
    h(
      "p",
      { class: "card-intro muted" },
      "With a destination, exports requested through the API are written to this bucket and answered with its URL instead of being streamed back.",
    ),
    body,
  );
}

function destinationForm(ctx: PageContext, current: string | null, reload: () => void): HTMLElement {
  const input = h("input", {
    id: "export-destination",
    type: "text",
    value: current ?? "",
    placeholder: "s3://bucket/prefix/",
    autocomplete: "off",
    spellcheck: "false",
    "aria-describedby": "export-destination-hint",
  });
  const error = formError();
  const save = h("button", { type: "submit", class: "button primary" }, "Save destination");
  const remove = h(
    "button",
    { type: "button", class: "button danger-quiet", hidden: current === null },
    "Remove",
  );
  const form = h(
    "form",
    { class: "form padded", novalidate: true, "data-writes": "" },
    error,
    h("label", { for: "export-destination", class: "field-label" }, "Bucket URL"),
    input,
    h(
      "p",
      { class: "hint", id: "export-destination-hint" },
      current === null
        ? "Not set: exports are streamed back to the caller. A bucket is s3://bucket/prefix/; on a local server also a folder, file:///path."
        : `Exports are written to ${current}. Save the field empty to remove it.`,
    ),
    h("div", { class: "dialog-actions" }, remove, save),
  );
  onSubmit(form, {
    error,
    button: save,
    read: () => input.value.trim(),
    send: async (value) => {
      const url = await ctx.api.setExportDestination(ctx.project.projectId, value);
      ctx.toast(
        url === null
          ? "No export destination: exports are streamed back to the caller."
          : `Exports now go to ${url}`,
      );
      reload();
    },
    fieldOf: () => input,
  });
  remove.addEventListener("click", async () => {
    remove.disabled = true;
    try {
      await ctx.api.clearExportDestination(ctx.project.projectId);
      ctx.toast("The export destination was removed; exports are streamed back again.");
      reload();
    } catch (err) {
      error.textContent = errorMessage(err);
      remove.disabled = false;
    }
  });
  return form;
}

/** The store levels, each with what it keeps: the README's Privacy paragraph in the same words. */
const STORE_LEVELS: [level: StoreLevel, label: string, keeps: string][] = [
  ["full", "Full", "Bodies, each cut to 64 KiB."],
  [
    "metadata",
    "Metadata",
    "No request or response body; ids, model, tokens, cost, status, latency and user id stay.",
  ],
  ["none", "None", "As metadata, and the user id only as a keyed HMAC."],
];

/** What records keep, and for how long (docs/privacy.md): the same settings as `dmt settings set`. */
function privacySection(ctx: PageContext): HTMLElement {
  const body = h("div", {});
  loadInto(
    body,
    { loading: "Loading the privacy settings…", failed: "The privacy settings", rows: 3 },
    () => ctx.api.privacy(ctx.project.projectId),
    (privacy, reload) => privacyForm(ctx, privacy, reload),
  );
  return section(
    "Privacy",
    h(
      "p",
      { class: "card-intro muted" },
      "What this project's records keep, and how long they are kept. A key, or a single request, may keep less but never more.",
    ),
    body,
  );
}

function privacyForm(ctx: PageContext, current: PrivacyView, reload: () => void): HTMLElement {
  const keeps = h("p", { class: "hint", id: "privacy-store-hint", "data-testid": "privacy-store-hint" });
  const store = h(
    "select",
    { id: "privacy-store", "aria-describedby": "privacy-store-hint" },
    ...STORE_LEVELS.map(([level, label]) =>
      h("option", { value: level, selected: level === current.store }, label),
    ),
  );
  const describe = () => {
    keeps.textContent = STORE_LEVELS.find(([level]) => level === store.value)?.[2] ?? "";
  };
  store.addEventListener("change", describe);
  describe();
  const days = (id: string, value: number | null) =>
    h("input", {
      id,
      type: "number",
      inputmode: "numeric",
      // No min/max: the browser's own bubble would stop the submit; the API's message says what is wrong.
      value: value === null ? "" : String(value),
      placeholder: "Kept until deleted",
      "aria-describedby": `${id}-hint`,
    });
  const retention = days("privacy-retention", current.retentionDays);
  const bodyRetention = days("privacy-body-retention", current.bodyRetentionDays);
  const error = formError();
  const save = h("button", { type: "submit", class: "button primary" }, "Save privacy");
  const form = h(
    "form",
    { class: "form padded", novalidate: true, "data-writes": "" },
    error,
    h("label", { for: "privacy-store", class: "field-label" }, "What records keep"),
    store,
    keeps,
    h("label", { for: "privacy-retention", class: "field-label" }, "Record retention (days)"),
    retention,
    h(
      "p",
      { class: "hint", id: "privacy-retention-hint" },
      "1 to 3650. Records older than this are removed, a whole day at a time. Empty: kept until deleted.",
    ),
    h("label", { for: "privacy-body-retention", class: "field-label" }, "Body retention (days)"),
    bodyRetention,
    h(
      "p",
      { class: "hint", id: "privacy-body-retention-hint" },
      "Bodies older than this are blanked; no longer than the record retention. Empty: kept with the record.",
    ),
    h("div", { class: "dialog-actions" }, save),
  );
  // Empty is null (kept until deleted); anything else goes as typed, and the API says what is wrong.
  const daysValue = (input: HTMLInputElement): number | null => {
    const text = input.value.trim();
    return text === "" ? null : Number(text);
  };
  onSubmit(form, {
    error,
    button: save,
    read: (): PrivacyView => ({
      store: store.value as StoreLevel,
      retentionDays: daysValue(retention),
      bodyRetentionDays: daysValue(bodyRetention),
    }),
    send: async (change) => {
      const saved = await ctx.api.setPrivacy(ctx.project.projectId, change);
      ctx.toast(`Privacy saved: records keep ${saved.store === "full" ? "everything" : saved.store}.`);
      reload();
    },
  });
  return form;
}

const today = () => new Date().toISOString().slice(0, 10);
const daysAgo = (days: number) => new Date(Date.now() - days * 86_400_000).toISOString().slice(0, 10);

/** A download of the project's stored interactions, the same rows `POST /api/v1/exports` returns. */
function exportSection(ctx: PageContext): HTMLElement {
  const from = h("input", { id: "export-from", type: "date", value: daysAgo(29), required: true });
  const to = h("input", { id: "export-to", type: "date", value: today(), required: true });
  const format = h(
    "select",
    { id: "export-format" },
    h("option", { value: "csv" }, "CSV (spreadsheets)"),
    h("option", { value: "json" }, "JSON"),
  );
  const vendor = h(
    "select",
    { id: "export-vendor" },
    h("option", { value: "" }, "All vendors"),
    ...VENDORS.map(([value, label]) => h("option", { value }, label)),
  );
  const error = formError();
  const status = h("p", { class: "hint", role: "status" });
  const submit = h(
    "button",
    { type: "submit", class: "button primary" },
    icon("download"),
    "Download export",
  );
  const field = (id: string, label: string, control: HTMLElement) =>
    h("div", { class: "filter" }, h("label", { for: id }, label), control);
  const form = h(
    "form",
    { class: "form padded", novalidate: true, "data-writes": "" },
    error,
    h(
      "div",
      { class: "filters" },
      field("export-from", "From (UTC)", from),
      field("export-to", "To (UTC)", to),
      field("export-format", "Format", format),
      field("export-vendor", "Vendor", vendor),
    ),
    h("div", { class: "dialog-actions" }, status, submit),
  );
  onSubmit(form, {
    error,
    button: submit,
    read: (): ExportInput => ({
      format: format.value as ExportInput["format"],
      range: { start: from.value, end: to.value },
      ...(vendor.value ? { filters: { vendor: vendor.value } } : {}),
    }),
    send: async (input) => {
      status.textContent = "Preparing the export…";
      try {
        // The server answers a short-lived URL of the file (presigned S3 in AWS), which the browser
        // follows: the file never passes through the dashboard API's body or this page's memory.
        const { url, fileName } = await ctx.api.downloadExport(ctx.project.projectId, input);
        const link = h("a", { href: url, download: fileName, hidden: true });
        document.body.append(link);
        link.click();
        link.remove();
        status.textContent = `Downloading ${fileName}.`;
      } catch (err) {
        status.textContent = "";
        throw err;
      }
    },
  });
  return section(
    "Data export",
    h(
      "p",
      { class: "card-intro muted" },
      "Every stored interaction of the chosen days, with request and response bodies. Applications can request the same export with POST /api/v1/exports.",
    ),
    form,
  );
}

/** The project's facts, and for operators its tier. */
function projectSection(ctx: PageContext): HTMLElement {
  const tierValue = h("span", { "data-testid": "tier" }, ctx.project.tier);
  const facts = h(
    "dl",
    { class: "facts" },
    h("dt", {}, "Project ID"),
    h("dd", {}, h("code", {}, ctx.project.projectId)),
    h("dt", {}, "Tier"),
    h("dd", {}, tierValue),
    h("dt", {}, "Your role"),
    h("dd", {}, ctx.project.role),
  );
  if (!ctx.me.user.operator) return section("Project", facts);
  const tier = h(
    "select",
    { id: "project-tier" },
    ...["free", "pro", "enterprise"].map((t) =>
      h("option", { value: t, selected: t === ctx.project.tier }, t),
    ),
  );
  const error = formError();
  const save = h("button", { type: "submit", class: "button primary" }, "Change tier");
  const form = h(
    "form",
    { class: "form padded", "data-writes": "" },
    error,
    h("label", { for: "project-tier", class: "field-label" }, "Tier"),
    tier,
    h(
      "p",
      { class: "hint" },
      "The tier sets the rate limit of every key of the project; a change applies within seconds.",
    ),
    h("div", { class: "dialog-actions" }, save),
  );
  onSubmit(form, {
    error,
    button: save,
    read: () => tier.value,
    send: async (chosen) => {
      ctx.project.tier = await ctx.api.setTier(ctx.project.projectId, chosen);
      tierValue.textContent = ctx.project.tier;
      ctx.toast(`The project is now on the ${ctx.project.tier} tier.`);
    },
  });
  return section(
    "Project",
    facts,
    h("h3", { class: "subsection" }, "Tier ", h("span", { class: "badge operator" }, "Operators")),
    form,
  );
}

export const settingsPage: Page = {
  path: "/dashboard/settings",
  title: "Settings",
  icon: "settings",
  render(ctx, main) {
    const vendorBody = h("div", {});
    replace(
      main,
      pageHead(
        "Settings",
        "Vendor keys, alerts and webhooks, exports, privacy, deletion requests and the project's details.",
      ),
      section(
        "Vendor keys (BYOK)",
        h(
          "p",
          { class: "card-intro muted" },
          "With your own key for a vendor, calls to it use that key and spend no credits; usage is still recorded.",
        ),
        vendorBody,
      ),
      alertsSection(ctx),
      webhooksSection(ctx),
      destinationSection(ctx),
      exportSection(ctx),
      privacySection(ctx),
      deletionSection(ctx),
      projectSection(ctx),
    );
    loadInto(
      vendorBody,
      { loading: "Loading vendor keys…", failed: "The vendor keys", rows: 4 },
      () => ctx.api.vendorKeys(ctx.project.projectId),
      (keys, reload) => vendorKeysTable(ctx, keys, reload),
    );
  },
};
