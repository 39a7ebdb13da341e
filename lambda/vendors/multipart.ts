import { errors } from "../core/errors";

/**
 * multipart/form-data read as a standard parser reads it (RFC 2046 §5.1, RFC 7578; the reading of
 * undici's `Response.formData()`), so that the model dmt checks, prices and records is the one the
 * vendor runs. Whatever standard parsers could read two ways is refused with 400 rather than guessed:
 * a preamble, a boundary inside a part, a missing final boundary, a repeated field, a field name that
 * is quoted with escapes, percent-encoded or in RFC 5987 form, and parameters nothing sends.
 */

const TOKEN = "[!#$%&'*+\\-.^_`|~0-9A-Za-z]+";
/** A quoted-string with its escapes (they are refused where a name is read, but delimit the string). */
const QUOTED = '"((?:[^"\\\\\\r\\n]|\\\\[^\\r\\n])*)"';
const MEDIA_TYPE = new RegExp(`^[ \\t]*(${TOKEN}/${TOKEN})[ \\t]*`);
const MEDIA_PARAMETER = new RegExp(`^;[ \\t]*(${TOKEN})=(?:(${TOKEN})|${QUOTED})[ \\t]*`);
/** RFC 2046 §5.1.1: 1 to 70 bchars, the last not a space. */
const BOUNDARY = /^[0-9A-Za-z'()+_,\-./:=? ]{0,69}[0-9A-Za-z'()+_,\-./:=?]$/;
const HEADER_LINE = new RegExp(`^(${TOKEN}):[ \\t]*(.*?)[ \\t]*$`);
const DISPOSITION = /^form-data/i;
const DISPOSITION_PARAMETER = new RegExp(`^;[ \\t]*(${TOKEN})=(?:(${TOKEN})|${QUOTED})`);
const TRANSFER_ENCODINGS = new Set(["7bit", "8bit", "binary"]);
const CHARSETS = new Set(["utf-8", "utf8", "us-ascii"]);

const CRLF = Buffer.from("\r\n");
const HEADER_END = Buffer.from("\r\n\r\n");
const DASH = 0x2d;
const CR = 0x0d;
const LF = 0x0a;

const UPLOAD_TYPE = "uploads must be multipart/form-data with a boundary.";
const text = new TextDecoder("utf-8", { ignoreBOM: true });

interface MediaType {
  essence: string;
  /** Parameter names lower-cased; a value quoted in the header keeps its escapes. */
  parameters: { name: string; value: string; quoted: boolean }[];
}

/** `type/subtype *(";" OWS name=value)`, a value a token or a quoted-string; undefined when malformed. */
function parseMediaType(header: string): MediaType | undefined {
  const head = MEDIA_TYPE.exec(header);
  if (!head?.[1]) return undefined;
  const parameters: MediaType["parameters"] = [];
  let rest = header.slice(head[0].length);
  while (rest !== "" && !/^;[ \t]*$/.test(rest)) {
    const parameter = MEDIA_PARAMETER.exec(rest);
    if (!parameter?.[1]) return undefined;
    const quoted = parameter[2] === undefined;
    parameters.push({ name: parameter[1].toLowerCase(), value: parameter[2] ?? parameter[3] ?? "", quoted });
    rest = rest.slice(parameter[0].length);
  }
  return { essence: head[1].toLowerCase(), parameters };
}

/**
 * The boundary of an upload's `Content-Type`: the `boundary` parameter of `multipart/form-data`, once,
 * 1 to 70 characters as RFC 2046 allows (quoted when it holds characters a token cannot). 400 otherwise.
 */
