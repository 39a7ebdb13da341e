/**
 * A few DOM helpers. Content always goes in as text nodes (never innerHTML), so names and messages
 * that contain markup are shown as text.
 */

export type Child = Node | string | number | null | undefined | false;

type Props = {
  class?: string;
  on?: { [K in keyof HTMLElementEventMap]?: (event: HTMLElementEventMap[K]) => void };
} & Record<string, unknown>;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Props = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (name === "on") {
      for (const [event, handler] of Object.entries(value as Record<string, EventListener>)) {
        el.addEventListener(event, handler);
      }
    } else if (name === "class") {
      el.className = String(value);
    } else if (typeof value === "boolean") {
      // Properties such as disabled, checked, required, hidden.
      (el as unknown as Record<string, boolean>)[name] = value;
    } else if (value !== undefined && value !== null) {
      el.setAttribute(name, String(value));
    }
  }
  append(el, ...children);
  return el;
}

export function append(parent: Node, ...children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    parent.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function replace(parent: Element, ...children: Child[]): void {
  parent.replaceChildren();
  append(parent, ...children);
}

const SVG = "http://www.w3.org/2000/svg";

/** Line icons on a 24-unit grid, drawn with the current text colour. */
const ICONS: Record<string, string[]> = {
  home: ["M3 11l9-7 9 7", "M5 10v10h14V10", "M10 20v-6h4v6"],
  key: ["M8 11a4 4 0 1 0 0 8 4 4 0 0 0 0-8z", "M10.8 12.2L20 3", "M16 7l3 3", "M13.5 9.5l2 2"],
  list: ["M8 6h13", "M8 12h13", "M8 18h13", "M3 6h.01", "M3 12h.01", "M3 18h.01"],
  chart: ["M3 3v18h18", "M7 15v3", "M12 10v8", "M17 6v12"],
  gauge: ["M4 18a8 8 0 1 1 16 0", "M12 18l4-6", "M12 18h.01"],
  coins: [
    "M12 3c4.4 0 8 1.3 8 3s-3.6 3-8 3-8-1.3-8-3 3.6-3 8-3z",
    "M4 6v6c0 1.7 3.6 3 8 3s8-1.3 8-3V6",
    "M4 12v6c0 1.7 3.6 3 8 3s8-1.3 8-3v-6",
  ],
  settings: [
    "M4 6h10",
    "M18 6h2",
    "M4 12h4",
    "M12 12h8",
    "M4 18h12",
    "M20 18h0",
    "M16 4v4",
    "M10 10v4",
    "M18 16v4",
  ],
  plus: ["M12 5v14", "M5 12h14"],
  copy: ["M9 9h11v11H9z", "M5 15H4V4h11v1"],
  out: ["M10 4H5v16h5", "M14 8l4 4-4 4", "M18 12H9"],
  alert: ["M12 3l10 18H2z", "M12 10v4", "M12 17h.01"],
  check: ["M5 12l5 5L20 7"],
  clock: ["M12 3a9 9 0 1 1 0 18 9 9 0 0 1 0-18z", "M12 7v5l3 2"],
  refresh: ["M20 12a8 8 0 1 1-2.3-5.7", "M20 4v5h-5"],
  download: ["M12 4v11", "M7 10l5 5 5-5", "M5 20h14"],
  close: ["M6 6l12 12", "M18 6L6 18"],
  filter: ["M4 5h16l-6 8v5l-4 2v-7z"],
  users: [
    "M9 11a4 4 0 1 0 0-8 4 4 0 0 0 0 8z",
    "M3 21v-1a6 6 0 0 1 12 0v1",
    "M16 3.5a4 4 0 0 1 0 7",
    "M21 21v-1a6 6 0 0 0-4-5.6",
  ],
  trash: ["M4 7h16", "M10 11v6", "M14 11v6", "M6 7l1 13h10l1-13", "M9 7V4h6v3"],
};

export function icon(name: keyof typeof ICONS): SVGSVGElement {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("class", "icon");
  for (const d of ICONS[name] ?? []) {
    const path = document.createElementNS(SVG, "path");
    path.setAttribute("d", d);
    svg.appendChild(path);
  }
  return svg;
}

/**
 * Copies each table's column names onto its cells (`data-label`), for the narrow layout that shows a
 * row as a card (styles/page-parts.css). Watches `root`, so tables drawn later are labelled as they appear.
 */
export function labelTableCells(root: HTMLElement): void {
  const label = () => {
    for (const table of root.querySelectorAll<HTMLTableElement>("table.table")) {
      const names = [...table.querySelectorAll("thead th")].map((th) => th.textContent?.trim() ?? "");
      for (const row of table.querySelectorAll("tbody tr")) {
        [...row.children].forEach((cell, i) => {
          if (!cell.hasAttribute("data-label")) cell.setAttribute("data-label", names[i] ?? "");
        });
      }
    }
  };
  new MutationObserver(label).observe(root, { childList: true, subtree: true });
  label();
}

/** Marks a control, or a form (all its fields), as one that changes the project: viewers see it disabled. */
export function writes<T extends HTMLElement>(control: T): T {
  control.setAttribute("data-writes", "");
  return control;
}

/**
 * While `locked()` (the signed-in user is a viewer of the project shown), disables every control in
 * `root` marked by `writes`, as it appears, each described by the note `reasonId` (why, and whom to
 * ask): a viewer learns it before filling in a form, not after.
 */
export function lockWrites(root: HTMLElement, locked: () => boolean, reasonId: string): void {
  const lock = () => {
    if (!locked()) return;
    for (const marked of root.querySelectorAll<HTMLElement>("[data-writes]")) {
      const controls = marked instanceof HTMLFormElement ? [marked, ...marked.elements] : [marked];
      for (const control of controls) {
        if ("disabled" in control) control.disabled = true;
        const described = control.getAttribute("aria-describedby") ?? "";
        if (!described.split(" ").includes(reasonId)) {
          control.setAttribute("aria-describedby", `${described} ${reasonId}`.trim());
        }
      }
    }
  };
  new MutationObserver(lock).observe(root, { childList: true, subtree: true });
  lock();
}
