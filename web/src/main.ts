import { Api, type Me, type MemberProject } from "./api";
import { Auth, CALLBACK_PATH, SIGNED_OUT_PATH } from "./auth";
import type { DashboardConfig } from "./config";
import { h, icon, labelTableCells, lockWrites, replace } from "./dom";
import { budgetsPage } from "./pages/budgets";
import { creditsPage } from "./pages/credits";
import { interactionsPage } from "./pages/interactions";
import { keysPage } from "./pages/keys";
import { membersPage } from "./pages/members";
import { overviewPage } from "./pages/overview";
import type { Page, PageContext } from "./pages/page";
import { settingsPage } from "./pages/settings";
import { usagePage } from "./pages/usage";

const PAGES: Page[] = [
  overviewPage,
  keysPage,
  interactionsPage,
  usagePage,
  creditsPage,
  budgetsPage,
  membersPage,
  settingsPage,
];
const HOME = overviewPage.path;
const VIEWER_NOTE_ID = "viewer-note";
const PROJECT_KEY = "dmt.project";

const root = document.getElementById("app") as HTMLElement;

const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

function brand(): HTMLElement {
  return h(
    "div",
    { class: "brand" },
    h("span", { class: "logo", "aria-hidden": "true" }, "d"),
    h("span", {}, "dmt"),
  );
}

/** The page shown when nobody is signed in: after sign-out, on expiry, or on a first visit. */
function signInScreen(auth: Auth, notice?: { text: string; kind: "info" | "error" }): void {
  document.title = "Sign in · dmt";
  const button = h("button", { type: "button", class: "button primary wide" }, "Sign in");
  button.addEventListener("click", () => {
    button.disabled = true;
    button.textContent = "Redirecting…";
    const back =
      location.pathname.startsWith("/dashboard/") && !location.pathname.startsWith(SIGNED_OUT_PATH);
    auth.signIn(back ? location.pathname + location.search : HOME).catch((err: unknown) => {
      button.disabled = false;
      button.textContent = "Sign in";
      replace(
        status,
        h("div", { class: "callout error", role: "alert" }, `Sign-in could not start: ${message(err)}`),
      );
    });
  });
  const status = h(
    "div",
    { role: "status" },
    notice
      ? h(
          "div",
          { class: `callout ${notice.kind}`, role: notice.kind === "error" ? "alert" : null },
          notice.text,
        )
      : null,
  );
  replace(
    root,
    h(
      "main",
      { class: "signin" },
      h(
        "div",
        { class: "signin-card" },
        brand(),
        h("h1", {}, "Sign in to the dashboard"),
        h("p", { class: "muted" }, "Manage API keys, follow usage and credits, and configure your projects."),
        status,
        button,
      ),
    ),
  );
  button.focus();
}

function fatal(text: string): void {
  replace(
    root,
    h(
      "main",
      { class: "signin" },
      h("div", { class: "signin-card" }, brand(), h("div", { class: "callout error", role: "alert" }, text)),
    ),
  );
}

function toaster(): { element: HTMLElement; toast: PageContext["toast"] } {
  const element = h("div", { class: "toasts", role: "status", "aria-live": "polite" });
  return {
    element,
    toast(text, kind = "success") {
      const item = h("div", { class: `toast ${kind}` }, icon(kind === "success" ? "check" : "alert"), text);
      element.append(item);
      setTimeout(() => item.remove(), 5000);
    },
  };
}

function chooseProject(projects: MemberProject[]): MemberProject | undefined {
  const saved = localStorage.getItem(PROJECT_KEY);
  return projects.find((p) => p.projectId === saved) ?? projects[0];
}

