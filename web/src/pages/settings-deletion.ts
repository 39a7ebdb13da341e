import { ApiFailure, type DeletionInput, type DeletionRequestView, type DeletionStatus } from "../api";
import { h, icon, replace } from "../dom";
import { FieldError, formError, onSubmit } from "../form";
import { count, timeCell } from "../format";
import { emptyState, errorMessage, errorState, loadingState, modal, type PageContext } from "./page";

/** While a request is queued or running, the list is read again this often. */
const REFRESH_MS = 2000;

const STATUS_LABELS: Record<DeletionStatus, string> = {
  queued: "Queued",
  running: "Running",
  completed: "Completed",
  failed: "Failed",
};

const finished = (status: DeletionStatus) => status === "completed" || status === "failed";
const plural = (n: number, one: string, many = `${one}s`) => `${count(n)} ${n === 1 ? one : many}`;

function statusBadge(status: DeletionStatus): HTMLElement {
  return h("span", { class: `badge deletion-${status}` }, STATUS_LABELS[status]);
}

/** What a request deletes: the user as the hash of its id (all the service keeps), and the id count. */
function targetCell(request: DeletionRequestView): HTMLElement {
  return h(
    "td",
    {},
    request.userIdHash
      ? h(
          "span",
          { class: "target" },
          "User ",
          h(
            "code",
            { title: `SHA-256 of "<project>:<user id>": ${request.userIdHash}` },
            `${request.userIdHash.slice(0, 10)}…`,
          ),
        )
      : null,
    request.transactionIdCount > 0
      ? h("span", { class: "target" }, plural(request.transactionIdCount, "transaction"))
      : null,
  );
}

function resultCell(request: DeletionRequestView): HTMLElement {
  const { rowsDeleted, filesRewritten, filesDeleted, copiesPurged } = request.counts;
  const done = [
    `${plural(rowsDeleted, "row")} deleted`,
    `${plural(filesRewritten + filesDeleted, "file")} changed`,
    `${plural(copiesPurged, "copy", "copies")} purged`,
  ].join(" · ");
  switch (request.status) {
    case "queued":
      return h("td", { class: "details" }, "Waiting to start");
    case "running":
      return h("td", { class: "details" }, `In progress: ${done} so far`);
    case "completed":
      return h("td", { class: "details" }, done);
    case "failed":
      return h("td", { class: "details error-text" }, request.error ?? "Failed");
  }
}

function requestRow(request: DeletionRequestView): HTMLTableRowElement {
  return h(
    "tr",
    { "data-request-id": request.requestId, "data-user-hash": request.userIdHash ?? "" },
    h("td", {}, timeCell(request.createdAt, ""), h("code", { class: "key-prefix" }, request.requestId)),
    targetCell(request),
    h("td", {}, h("span", { class: "reason", title: request.reason }, request.reason)),
    h("td", {}, statusBadge(request.status)),
    resultCell(request),
    h("td", {}, timeCell(request.finishedAt, "—")),
  );
}

