import type { Vendor, VendorKeyView } from "../api";
import { type Child, h, replace } from "../dom";
import { timeCell } from "../format";
import {
  emptyState,
  errorMessage,
  errorState,
  loadingState,
  modal,
  type Page,
  type PageContext,
  pageHead,
} from "./page";

const VENDORS: [vendor: Vendor, label: string][] = [
  ["groq", "Groq"],
  ["openai", "OpenAI"],
  ["anthropic", "Anthropic"],
  ["gemini", "Gemini"],
];

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
  const error = h("div", { class: "form-error", role: "alert" });
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
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (save.disabled) return;
    error.replaceChildren();
    save.disabled = true;
    save.textContent = "Saving…";
    try {
      await ctx.api.setVendorKey(ctx.project.projectId, vendor, input.value);
      el.close();
      ctx.toast(`The ${label} key was saved.`);
      onSaved();
    } catch (err) {
      error.textContent = errorMessage(err);
      input.focus();
    } finally {
      save.disabled = false;
      save.textContent = "Save key";
    }
  });
  el.append(form);
  el.showModal();
  input.focus();
}

function openDeleteDialog(ctx: PageContext, vendor: Vendor, label: string, onDeleted: () => void): void {
  const el = modal("delete-vendor-key-title");
  const error = h("div", { class: "form-error", role: "alert" });
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

export const settingsPage: Page = {
  path: "/dashboard/settings",
  title: "Settings",
  icon: "settings",
  render(ctx, main) {
    const vendorBody = h("div", {});
    replace(
      main,
      pageHead("Settings", "Vendor keys, exports and the project's details."),
      section(
        "Vendor keys (BYOK)",
        h(
          "p",
          { class: "card-intro muted" },
          "With your own key for a vendor, calls to it use that key and spend no credits; usage is still recorded.",
        ),
        vendorBody,
      ),
      section(
        "Export destination",
        emptyState("out", "Coming with the warehouse", "A bucket that exports are written to."),
      ),
      section(
        "Data export and deletion",
        emptyState(
          "clock",
          "Coming with the warehouse",
          "Request exports and deletions and follow their status.",
        ),
      ),
      section(
        "Project",
        h(
          "dl",
          { class: "facts" },
          h("dt", {}, "Project ID"),
          h("dd", {}, h("code", {}, ctx.project.projectId)),
          h("dt", {}, "Tier"),
          h("dd", {}, ctx.project.tier),
          h("dt", {}, "Your role"),
          h("dd", {}, ctx.project.role),
        ),
      ),
    );

    async function load(): Promise<void> {
      replace(vendorBody, loadingState("Loading vendor keys…", 4));
      try {
        replace(vendorBody, vendorKeysTable(ctx, await ctx.api.vendorKeys(ctx.project.projectId), load));
      } catch (err) {
        replace(vendorBody, errorState(`The vendor keys could not be loaded: ${errorMessage(err)}`, load));
      }
    }
    void load();
  },
};
