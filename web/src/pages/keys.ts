import { ApiFailure, type CreatedKey, type KeyView, type NewKeyInput } from "../api";
import { h, icon, replace } from "../dom";
import { FieldError, formError, onSubmit } from "../form";
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

const NAME_LIMIT = 100;
const DAY_MS = 86_400_000;

const FAMILIES: [pattern: string, label: string][] = [
  ["groq:*", "Groq proxy"],
  ["openai:*", "OpenAI proxy"],
  ["anthropic:*", "Anthropic proxy"],
  ["gemini:*", "Gemini proxy"],
  ["api:*", "Data API (status, exports, deletion)"],
];

const EXPIRIES: [value: string, label: string][] = [
  ["never", "Never"],
  ["30", "In 30 days"],
  ["90", "In 90 days (recommended rotation)"],
  ["365", "In one year"],
  ["date", "On a date…"],
];

function statusBadge(status: KeyView["status"]): HTMLElement {
  return h("span", { class: `badge ${status}` }, status[0]?.toUpperCase() + status.slice(1));
}

function accessCell(allow: string[] | undefined): HTMLElement {
  if (!allow) return h("span", { class: "muted" }, "All endpoints");
  const [first, ...rest] = allow;
  return h(
    "span",
    { title: allow.join("\n") },
    h("code", {}, first ?? ""),
    rest.length > 0 ? h("span", { class: "muted" }, ` +${rest.length} more`) : null,
  );
}

/** The create form, then the new key shown once. */
function openCreateDialog(ctx: PageContext, onCreated: () => void): void {
  const el = modal("create-title");
  // One Idempotency-Key per form: a resubmit of the same form can never make a second key.
  let idempotencyKey = crypto.randomUUID();

  const name = h("input", {
    id: "key-name",
    name: "name",
    type: "text",
    required: true,
    autocomplete: "off",
    "aria-describedby": "key-name-hint",
    placeholder: "e.g. production backend",
  });
  const counter = h("span", { class: "counter", "aria-hidden": "true" }, `0 / ${NAME_LIMIT}`);
  name.addEventListener("input", () => {
    counter.textContent = `${name.value.length} / ${NAME_LIMIT}`;
    counter.classList.toggle("over", name.value.length > NAME_LIMIT);
  });

  const families = FAMILIES.map(([pattern, label]) => {
    const box = h("input", { type: "checkbox", value: pattern, id: `family-${pattern.split(":")[0]}` });
    return {
      box,
      row: h("label", { class: "check", for: box.id }, box, h("span", {}, label), h("code", {}, pattern)),
    };
  });
  const custom = h("textarea", {
    id: "key-patterns",
    rows: 2,
    placeholder: "openai:/v1/embeddings",
    "aria-describedby": "key-patterns-hint",
  });
  const restricted = h(
    "fieldset",
    { class: "nested", hidden: true },
    h("legend", { class: "sr-only" }, "Allowed endpoints"),
  );
  restricted.append(
    ...families.map((f) => f.row),
    h("label", { for: "key-patterns", class: "field-label" }, "Other endpoints, one per line"),
    custom,
    h(
      "p",
      { class: "hint", id: "key-patterns-hint" },
      "An endpoint is <family>:<path>; * matches anything. Calls to anything else are refused with 403.",
    ),
  );
  const accessRadio = (value: string, label: string, checked: boolean) =>
    h(
      "label",
      { class: "radio" },
      h("input", {
        type: "radio",
        name: "access",
        value,
        checked,
        on: {
          change: () => {
            restricted.hidden = value === "all";
          },
        },
      }),
      h("span", {}, label),
    );

  const expiry = h(
    "select",
    { id: "key-expiry", name: "expiry" },
    ...EXPIRIES.map(([value, label]) => h("option", { value }, label)),
  );
  const expiryDate = h("input", {
    id: "key-expiry-date",
    type: "date",
    hidden: true,
    "aria-label": "Expiry date",
    min: new Date(Date.now() + DAY_MS).toISOString().slice(0, 10),
  });
  expiry.addEventListener("change", () => {
    expiryDate.hidden = expiry.value !== "date";
    expiryDate.required = expiry.value === "date";
  });

  const models = h("input", {
    id: "key-models",
    type: "text",
    autocomplete: "off",
    placeholder: "e.g. gpt-4o*, claude-*",
    "aria-describedby": "key-models-hint",
  });
  const tpm = h("input", {
    id: "key-tpm",
    type: "text",
    inputmode: "numeric",
    autocomplete: "off",
    placeholder: "no limit",
  });

  const error = formError("create-error");
  const submit = h("button", { type: "submit", class: "button primary" }, "Create key");
  const cancel = h("button", { type: "button", class: "button", on: { click: () => el.close() } }, "Cancel");

  const readInput = (): NewKeyInput => {
    if (name.value.trim() === "") throw new FieldError(name, "Give the key a name.");
    const input: NewKeyInput = { name: name.value };
    if (el.querySelector<HTMLInputElement>('input[name="access"]:checked')?.value === "some") {
      const allow = [
        ...families.filter((f) => f.box.checked).map((f) => f.box.value),
        ...custom.value
          .split("\n")
          .map((line) => line.trim())
          .filter((line) => line !== ""),
      ];
      if (allow.length === 0) throw new Error("Choose at least one endpoint, or allow all endpoints.");
      input.allow = allow;
    }
    if (expiry.value === "date") {
      // The key works through the whole chosen day, in the user's time zone.
      const end = new Date(`${expiryDate.value}T23:59:59`).getTime();
      if (Number.isNaN(end)) throw new Error("Choose the expiry date.");
      input.expiresAt = end;
    } else if (expiry.value !== "never") {
      input.expiresAt = Date.now() + Number(expiry.value) * DAY_MS;
    }
    if (models.value.trim() !== "") input.models = models.value.trim();
    if (tpm.value.trim() !== "") {
      if (!/^\d+$/.test(tpm.value.trim())) throw new Error("Tokens per minute must be a whole number.");
      input.tpm = Number(tpm.value.trim());
    }
    return input;
  };

  const form = h(
    "form",
    { class: "form", novalidate: true },
    h("h2", { id: "create-title" }, "Create API key"),
    error,
    h("label", { for: "key-name", class: "field-label" }, "Name"),
    name,
    h(
      "div",
      { class: "hint-row" },
      h(
        "p",
        { class: "hint", id: "key-name-hint" },
        "A label to recognise the key by, up to 100 characters.",
      ),
      counter,
    ),
    h(
      "fieldset",
      {},
      h("legend", { class: "field-label" }, "Endpoint access"),
      accessRadio("all", "All endpoints", true),
      accessRadio("some", "Only selected endpoints", false),
      restricted,
    ),
    h("label", { for: "key-expiry", class: "field-label" }, "Expires"),
    h("div", { class: "inline" }, expiry, expiryDate),
    h("label", { for: "key-models", class: "field-label" }, "Models (optional)"),
    models,
    h(
      "p",
      { class: "hint", id: "key-models-hint" },
      "Comma-separated model names; * matches anything. Other models are refused with 403.",
    ),
    h("label", { for: "key-tpm", class: "field-label" }, "Tokens per minute (optional)"),
    tpm,
    h("div", { class: "dialog-actions" }, cancel, submit),
  );

  onSubmit(form, {
    error,
    button: submit,
    busyLabel: "Creating…",
    read: readInput,
    send: async (input) => {
      const created = await ctx.api.createKey(ctx.project.projectId, input, idempotencyKey);
      onCreated();
      showCreated(el, created);
    },
    // An answered failure made nothing: the next attempt is a new request. A network failure may
    // have made the key: the retry keeps the same Idempotency-Key so it cannot make two.
    failed: (err) => {
      if (err instanceof ApiFailure && err.status !== 0) idempotencyKey = crypto.randomUUID();
    },
    fieldOf: (err) => (err instanceof ApiFailure && err.message.includes("'name'") ? name : undefined),
  });

  el.append(form);
  el.showModal();
  name.focus();
}