/** The request form, then a confirmation step that says exactly what will be deleted. */
function openRequestDialog(ctx: PageContext, onCreated: (request: DeletionRequestView) => void): void {
  const el = modal("deletion-title");
  // One Idempotency-Key per request: a double submit, or a retry after a network failure, makes one.
  let idempotencyKey = crypto.randomUUID();

  const kindRadio = (value: "user" | "transactions", label: string, checked: boolean) =>
    h(
      "label",
      { class: "radio" },
      h("input", { type: "radio", name: "deletion-kind", value, checked, on: { change: showKind } }),
      h("span", {}, label),
    );
  const userId = h("input", {
    id: "deletion-user-id",
    type: "text",
    autocomplete: "off",
    spellcheck: "false",
    "aria-describedby": "deletion-user-id-hint",
  });
  const transactionIds = h("textarea", {
    id: "deletion-transaction-ids",
    rows: 4,
    spellcheck: "false",
    "aria-describedby": "deletion-transaction-ids-hint",
  });
  const userFields = h(
    "div",
    {},
    h("label", { for: "deletion-user-id", class: "field-label" }, "User ID"),
    userId,
    h(
      "p",
      { class: "hint", id: "deletion-user-id-hint" },
      "As your application sent it (the X-User-ID header, or the body's user or metadata.user_id); compared exactly.",
    ),
  );
  const transactionFields = h(
    "div",
    { hidden: true },
    h("label", { for: "deletion-transaction-ids", class: "field-label" }, "Transaction IDs"),
    transactionIds,
    h(
      "p",
      { class: "hint", id: "deletion-transaction-ids-hint" },
      "One per line, or separated by commas or spaces; up to 1,000. Every response carries its id in the x-dmt-transaction-id header.",
    ),
  );
  const reason = h("input", {
    id: "deletion-reason",
    type: "text",
    autocomplete: "off",
    "aria-describedby": "deletion-reason-hint",
    placeholder: "e.g. erasure request #42",
  });
  const kind = () =>
    el.querySelector<HTMLInputElement>('input[name="deletion-kind"]:checked')?.value === "transactions"
      ? "transactions"
      : "user";
  function showKind(): void {
    userFields.hidden = kind() !== "user";
    transactionFields.hidden = kind() !== "transactions";
  }

  const reviewError = formError();
  const cancel = h("button", { type: "button", class: "button", on: { click: () => el.close() } }, "Cancel");
  const form = h(
    "form",
    { class: "form", novalidate: true },
    h("h2", { id: "deletion-title" }, "Request a deletion"),
    reviewError,
    h(
      "fieldset",
      {},
      h("legend", { class: "field-label" }, "What to delete"),
      kindRadio("user", "All data of a user", true),
      kindRadio("transactions", "Specific transactions", false),
    ),
    userFields,
    transactionFields,
    h("label", { for: "deletion-reason", class: "field-label" }, "Reason"),
    reason,
    h("p", { class: "hint", id: "deletion-reason-hint" }, "Kept in the audit trail, up to 1,000 characters."),
    h(
      "div",
      { class: "dialog-actions" },
      cancel,
      h("button", { type: "submit", class: "button primary" }, "Review request"),
    ),
  );

  const summary = h("div", {});
  const confirmError = formError();
  const back = h("button", { type: "button", class: "button" }, "Back");
  const confirm = h("button", { type: "submit", class: "button danger" }, "Delete data");
  const confirmStep = h(
    "form",
    { hidden: true },
    h("h2", { id: "deletion-confirm-title" }, "Delete this data?"),
    confirmError,
    summary,
    h(
      "div",
      { class: "callout warning" },
      icon("alert"),
      h(
        "p",
        {},
        h("strong", {}, "This cannot be undone. "),
        "The rows are removed from the warehouse, the dashboard's interactions and usage, and bucket exports that hold them. Calls made after the request is accepted are kept.",
      ),
    ),
    h("div", { class: "dialog-actions" }, back, confirm),
  );

  let input: DeletionInput | undefined;
  onSubmit(form, {
    error: reviewError,
    read: (): DeletionInput => {
      const next: DeletionInput = { reason: reason.value };
      if (kind() === "user") {
        if (userId.value.trim() === "")
          throw new FieldError(userId, "Enter the user ID whose data to delete.");
        next.user_id = userId.value;
      } else {
        const ids = transactionIds.value.split(/[\s,]+/).filter((id) => id !== "");
        if (ids.length === 0) throw new FieldError(transactionIds, "Enter at least one transaction ID.");
        next.transaction_ids = ids;
      }
      if (reason.value.trim() === "")
        throw new FieldError(reason, "Give a reason: it is kept in the audit trail.");
      return next;
    },
    send: (next) => {
      input = next;
      const what =
        next.user_id !== undefined
          ? h(
              "p",
              {},
              "All stored data of user ",
              h("strong", { class: "deletion-subject" }, next.user_id),
              ".",
            )
          : h("p", {}, `${plural(next.transaction_ids?.length ?? 0, "transaction")} of this project.`);
      replace(
        summary,
        what,
        h("p", { class: "muted" }, "Reason: ", h("span", { class: "deletion-subject" }, next.reason)),
      );
      confirmError.replaceChildren();
      form.hidden = true;
      confirmStep.hidden = false;
      el.setAttribute("aria-labelledby", "deletion-confirm-title");
      back.focus();
    },
  });
  back.addEventListener("click", () => {
    confirmStep.hidden = true;
    form.hidden = false;
    el.setAttribute("aria-labelledby", "deletion-title");
    reason.focus();
  });
  onSubmit(confirmStep, {
    error: confirmError,
    button: confirm,
    busyLabel: "Requesting…",
    read: () => {
      if (!input) throw new Error("Review the request first.");
      return input;
    },
    send: async (reviewed) => {
      back.disabled = true;
      try {
        const created = await ctx.api.requestDeletion(ctx.project.projectId, reviewed, idempotencyKey);
        el.close();
        ctx.toast(`Deletion request ${created.requestId} was queued.`);
        onCreated(created);
      } finally {
        back.disabled = false;
      }
    },
    // An answered refusal made nothing: the next attempt is a new request. A network failure may
    // have made it: the retry keeps the same Idempotency-Key so it cannot make two.
    failed: (err) => {
      if (err instanceof ApiFailure && err.status !== 0) idempotencyKey = crypto.randomUUID();
    },
  });

  el.append(form, confirmStep);
  el.showModal();
  userId.focus();
}

