// Label values as the server writes them (drods.model.work.label_value): a name of at most 63
// characters as it is; a longer one cut to 52 characters (trailing "-" and "." dropped), a "-" and
// the first 10 hex digits of the SHA-256 of the whole name. Works and member copies carry
// multicluster.io/binding=<labelValue(binding name)>.

export const BINDING_LABEL = "multicluster.io/binding";

// null when this page cannot hash (crypto.subtle exists only in a secure context: HTTPS or localhost).
export async function labelValue(name) {
  if (name.length <= 63) return name;
  if (!globalThis.crypto || !crypto.subtle) return null;
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(name)));
  const hex = [...digest].map((b) => b.toString(16).padStart(2, "0")).join("");
  return `${name.slice(0, 52).replace(/[-.]+$/, "")}-${hex.slice(0, 10)}`;
}
