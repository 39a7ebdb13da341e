import type { KeyView } from "./api";
import { h } from "./dom";
import type { PageContext } from "./pages/page";

/** The project's keys by id, revoked and expired ones included (keys are never deleted). */
export type KeyDirectory = ReadonlyMap<string, Pick<KeyView, "name" | "status">>;

/** The project's keys; none when they cannot be read (figures then name keys by id). */
export function keyDirectory(ctx: PageContext): Promise<KeyDirectory> {
  return ctx.api
    .listKeys(ctx.project.projectId)
    .then((keys) => new Map(keys.map((k) => [k.keyId, { name: k.name, status: k.status }])))
    .catch(() => new Map());
}

/**
 * A key as usage figures name it: its name over its id, and a badge when it no longer works, so the
 * rows of a revoked or expired key still add up to the total and say why the key is quiet now. An id
 * the list does not have (it could not be read) shows alone.
 */
export function keyRef(id: string, keys: KeyDirectory): HTMLElement {
  const key = keys.get(id);
  if (key === undefined) return h("code", { class: "key-id" }, id);
  return h(
    "span",
    { class: "key-ref" },
    h(
      "span",
      { class: "key-name" },
      key.name,
      key.status === "active" ? null : h("span", { class: `badge ${key.status} key-status` }, key.status),
    ),
    h("code", { class: "key-id muted" }, id),
  );
}