export function uploadBoundary(contentType: string | undefined): string {
  const type = parseMediaType(contentType ?? "");
  if (type?.essence !== "multipart/form-data") throw errors.invalidHeader("content-type", UPLOAD_TYPE);
  const boundaries = type.parameters.filter((p) => p.name === "boundary");
  const boundary = boundaries[0];
  if (!boundary) throw errors.invalidHeader("content-type", UPLOAD_TYPE);
  if (boundaries.length > 1) throw errors.invalidHeader("content-type", "the boundary is given twice.");
  if (!BOUNDARY.test(boundary.value)) {
    throw errors.invalidHeader(
      "content-type",
      "the boundary must be 1 to 70 characters: letters, digits, spaces (not last) and '()+_,-./:=? (RFC 2046).",
    );
  }
  return boundary.value;
}

function refuse(why: string): never {
  throw errors.badRequest("invalid_multipart", `The multipart form cannot be read: ${why}.`);
}

/**
 * The text fields of a multipart/form-data upload (`model`, `n`, `size`, `prompt`...), files skipped:
 * what metering and the record need of an upload, which is otherwise forwarded untouched. A field
 * name ending in `[]` is a list and may repeat (the map keeps its first value); any other repeats
 * are refused, as is a form that does not parse.
 */
export function formFields(boundary: string, body: Uint8Array): Map<string, string> {
  const fields = new Map<string, string>();
  const fileNames = new Set<string>();
  for (const part of formParts(boundary, Buffer.from(body.buffer, body.byteOffset, body.byteLength))) {
    const { name, isFile, charset, content } = readPart(part);
    if (isFile ? fields.has(name) : fileNames.has(name)) refuse(`'${name}' is both a field and a file`);
    if (isFile) {
      fileNames.add(name);
      continue;
    }
    if (fields.has(name) && !name.endsWith("[]")) refuse(`the field '${name}' is given more than once`);
    if (charset !== undefined && !CHARSETS.has(charset)) refuse(`the field '${name}' is not UTF-8`);
    if (!fields.has(name)) fields.set(name, text.decode(content));
  }
  const charset = fields.get("_charset_");
  if (charset !== undefined && !CHARSETS.has(charset.toLowerCase()))
    refuse("the form's charset is not UTF-8");
  return fields;
}

/**
 * The same form with the text field `name` set to `value` (added when absent), every other part kept
 * byte for byte. The form has passed `formFields`, so its parts are as that read them.
 */
export function withFormField(boundary: string, body: Uint8Array, name: string, value: string): Uint8Array {
  const parts = formParts(boundary, Buffer.from(body.buffer, body.byteOffset, body.byteLength));
  const field = Buffer.from(`Content-Disposition: form-data; name="${name}"\r\n\r\n${value}`, "utf8");
  const kept = parts.filter((part) => readPart(part).name !== name);
  const delimiter = Buffer.from(`--${boundary}\r\n`, "latin1");
  const next = Buffer.from(`\r\n--${boundary}\r\n`, "latin1");
  const close = Buffer.from(`\r\n--${boundary}--\r\n`, "latin1");
  const all = [...kept, field];
  return Buffer.concat([delimiter, ...all.flatMap((part, i) => (i === 0 ? [part] : [next, part])), close]);
}

/**
 * The parts between the delimiters. Every occurrence of the boundary must be a delimiter (at the start
 * after `--`, or after CRLF `--`) followed by CRLF, or by `--` for the close; parsers differ on any other.
 */
function formParts(boundary: string, bytes: Buffer): Buffer[] {
  const marker = Buffer.from(boundary, "latin1");
  const parts: Buffer[] = [];
  let partStart = -1;
  for (let at = bytes.indexOf(marker); at !== -1; at = bytes.indexOf(marker, at + 1)) {
    const opensForm = partStart === -1 && at === 2 && bytes[0] === DASH && bytes[1] === DASH;
    const delimits =
      partStart !== -1 &&
      at >= partStart + 4 &&
      bytes[at - 4] === CR &&
      bytes[at - 3] === LF &&
      bytes[at - 2] === DASH &&
      bytes[at - 1] === DASH;
    if (!opensForm && !delimits) {
      refuse(partStart === -1 ? "it must start with its boundary" : "the boundary appears inside a part");
    }
    if (delimits) parts.push(bytes.subarray(partStart, at - 4));
    const after = at + marker.length;
    if (bytes[after] === DASH && bytes[after + 1] === DASH) {
      const epilogue = bytes.subarray(after + 2);
      if (epilogue.length > 0 && !epilogue.equals(CRLF)) refuse("there is data after the final boundary");
      return parts;
    }
    if (bytes[after] !== CR || bytes[after + 1] !== LF) refuse("a boundary line must end with CRLF");
    partStart = after + 2;
  }
  return refuse(partStart === -1 ? "it must start with its boundary" : "the final boundary is missing");
}

