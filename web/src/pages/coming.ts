import { type Child, h } from "../dom";
import { emptyState, type Page, pageHead } from "./page";

/**
 * Pages whose backend is still being built: their layout, with a clear "coming with ..." state in
 * place of data. Each becomes a real page when its API exists.
 */

function section(title: string, ...children: Child[]): HTMLElement {
  return h("section", { class: "card" }, h("h2", { class: "card-title" }, title), ...children);
}

function coming(iconName: string, what: string, feature: string): HTMLElement {
  return emptyState(iconName, `Coming with ${feature}`, what);
}

function disabledFilter(label: string, control: HTMLElement): HTMLElement {
  control.setAttribute("disabled", "");
  control.id = `filter-${label.toLowerCase().replace(/\W+/g, "-")}`;
  return h("div", { class: "filter" }, h("label", { for: control.id }, label), control);
}

const select = (...options: string[]) => h("select", {}, ...options.map((o) => h("option", {}, o)));

export const interactionsPage: Page = {
  path: "/dashboard/interactions",
  title: "Interactions",
  icon: "list",
  render(_ctx, main) {
    main.replaceChildren(
      pageHead(
        "Interactions",
        "Every proxied call, newest first, with its request, response, tokens, cost and latency.",
      ),
      h(
        "div",
        { class: "filters", role: "group", "aria-label": "Filters (available with the warehouse)" },
        disabledFilter("From", h("input", { type: "date" })),
        disabledFilter("To", h("input", { type: "date" })),
        disabledFilter("Vendor", select("All vendors", "Groq", "OpenAI", "Anthropic", "Gemini")),
        disabledFilter("Model", h("input", { type: "text", placeholder: "Any model" })),
        disabledFilter("User ID", h("input", { type: "text", placeholder: "Any user" })),
        disabledFilter("Status", select("Any status", "Succeeded", "Failed")),
        disabledFilter("Billing", select("Any billing", "Credits", "BYOK", "Dual key")),
      ),
      h(
        "section",
        { class: "card" },
        coming(
          "list",
          "Calls made with this project's keys will be listed here once the warehouse stores interactions.",
          "the warehouse",
        ),
      ),
    );
  },
};

export const usagePage: Page = {
  path: "/dashboard/usage",
  title: "Usage",
  icon: "chart",
  render(_ctx, main) {
    main.replaceChildren(
      pageHead("Usage", "Requests, tokens and cost per day, split by vendor and model."),
      h(
        "div",
        { class: "grid" },
        ...["Requests per day", "Tokens per day", "Cost per day"].map((title) =>
          section(
            title,
            coming("chart", "Charts are drawn from the warehouse's daily rollups.", "the warehouse"),
          ),
        ),
      ),
    );
  },
};