/** The signed-in application: sidebar, top bar, and the page of the current path. */
function shell(auth: Auth, api: Api, me: Me, email: string): void {
  let project = chooseProject(me.projects);
  const main = h("main", { id: "main", class: "content", tabindex: "-1" });
  const isViewer = () => project?.role === "viewer";
  // Viewers see every control that would change the project disabled, and this note says why.
  const viewerNote = h(
    "p",
    { id: VIEWER_NOTE_ID, class: "callout info viewer-note", "data-testid": "viewer-note", hidden: true },
    icon("alert"),
    h(
      "span",
      {},
      "You are a viewer of this project: you can see everything in it, and the controls that change it are disabled. Ask an admin of the project to make you an admin.",
    ),
  );
  const { element: toasts, toast } = toaster();
  const nav = h("nav", { "aria-label": "Dashboard" });
  const projectSelect = h(
    "select",
    { id: "project" },
    ...me.projects.map((p) =>
      h(
        "option",
        { value: p.projectId, selected: p.projectId === project?.projectId },
        p.personal ? "Personal project" : p.projectId,
      ),
    ),
  );
  projectSelect.addEventListener("change", () => {
    project = me.projects.find((p) => p.projectId === projectSelect.value);
    if (project) localStorage.setItem(PROJECT_KEY, project.projectId);
    setMenu(false);
    render();
  });
  /** Who is signed in, and signing out: in the top bar, or on a phone at the end of the menu. */
  const userBlock = () => {
    const signOut = h("button", { type: "button", class: "button quiet" }, icon("out"), "Sign out");
    signOut.addEventListener("click", () => {
      signOut.disabled = true;
      void auth.signOut();
    });
    return h(
      "div",
      { class: "user" },
      me.user.operator ? h("span", { class: "badge operator" }, "Operator") : null,
      h("span", { class: "user-email" }, email),
      signOut,
    );
  };

  const user = userBlock();
  const topbar = h("header", { class: "topbar" });
  const phoneUser = h("div", { class: "menu-user" });
  // On a phone the project, the pages and the user fold into a menu, so the page starts at the top.
  const sidebar = h("aside", { class: "sidebar" });
  const menuButton = h(
    "button",
    { type: "button", class: "button quiet menu-button", "aria-expanded": "false", "aria-controls": "menu" },
    icon("list"),
    "Menu",
  );
  const setMenu = (open: boolean) => {
    sidebar.classList.toggle("open", open);
    menuButton.setAttribute("aria-expanded", String(open));
  };
  menuButton.addEventListener("click", () => setMenu(!sidebar.classList.contains("open")));

  const navigate = (path: string) => {
    history.pushState(null, "", path);
    setMenu(false);
    render();
    main.focus();
  };

  function render(): void {
    const path = location.pathname.replace(/\/$/, "");
    const page = PAGES.find((p) => p.path === path);
    if (!page && (path === "/dashboard" || path === CALLBACK_PATH)) {
      history.replaceState(null, "", HOME);
      render();
      return;
    }
    nav.replaceChildren(
      ...PAGES.map((p) => {
        const link = h(
          "a",
          { href: p.path, "aria-current": p === page ? "page" : null },
          icon(p.icon),
          p.title,
        );
        link.addEventListener("click", (event) => {
          if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
          event.preventDefault();
          navigate(p.path);
        });
        return link;
      }),
    );
    document.title = `${page?.title ?? "Not found"} · dmt`;
    if (!page) {
      replace(
        main,
        h(
          "div",
          { class: "empty" },
          h("h1", {}, "Page not found"),
          h("p", {}, "There is no such page in the dashboard."),
        ),
      );
      return;
    }
    if (!project) {
      replace(main, h("div", { class: "callout error", role: "alert" }, "You do not belong to any project."));
      return;
    }
    viewerNote.hidden = !isViewer();
    page.render({ api, me, project, toast }, main);
  }

  replace(
    root,
    h("a", { href: "#main", class: "skip-link" }, "Skip to content"),
    h("div", { class: "layout" }, sidebar, h("div", { class: "main-column" }, topbar, viewerNote, main)),
    toasts,
  );
  sidebar.append(
    h("div", { class: "sidebar-head" }, brand(), menuButton),
    h(
      "div",
      { class: "menu", id: "menu" },
      h("label", { for: "project", class: "sidebar-label" }, "Project"),
      projectSelect,
      nav,
      phoneUser,
    ),
  );
  // One user block, moved where the layout shows it (the media query of styles/layout.css).
  const phone = window.matchMedia("(max-width: 800px)");
  const placeUser = () => (phone.matches ? phoneUser : topbar).append(user);
  phone.addEventListener("change", placeUser);
  placeUser();
  labelTableCells(main);
  lockWrites(main, isViewer, VIEWER_NOTE_ID);
  window.addEventListener("popstate", render);
  render();
}

async function boot(): Promise<void> {
  let config: DashboardConfig;
  try {
    const response = await fetch("/dashboard/config.json");
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    config = (await response.json()) as DashboardConfig;
  } catch (err) {
    fatal(`The dashboard could not load its configuration (${message(err)}). Reload the page to try again.`);
    return;
  }
  const auth = new Auth(config);

  if (location.pathname === CALLBACK_PATH) {
    try {
      const back = await auth.completeSignIn(new URL(location.href));
      history.replaceState(null, "", back);
    } catch (err) {
      history.replaceState(null, "", HOME);
      signInScreen(auth, { text: `Sign-in failed: ${message(err)}`, kind: "error" });
      return;
    }
  }
  if (location.pathname === SIGNED_OUT_PATH) {
    signInScreen(auth, { text: "You have signed out.", kind: "info" });
    return;
  }
  const session = auth.session();
  if (!session) {
    signInScreen(auth);
    return;
  }
  const api = new Api(
    config.apiBase,
    () => auth.session()?.accessToken ?? "",
    () => {
      auth.forget();
      signInScreen(auth, { text: "Your session has ended. Sign in again to continue.", kind: "info" });
    },
  );
  replace(root, h("p", { class: "boot", role: "status" }, "Loading your projects…"));
  try {
    const me = await api.me();
    shell(auth, api, me, session.email ?? session.name ?? me.user.id);
  } catch (err) {
    if (auth.session()) fatal(`The dashboard could not load your projects: ${message(err)}`);
  }
}

void boot();
