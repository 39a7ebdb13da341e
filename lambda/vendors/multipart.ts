const HEADER_END = Buffer.from("\r\n\r\n");
const BOUNDARY = /boundary=(?:"([^"]+)"|([^;\s]+))/i;
/** Text fields are model names, counts and sizes: anything longer is not one we read. */
const MAX_FIELD_BYTES = 1024;

/**
 * The small text fields of a multipart/form-data upload (`model`, `n`, `size`...), files skipped: what
 * metering and the record need of an upload, which is otherwise forwarded untouched. A malformed form
 * yields the fields read so far; the vendor judges the form itself.
 */
export function formFields(contentType: string | undefined, body: Uint8Array): Map<string, string> {
  const fields = new Map<string, string>();
  const boundary = BOUNDARY.exec(contentType ?? "");
  if (!boundary) return fields;
  const bytes = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  const delimiter = Buffer.from(`--${boundary[1] ?? boundary[2]}`);
  let start = bytes.indexOf(delimiter);
  while (start !== -1) {
    const partStart = start + delimiter.length;
    // `--` after a delimiter closes the form.
    if (bytes[partStart] === 0x2d && bytes[partStart + 1] === 0x2d) break;
    const next = bytes.indexOf(delimiter, partStart);
    if (next === -1) break;
    const headerEnd = bytes.indexOf(HEADER_END, partStart);
    // The content ends with the CRLF that precedes the next delimiter.
    const contentStart = headerEnd + HEADER_END.length;
    if (headerEnd !== -1 && headerEnd < next && next - 2 - contentStart <= MAX_FIELD_BYTES) {
      const headers = bytes.subarray(partStart, headerEnd).toString("utf8");
      const name = /[;\s]name="([^"]*)"/i.exec(headers)?.[1];
      if (name !== undefined && !/filename=/i.test(headers)) {
        fields.set(name, bytes.subarray(contentStart, next - 2).toString("utf8"));
      }
    }
    start = next;
  }
  return fields;
}