/** Hex SHA-256 of `<project>:<user id>`, as the service hashes it (`hashUserId`), computed in the browser. */
async function userIdHash(projectId: string, userId: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(`${projectId}:${userId}`));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * Finds a user's requests by the id the admin gives: the id is hashed here and matched against the
 * rows' hashes, so the service never needs to keep, or send back, a deleted user's id. `apply` hides a
 * row that does not match; rows shown later (a refresh, older pages) go through it too.
 */
function userFinder(projectId: string, rows: () => HTMLTableRowElement[]) {
  const input = h("input", {
    id: "deletion-find-user",
    type: "search",
    autocomplete: "off",
    spellcheck: "false",
    placeholder: "User ID",
  });
  const result = h("p", { class: "hint", id: "deletion-find-result", role: "status" });
  let hash = "";
  let asked = 0;
  const apply = (row: HTMLTableRowElement) => {
    row.hidden = hash !== "" && row.dataset.userHash !== hash;
  };
  input.addEventListener("input", async () => {
    const ask = ++asked;
    const next = input.value === "" ? "" : await userIdHash(projectId, input.value);
    if (ask !== asked) return; // a later keystroke's answer wins
    hash = next;
    const all = rows();
    for (const row of all) apply(row);
    const matches = all.filter((row) => !row.hidden).length;
    result.textContent =
      hash === ""
        ? ""
        : matches === 0
          ? "No request for this user among those loaded."
          : `${plural(matches, "request")} for this user.`;
  });
  const element = h(
    "div",
    { class: "deletion-finder" },
    h("label", { for: "deletion-find-user", class: "field-label" }, "Find a user's requests"),
    input,
    result,
  );
  return { element, apply };
}

/**
 * Settings, deletion requests: the project's requests, newest first, with their status (read again
 * while any is unfinished), and a form to make one; the same request as `POST /api/v1/data`.
 */
