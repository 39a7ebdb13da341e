import { errors } from "./errors";
import type { ApiKeyRecord } from "./model";
import type { Store } from "./ports";

/**
 * Keys named by people: a key's id, or its name where no other key of the project has it (issue #44,
 * "names, not ids"). A name two keys share is refused naming both ids, never guessed.
 */
export async function findProjectKey(
  store: Pick<Store, "listKeys" | "getKey">,
  projectId: string,
  idOrName: string,
): Promise<ApiKeyRecord> {
  const keys = await store.listKeys(projectId);
  const byId = keys.find((k) => k.keyId === idOrName);
  if (byId) return byId;
  const named = keys.filter((k) => k.name === idOrName);
  const [only, ...others] = named;
  if (only && others.length === 0) return only;
  if (only) {
    throw errors.invalidField(
      "key",
      `'${idOrName}' names ${named.length} keys of project '${projectId}' (${named.map((k) => k.keyId).join(", ")}): give the key's id`,
    );
  }
  const elsewhere = await store.getKey(idOrName);
  if (elsewhere) {
    throw errors.invalidField("key", `key ${elsewhere.keyId} belongs to another project, not '${projectId}'`);
  }
  throw errors.notFound(`Project '${projectId}' has no key with the id or name '${idOrName}'.`);
}

/** Key ids to names, for output that shows a key's name beside its id. */
export function keyNames(keys: readonly Pick<ApiKeyRecord, "keyId" | "name">[]): Map<string, string> {
  return new Map(keys.map((k) => [k.keyId, k.name]));
}