interface Part {
  name: string;
  isFile: boolean;
  /** The charset its `Content-Type` names, lower-cased. */
  charset: string | undefined;
  content: Buffer;
}

function readPart(part: Buffer): Part {
  const headerEnd = part.indexOf(HEADER_END);
  if (headerEnd <= 0) refuse("a part has no Content-Disposition");
  const lines = text.decode(part.subarray(0, headerEnd)).split("\r\n");
  let disposition: { name: string; isFile: boolean } | undefined;
  let contentType: MediaType | undefined;
  for (const line of lines) {
    const header = HEADER_LINE.exec(line);
    if (!header?.[1]) refuse("a part header is malformed");
    const value = header[2] ?? "";
    switch (header[1].toLowerCase()) {
      case "content-disposition":
        if (disposition) refuse("a part has two Content-Disposition headers");
        disposition = readDisposition(value);
        break;
      case "content-type":
        if (contentType) refuse("a part has two Content-Type headers");
        contentType = parseMediaType(value) ?? refuse("a part's Content-Type is malformed");
        break;
      case "content-transfer-encoding":
        if (!TRANSFER_ENCODINGS.has(value.toLowerCase())) refuse("a part is transfer-encoded");
        break;
    }
  }
  if (!disposition) return refuse("a part has no Content-Disposition");
  const charset = contentType?.parameters.find((p) => p.name === "charset")?.value.toLowerCase();
  return { ...disposition, charset, content: part.subarray(headerEnd + HEADER_END.length) };
}

/** `form-data; name="..."[; filename="..."]`, the name plain: no escapes, percent-encoding or `name*`. */
function readDisposition(value: string): { name: string; isFile: boolean } {
  const type = DISPOSITION.exec(value);
  if (!type) refuse("a part is not form-data");
  const seen = new Map<string, string>();
  let rest = value.slice(type[0].length);
  while (rest !== "") {
    const parameter = DISPOSITION_PARAMETER.exec(rest);
    const name = parameter?.[1]?.toLowerCase();
    if (!parameter || !name || seen.has(name)) refuse("a part's Content-Disposition is malformed");
    if (name !== "name" && name !== "filename" && name !== "filename*") {
      refuse(`a part's Content-Disposition has the parameter '${name}'`);
    }
    const raw = parameter[2] ?? parameter[3] ?? "";
    // Parsers disagree on backslashes in quoted values (an escape, or a character).
    if (raw.includes("\\")) refuse("a part's Content-Disposition quotes with backslashes");
    if (name === "filename*" && !isUtf8Extended(raw)) refuse("a part's filename* is not UTF-8 encoded");
    seen.set(name, raw);
    rest = rest.slice(parameter[0].length);
  }
  const name = seen.get("name");
  if (name === undefined) return refuse("a part has no name");
  if (name.includes("%")) refuse("a field name is percent-encoded");
  return { name, isFile: seen.has("filename") || seen.has("filename*") };
}

/** An RFC 5987 value every parser reads alike: `utf-8''` and valid percent-encoding. */
function isUtf8Extended(value: string): boolean {
  const encoded = /^utf-8''(.*)$/i.exec(value)?.[1];
  if (encoded === undefined) return false;
  try {
    decodeURIComponent(encoded);
    return true;
  } catch {
    return false;
  }
}
