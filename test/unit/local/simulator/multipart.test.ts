import { describe, expect, it } from "vitest";
import { parseMultipart } from "../../../../lambda/local/simulator/multipart";
import { SimulatedError } from "../../../../lambda/local/simulator/reply";

const CRLF = "\r\n";

function form(boundary: string, parts: { headers: string; content: string | Buffer }[]): Buffer {
  const pieces: Buffer[] = [];
  for (const part of parts) {
    pieces.push(Buffer.from(`--${boundary}${CRLF}${part.headers}${CRLF}${CRLF}`));
    pieces.push(Buffer.isBuffer(part.content) ? part.content : Buffer.from(part.content));
    pieces.push(Buffer.from(CRLF));
  }
  pieces.push(Buffer.from(`--${boundary}--${CRLF}`));
  return Buffer.concat(pieces);
}

describe("parseMultipart", () => {
  it("reads text fields and file sizes, whatever the order of name and filename", () => {
    // The file's bytes contain CRLFs and dashes: only the delimiter ends a part.
    const audio = Buffer.from(`\r\n--not-it\r\n${"x".repeat(100)}`);
    const body = form("b0undary", [
      { headers: 'Content-Disposition: form-data; name="model"', content: "whisper-1" },
      {
        headers: 'Content-Disposition: form-data; filename="a.mp3"; name="file"\r\nContent-Type: audio/mpeg',
        content: audio,
      },
      { headers: 'Content-Disposition: form-data; name="response_format"', content: "text" },
    ]);
    const parsed = parseMultipart('multipart/form-data; boundary="b0undary"', body);
    expect(Object.fromEntries(parsed.fields)).toEqual({ model: "whisper-1", response_format: "text" });
    expect(parsed.files).toEqual([{ field: "file", filename: "a.mp3", size: audio.length }]);
  });

  it("refuses a body that is not multipart or has no boundary", () => {
    expect(() => parseMultipart("multipart/form-data", Buffer.from("x"))).toThrow(SimulatedError);
    expect(() => parseMultipart("application/json; boundary=x", Buffer.from("x"))).toThrow(SimulatedError);
    expect(() => parseMultipart(undefined, Buffer.from("x"))).toThrow(SimulatedError);
  });
});
