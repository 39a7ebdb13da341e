import { SimulatedError } from "./reply";

export interface UploadedFile {
  field: string;
  filename: string;
  size: number;
}

export interface MultipartForm {
  fields: Map<string, string>;
  files: UploadedFile[];
}

const HEADER_END = Buffer.from("\r\n\r\n");

/** Just enough of multipart/form-data to read the text fields and each file's name and size. */
export function parseMultipart(contentType: string | undefined, body: Buffer): MultipartForm {
  const boundary = /boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(contentType ?? "");
  if (!contentType?.toLowerCase().startsWith("multipart/form-data") || !boundary) {
    throw new SimulatedError(
      400,
      "The request must be multipart/form-data with a boundary.",
      "invalid_multipart",
    );
  }
  const delimiter = Buffer.from(`--${boundary[1] ?? boundary[2]}`);
  const form: MultipartForm = { fields: new Map(), files: [] };
  let start = body.indexOf(delimiter);
  while (start !== -1) {
    const partStart = start + delimiter.length;
    // `--` after a delimiter closes the form.
    if (body[partStart] === 0x2d && body[partStart + 1] === 0x2d) break;
    const next = body.indexOf(delimiter, partStart);
    if (next === -1) break;
    const headerEnd = body.indexOf(HEADER_END, partStart);
    if (headerEnd !== -1 && headerEnd < next) {
      const headers = body.subarray(partStart, headerEnd).toString("utf8");
      // The content ends with the CRLF that precedes the next delimiter.
      const content = body.subarray(headerEnd + HEADER_END.length, next - 2);
      const name = /[;\s]name="([^"]*)"/i.exec(headers)?.[1];
      const filename = /filename="([^"]*)"/i.exec(headers)?.[1];
      if (name !== undefined && filename !== undefined) {
        form.files.push({ field: name, filename, size: content.length });
      } else if (name !== undefined) {
        form.fields.set(name, content.toString("utf8"));
      }
    }
    start = next;
  }
  return form;
}