function showCreated(el: HTMLDialogElement, created: CreatedKey): void {
  const done = h(
    "button",
    { type: "button", class: "button primary", on: { click: () => el.close() } },
    "Done",
  );
  if (!created.key) {
    replace(
      el,
      h("h2", { id: "create-title" }, "Key already created"),
      h(
        "div",
        { class: "callout warning" },
        icon("alert"),
        h(
          "p",
          {},
          "An earlier attempt of this request created the key ",
          h("strong", { class: "key-name" }, created.apiKey.name),
          ". Its secret was shown to that attempt and cannot be shown again: if you did not save it, revoke it and create a new key.",
        ),
      ),
      h("div", { class: "dialog-actions" }, done),
    );
    done.focus();
    return;
  }
  const key = created.key;
  const status = h("p", { class: "copy-status", role: "status" });
  const field = h("input", {
    id: "new-key",
    type: "text",
    readonly: true,
    value: key,
    class: "mono",
    "aria-label": "Your new API key",
    spellcheck: "false",
  });
  const copy = h(
    "button",
    {
      type: "button",
      class: "button",
      on: {
        click: () => {
          navigator.clipboard.writeText(key).then(
            () => {
              status.textContent = "Copied to the clipboard.";
              copy.classList.add("done");
            },
            () => {
              field.select();
              status.textContent = "Copying was blocked: the key is selected, press Ctrl+C (⌘C) to copy it.";
            },
          );
        },
      },
    },
    icon("copy"),
    "Copy",
  );
  replace(
    el,
    h("h2", { id: "create-title" }, "Save your new key"),
    h(
      "div",
      { class: "callout warning" },
      icon("alert"),
      h(
        "p",
        {},
        h("strong", {}, "This is the only time the full key is shown. "),
        "Copy it now and keep it somewhere safe: only a hash is stored, so it cannot be shown again.",
      ),
    ),
    h(
      "p",
      { class: "muted" },
      "Key ",
      h("strong", { class: "key-name" }, created.apiKey.name),
      " is ready to use.",
    ),
    h("div", { class: "key-reveal" }, field, copy),
    status,
    h("div", { class: "dialog-actions" }, done),
  );
  field.addEventListener("focus", () => field.select());
  copy.focus();
}

