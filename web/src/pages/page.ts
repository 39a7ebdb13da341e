import { type Api, ApiFailure, type Me, type MemberProject } from "../api";
import { type Child, h, icon, replace } from "../dom";

/** What every page gets: the API, the selected project, the signed-in user, and a way to notify. */
export interface PageContext {
  api: Api;
  me: Me;
  project: MemberProject;
  toast(message: string, kind?: "success" | "error"): void;
}

export interface Page {
  path: string;
  title: string;
  icon: string;
  render(ctx: PageContext, main: HTMLElement): void;
}

export function pageHead(title: string, subtitle: string, ...actions: Child[]): HTMLElement {
  return h(
    "div",
    { class: "page-head" },
    h("div", {}, h("h1", { id: "page-title" }, title), h("p", { class: "subtitle" }, subtitle)),
    actions.length > 0 ? h("div", { class: "actions" }, ...actions) : null,
  );
}

export function emptyState(iconName: string, title: string, text: string, ...actions: Child[]): HTMLElement {
  return h(
    "div",
    { class: "empty" },
    h("div", { class: "empty-icon" }, icon(iconName)),
    h("h2", {}, title),
    h("p", {}, text),
    ...actions,
  );
}

export function loadingState(label: string, rows = 3): HTMLElement {
  return h(
    "div",
    { class: "loading", role: "status" },
    h("span", { class: "sr-only" }, label),
    ...Array.from({ length: rows }, () => h("div", { class: "skeleton-row", "aria-hidden": "true" })),
  );
}

export function errorState(message: string, retry: () => void): HTMLElement {
  return h(
    "div",
    { class: "callout error", role: "alert" },
    icon("alert"),
    h("div", {}, h("strong", {}, "Something went wrong. "), message),
    h("button", { type: "button", class: "button", on: { click: retry } }, "Try again"),
  );
}

export const errorMessage = (err: unknown) => (err instanceof Error ? err.message : String(err));

/**
 * What to show when `what` could not be loaded: a refused request (400: a reversed date range, say)
 * says what to change, with no "Try again" that can only fail again; anything else offers a retry.
 */
export function failureState(what: string, err: unknown, retry: () => void): HTMLElement {
  if (err instanceof ApiFailure && err.status === 400) {
    return h("div", { class: "callout warning", role: "alert" }, icon("alert"), h("div", {}, err.message));
  }
  return errorState(`${what} could not be loaded: ${errorMessage(err)}`, retry);
}

/**
 * Fills `body` with what `fetch` brings, drawn by `render`: a loading state meanwhile, and on failure
 * an error naming `what` with a retry. The returned function loads again (after a change, say).
 */
export function loadInto<T>(
  body: HTMLElement,
  what: { loading: string; failed: string; rows?: number },
  fetch: () => Promise<T>,
  render: (value: T, reload: () => Promise<void>) => Child | Child[],
): () => Promise<void> {
  const load = async (): Promise<void> => {
    replace(body, loadingState(what.loading, what.rows));
    try {
      const drawn = render(await fetch(), load);
      replace(body, ...(Array.isArray(drawn) ? drawn : [drawn]));
    } catch (err) {
      replace(body, failureState(what.failed, err, load));
    }
  };
  void load();
  return load;
}

/** A modal dialog (native: focus stays inside, Escape closes), removed from the page once closed. */
export function modal(labelledBy: string): HTMLDialogElement {
  const el = h("dialog", { class: "dialog", "aria-labelledby": labelledBy });
  el.addEventListener("close", () => el.remove());
  document.body.append(el);
  return el;
}