export function deletionSection(ctx: PageContext): HTMLElement {
  const body = h("div", {});
  const rows = new Map<string, { row: HTMLTableRowElement; status: DeletionStatus }>();
  let tbody: HTMLTableSectionElement | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const finder = userFinder(ctx.project.projectId, () => [...rows.values()].map((r) => r.row));

  const request = () => openRequestDialog(ctx, added);
  const requestButton = h(
    "button",
    { type: "button", class: "button primary", "data-writes": "", on: { click: request } },
    icon("trash"),
    "Request a deletion",
  );

  const schedule = () => {
    clearTimeout(timer);
    const unfinished = [...rows.values()].some((r) => !finished(r.status));
    // Stops once the page is left (the section is no longer in the document).
    if (!unfinished) return;
    timer = setTimeout(() => {
      if (body.isConnected) void refresh();
    }, REFRESH_MS);
  };

  /** Puts each request in its row (new ones on top, newest first); says when a watched one ends. */
  const show = (requests: DeletionRequestView[], watched: boolean) => {
    const fresh: HTMLTableRowElement[] = [];
    for (const view of requests) {
      const row = requestRow(view);
      finder.apply(row);
      const known = rows.get(view.requestId);
      if (known) {
        known.row.replaceWith(row);
        if (watched && !finished(known.status) && finished(view.status)) {
          ctx.toast(
            `Deletion request ${view.requestId} ${view.status === "completed" ? "completed" : "failed"}.`,
            view.status === "completed" ? "success" : "error",
          );
        }
      } else {
        fresh.push(row);
      }
      rows.set(view.requestId, { row, status: view.status });
    }
    tbody?.prepend(...fresh);
  };

  const table = (page: { requests: DeletionRequestView[]; cursor?: string }) => {
    rows.clear();
    tbody = h("tbody", {});
    show(page.requests, false);
    let cursor = page.cursor;
    const more = h(
      "button",
      { type: "button", class: "button", hidden: cursor === undefined },
      "Load older requests",
    );
    more.addEventListener("click", async () => {
      more.disabled = true;
      try {
        const next = await ctx.api.deletionRequests(ctx.project.projectId, cursor);
        for (const view of next.requests) {
          if (rows.has(view.requestId)) continue;
          const row = requestRow(view);
          finder.apply(row);
          rows.set(view.requestId, { row, status: view.status });
          tbody?.append(row);
        }
        cursor = next.cursor;
        more.hidden = cursor === undefined;
        schedule();
      } catch (err) {
        ctx.toast(`Older requests could not be loaded: ${errorMessage(err)}`, "error");
      } finally {
        more.disabled = false;
      }
    });
    const header = ["Requested", "Deletes", "Reason", "Status", "Result", "Finished"];
    return [
      h(
        "div",
        { class: "table-wrap" },
        h(
          "table",
          { class: "table deletion-requests" },
          h("caption", { class: "sr-only" }, "Deletion requests, newest first"),
          h("thead", {}, h("tr", {}, ...header.map((t) => h("th", { scope: "col" }, t)))),
          tbody,
        ),
      ),
      h("div", { class: "table-footer" }, more),
    ];
  };

  /** A request just made shows at once, as accepted; the list is read again for its progress. */
  function added(created: DeletionRequestView): void {
    if (tbody?.isConnected) show([created], false);
    else replace(body, ...table({ requests: [created] }));
    schedule();
  }

  /** The first page: in full on first load, else into the rows already shown. */
  async function refresh(): Promise<void> {
    const first = tbody === undefined;
    if (first) replace(body, loadingState("Loading deletion requests…"));
    try {
      const page = await ctx.api.deletionRequests(ctx.project.projectId);
      if (page.requests.length === 0 && rows.size === 0) {
        replace(
          body,
          emptyState(
            "trash",
            "No deletion requests yet",
            "Requests to delete a user's data or single transactions appear here with their progress.",
          ),
        );
      } else if (!tbody?.isConnected) {
        replace(body, ...table(page));
      } else {
        show(page.requests, true);
      }
      schedule();
    } catch (err) {
      if (first) {
        replace(
          body,
          errorState(`The deletion requests could not be loaded: ${errorMessage(err)}`, () => refresh()),
        );
        return;
      }
      // A failed refresh keeps what is shown and tries again.
      schedule();
    }
  }
  void refresh();

  return h(
    "section",
    { class: "card", "aria-labelledby": "deletion-requests-title" },
    h("h2", { class: "card-title", id: "deletion-requests-title" }, "Deletion requests"),
    h(
      "div",
      { class: "card-intro card-intro-actions" },
      h(
        "p",
        { class: "muted" },
        "Delete a user's data, or single transactions, from the warehouse and every copy the service keeps. Applications can send the same request to POST /api/v1/data.",
      ),
      requestButton,
    ),
    finder.element,
    body,
  );
}