function openRevokeDialog(ctx: PageContext, key: KeyView, onRevoked: () => void): void {
  const el = modal("revoke-title");
  const error = formError();
  const confirm = h("button", { type: "button", class: "button danger" }, "Revoke key");
  const cancel = h("button", { type: "button", class: "button", on: { click: () => el.close() } }, "Cancel");
  confirm.addEventListener("click", async () => {
    confirm.disabled = true;
    confirm.textContent = "Revoking…";
    try {
      await ctx.api.revokeKey(ctx.project.projectId, key.keyId);
      el.close();
      ctx.toast(`Key “${key.name}” was revoked.`);
      onRevoked();
    } catch (err) {
      error.textContent = errorMessage(err);
      confirm.disabled = false;
      confirm.textContent = "Revoke key";
    }
  });
  el.append(
    h("h2", { id: "revoke-title" }, "Revoke ", h("span", { class: "key-name" }, `“${key.name}”`), "?"),
    error,
    h(
      "p",
      {},
      "Applications using ",
      h("code", {}, key.prefix),
      " will be refused within seconds. Revoking cannot be undone.",
    ),
    h("div", { class: "dialog-actions" }, cancel, confirm),
  );
  el.showModal();
  cancel.focus();
}

function keysTable(ctx: PageContext, keys: KeyView[], reload: () => void): HTMLElement {
  const header = ["Name and key", "Access", "Created", "Last used", "Expires", "Status"];
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      { class: "table" },
      h("caption", { class: "sr-only" }, `API keys of project ${ctx.project.projectId}`),
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          ...header.map((title) => h("th", { scope: "col" }, title)),
          h("th", { scope: "col" }, h("span", { class: "sr-only" }, "Actions")),
        ),
      ),
      h(
        "tbody",
        {},
        ...keys.map((key) =>
          h(
            "tr",
            { "data-key-id": key.keyId },
            h(
              "td",
              {},
              h("span", { class: "key-name", title: key.name }, key.name),
              h("code", { class: "key-prefix" }, key.prefix),
            ),
            h("td", {}, accessCell(key.allow)),
            h("td", {}, timeCell(key.createdAt, "")),
            h("td", {}, timeCell(key.lastUsedAt, "Never")),
            h("td", {}, timeCell(key.expiresAt, "Never")),
            h("td", {}, statusBadge(key.status)),
            h(
              "td",
              { class: "row-actions" },
              key.status === "active"
                ? h(
                    "button",
                    {
                      type: "button",
                      class: "button small danger-quiet",
                      "data-writes": "",
                      "aria-label": `Revoke key ${key.name}`,
                      on: { click: () => openRevokeDialog(ctx, key, reload) },
                    },
                    "Revoke",
                  )
                : null,
            ),
          ),
        ),
      ),
    ),
  );
}

export const keysPage: Page = {
  path: "/dashboard/keys",
  title: "API keys",
  icon: "key",
  render(ctx, main) {
    const body = h("section", { class: "card", "aria-labelledby": "page-title" });
    const refresh = () => load(false);
    const create = () => openCreateDialog(ctx, refresh);
    const createButton = h(
      "button",
      { type: "button", class: "button primary", "data-writes": "", on: { click: create } },
      icon("plus"),
      "Create key",
    );
    replace(
      main,
      pageHead(
        "API keys",
        "Keys let your applications call the proxy and the data API. A key is shown once, when it is created.",
        createButton,
      ),
      body,
      h(
        "p",
        { class: "hint" },
        "Rotate keys every 90 days, keep a separate key per environment, and revoke a key as soon as it may have leaked.",
      ),
    );

    /** The skeleton shows on first load only; a refresh after a change keeps the table until it has news. */
    async function load(skeleton = true): Promise<void> {
      if (skeleton) replace(body, loadingState("Loading keys…"));
      try {
        const keys = await ctx.api.listKeys(ctx.project.projectId);
        replace(
          body,
          keys.length === 0
            ? emptyState(
                "key",
                "No API keys yet",
                "Create a key to call the proxy and the data API from your applications.",
                h(
                  "button",
                  { type: "button", class: "button primary", "data-writes": "", on: { click: create } },
                  icon("plus"),
                  "Create your first key",
                ),
              )
            : keysTable(ctx, keys, refresh),
        );
      } catch (err) {
        replace(
          body,
          errorState(`The keys could not be loaded: ${errorMessage(err)}`, () => load()),
        );
      }
    }
    void load();
  },
};
