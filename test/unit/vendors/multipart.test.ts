import { FormData, Response } from "undici";
import { describe, expect, it } from "vitest";
import { ApiError } from "../../../lambda/core/errors";
import { formFields, uploadBoundary, withFormField } from "../../../lambda/vendors/multipart";

const B = "dmt-test-boundary-0123456789abcdef";
const TYPE = `multipart/form-data; boundary=${B}`;

/** A form from raw parts (headers, a blank line, content), closed unless told otherwise. */
function form(parts: string[], boundary = B, close = `--${boundary}--\r\n`): Buffer {
  return Buffer.from(`${parts.map((p) => `--${boundary}\r\n${p}\r\n`).join("")}${close}`);
}
const field = (name: string, value: string) =>
  `Content-Disposition: form-data; name="${name}"\r\n\r\n${value}`;
const file = (name: string, content: string) =>
  `Content-Disposition: form-data; name="${name}"; filename="a.wav"\r\nContent-Type: audio/wav\r\n\r\n${content}`;

/** dmt's reading: the fields, or the 400 it answers. */
function ours(contentType: string, body: Buffer): Map<string, string> | ApiError {
  try {
    return formFields(uploadBoundary(contentType), body);
  } catch (err) {
    if (err instanceof ApiError && err.status === 400) return err;
    throw err;
  }
}

/** The standard parser's reading (undici's Response.formData()): the model, or failure. */
async function standard(contentType: string, body: Buffer): Promise<{ model: unknown } | "failure"> {
  try {
    const data = await new Response(body, { headers: { "content-type": contentType } }).formData();
    return { model: data.get("model") ?? undefined };
  } catch {
    return "failure";
  }
}

interface Case {
  what: string;
  contentType?: string;
  body: Buffer;
}

/** Forms built to make a lax reader see `whisper-1` where a standard parser sees another model, or neither. */
const adversarial: Case[] = [
  {
    what: "a boundary= inside another parameter's name",
    contentType: `multipart/form-data; xboundary=AAAA; boundary=${B}`,
    body: Buffer.concat([
      form([
        field("model", "gpt-4o-transcribe"),
        file("file", `--AAAA\r\n${field("model", "whisper-1")}\r\n--AAAA--`),
      ]),
    ]),
  },
  {
    what: "a boundary= inside a quoted parameter",
    contentType: `multipart/form-data; charset="x; boundary=AAAA"; boundary=${B}`,
    body: form([
      field("model", "gpt-4o-transcribe"),
      file("file", `--AAAA\r\n${field("model", "whisper-1")}`),
    ]),
  },
  {
    what: "the boundary given twice",
    contentType: `multipart/form-data; boundary=AAAA; boundary=${B}`,
    body: form([field("model", "gpt-4o-transcribe")]),
  },
  {
    what: "a name= in a header that is not Content-Disposition",
    body: form([
      field("model", "gpt-4o-transcribe"),
      'X-Note: a; name="model"\r\nContent-Disposition: form-data; name="prompt"\r\n\r\nwhisper-1',
    ]),
  },
  {
    what: "a filename= in a header that is not Content-Disposition",
    body: form([
      field("model", "whisper-1"),
      'X-Note: filename="x"\r\nContent-Disposition: form-data; name="model"\r\n\r\ngpt-4o-transcribe',
    ]),
  },
  {
    what: "two model fields",
    body: form([field("model", "whisper-1"), field("model", "gpt-4o-transcribe")]),
  },
  {
    what: "two model fields, the second a file",
    body: form([field("model", "whisper-1"), file("model", "gpt-4o-transcribe")]),
  },
  {
    what: "model sent as a file only, with filename*",
    body: form([
      `Content-Disposition: form-data; name="model"; filename*=utf-8''m.txt\r\n\r\ngpt-4o-transcribe`,
    ]),
  },
  {
    what: "two Content-Disposition headers in one part",
    body: form([
      'Content-Disposition: form-data; name="model"\r\nContent-Disposition: form-data; name="prompt"\r\n\r\nwhisper-1',
      field("model", "gpt-4o-transcribe"),
    ]),
  },
  {
    what: "two names in one Content-Disposition",
    body: form([
      'Content-Disposition: form-data; name="prompt"; name="model"\r\n\r\ngpt-4o-transcribe',
      field("model", "whisper-1"),
    ]),
  },
  {
    what: "a quoted name with a backslash escape",
    body: form([
      'Content-Disposition: form-data; name="x\\"; name=model"\r\n\r\ngpt-4o-transcribe',
      field("model", "whisper-1"),
    ]),
  },
  {
    what: "a filename quoted with a backslash before the name",
    body: form(['Content-Disposition: form-data; filename="a\\"; name="model"\r\n\r\ngpt-4o-transcribe']),
  },
  {
    what: "an RFC 5987 name",
    body: form([
      `Content-Disposition: form-data; name*=utf-8''model\r\n\r\ngpt-4o-transcribe`,
      field("prompt", "whisper-1"),
    ]),
  },
  {
    what: "a percent-encoded name",
    body: form([field("mod%65l", "gpt-4o-transcribe"), field("model", "whisper-1")]),
  },
  {
    what: "a %22 in a name",
    body: form([field("model%22", "gpt-4o-transcribe"), field("model", "whisper-1")]),
  },
  {
    what: "a base64 transfer encoding",
    body: form([
      `Content-Disposition: form-data; name="model"\r\nContent-Transfer-Encoding: base64\r\n\r\n${Buffer.from("gpt-4o-transcribe").toString("base64")}`,
    ]),
  },
  {
    what: "a UTF-16 field",
    body: Buffer.concat([
      Buffer.from(
        `--${B}\r\nContent-Disposition: form-data; name="model"\r\nContent-Type: text/plain; charset=utf-16le\r\n\r\n`,
      ),
      Buffer.from("gpt-4o-transcribe", "utf16le"),
      Buffer.from(`\r\n--${B}--\r\n`),
    ]),
  },
  {
    what: "a form charset other than UTF-8",
    body: form([field("_charset_", "iso-2022-jp"), field("model", "whisper-1")]),
  },
  {
    what: "a preamble holding a part",
    body: Buffer.from(
      `${field("model", "whisper-1")}\r\n--${B}\r\n${field("model", "gpt-4o-transcribe")}\r\n--${B}--\r\n`,
    ),
  },
  {
    what: "a preamble before the first boundary",
    body: Buffer.from(`junk--${B}\r\n${field("model", "gpt-4o-transcribe")}\r\n--${B}--\r\n`),
  },
  {
    what: "the boundary inside a part, not at a line start",
    body: form([
      file("file", `x--${B}\r\n${field("model", "whisper-1")}`),
      field("model", "gpt-4o-transcribe"),
    ]),
  },
  {
    what: "the boundary inside a part, followed by other characters",
    body: form([
      file("file", `\r\n--${B}X\r\n${field("model", "whisper-1")}`),
      field("model", "gpt-4o-transcribe"),
    ]),
  },
  {
    what: "a part after the final boundary",
    body: Buffer.concat([
      form([field("model", "gpt-4o-transcribe")]),
      Buffer.from(`--${B}\r\n${field("model", "whisper-1")}\r\n--${B}--\r\n`),
    ]),
  },
  { what: "the final boundary missing", body: form([field("model", "gpt-4o-transcribe")], B, "") },
  {
    what: "the final boundary missing after a delimiter",
    body: form([field("model", "gpt-4o-transcribe")], B, `--${B}\r\n`),
  },
  {
    what: "a boundary longer than 70 characters",
    contentType: `multipart/form-data; boundary=${"b".repeat(71)}`,
    body: form([field("model", "gpt-4o-transcribe")], "b".repeat(71)),
  },
  {
    what: "line feeds without carriage returns",
    body: Buffer.from(
      `--${B}\nContent-Disposition: form-data; name="model"\n\ngpt-4o-transcribe\n--${B}--\n`,
    ),
  },
  {
    what: "a bare line feed inside part headers",
    body: form([
      'Content-Disposition: form-data; name="prompt"\nContent-Disposition: form-data; name="model"\r\n\r\nx',
    ]),
  },
  {
    what: "a folded header line",
    body: form(['Content-Disposition: form-data;\r\n name="model"\r\n\r\ngpt-4o-transcribe']),
  },
  {
    what: "a space before the header colon",
    body: form(['Content-Disposition : form-data; name="model"\r\n\r\ngpt-4o-transcribe']),
  },
  {
    what: "a space before a parameter's semicolon",
    body: form(['Content-Disposition: form-data; name="model" ; filename="a"\r\n\r\ngpt-4o-transcribe']),
  },
  { what: "a part with no headers", body: form(["\r\ngpt-4o-transcribe"]) },
  {
    what: "a part that is not form-data",
    body: form(['Content-Disposition: attachment; name="model"\r\n\r\nx']),
  },
  {
    what: "an unknown Content-Disposition parameter",
    body: form(['Content-Disposition: form-data; xname="model"; name="prompt"\r\n\r\nwhisper-1']),
  },
  {
    what: "a filename* in another encoding",
    body: form([
      `Content-Disposition: form-data; name="model"; filename*=iso-8859-1''a\r\n\r\nx`,
      field("model", "gpt-4o-transcribe"),
    ]),
  },
];

/** Forms read alike by every parser: each must be read, and as the standard parser reads it. */
const plain: Case[] = [
  {
    what: "two fields and a file",
    body: form([field("model", "whisper-1"), file("file", "RIFF\r\n--x"), field("n", "2")]),
  },
  {
    what: "a quoted boundary with spaces",
    contentType: 'multipart/form-data; boundary="a b:c?"',
    body: form([field("model", "whisper-1")], "a b:c?"),
  },
  { what: "a token name", body: form(["Content-Disposition: form-data; name=model\r\n\r\nwhisper-1"]) },
  {
    what: "names in any case",
    body: form(['content-disposition: FORM-DATA; NAME="model"\r\n\r\nwhisper-1']),
  },
  { what: "an empty model", body: form([field("model", "")]) },
  { what: "a byte-order mark kept", body: form([field("model", "\uFEFFwhisper-1")]) },
  {
    what: "invalid UTF-8 in a value",
    body: Buffer.concat([
      Buffer.from(`--${B}\r\n${field("model", "")}`),
      Buffer.from([0xff, 0xfe]),
      Buffer.from(`\r\n--${B}--`),
    ]),
  },
  {
    what: "a list field repeated",
    body: form([field("model", "whisper-1"), field("include[]", "a"), field("include[]", "b")]),
  },
  {
    what: "files repeated",
    body: form([field("model", "gpt-image-1"), file("image[]", "1"), file("image[]", "2")]),
  },
  {
    what: "a text field with a UTF-8 Content-Type and a binary transfer encoding",
    body: form([
      `Content-Disposition: form-data; name="model"\r\nContent-Type: text/plain; charset=UTF-8\r\nContent-Transfer-Encoding: binary\r\n\r\nwhisper-1`,
    ]),
  },
  { what: "no epilogue CRLF", body: form([field("model", "whisper-1")], B, `--${B}--`) },
  {
    what: "a 70-character boundary",
    contentType: `multipart/form-data; boundary=${"b".repeat(70)}`,
    body: form([field("model", "whisper-1")], "b".repeat(70)),
  },
  {
    what: "parameters before the boundary",
    contentType: `Multipart/Form-Data ; charset=utf-8;BOUNDARY="${B}";`,
    body: form([field("model", "whisper-1")]),
  },
];

describe("multipart forms read as the standard parser reads them", () => {
  it.each(adversarial)("$what: refused with 400, or read with the standard parser's model", async (c) => {
    const contentType = c.contentType ?? TYPE;
    const read = ours(contentType, c.body);
    const vendor = await standard(contentType, c.body);
    if (read instanceof ApiError) {
      expect(read.toBody().error.type).toBe("invalid_request_error");
      return;
    }
    expect(vendor).not.toBe("failure");
    if (vendor === "failure") return;
    // A model the vendor reads as a file is no model dmt may price.
    expect(read.get("model")).toBe(typeof vendor.model === "string" ? vendor.model : undefined);
  });

  it.each(plain)("$what: read, as the standard parser reads it", async (c) => {
    const contentType = c.contentType ?? TYPE;
    const read = ours(contentType, c.body);
    if (read instanceof ApiError) throw read;
    const vendor = await standard(contentType, c.body);
    expect(vendor).toEqual({ model: read.get("model") });
  });

  it("reads what undici's own FormData writes, text fields only, files skipped", async () => {
    const data = new FormData();
    data.append("model", "whisper-1");
    data.append("file", new Blob([Buffer.from([0, 13, 10, 45, 45, 255])]), "a.wav");
    data.append("prompt", "é".repeat(5000));
    data.append("timestamp_granularities[]", "word");
    data.append("timestamp_granularities[]", "segment");
    const response = new Response(data);
    const body = Buffer.from(await response.arrayBuffer());
    const fields = formFields(uploadBoundary(response.headers.get("content-type") ?? undefined), body);
    expect([...fields]).toEqual([
      ["model", "whisper-1"],
      ["prompt", "é".repeat(5000)],
      ["timestamp_granularities[]", "word"],
    ]);
  });

  it("refuses the ambiguous cases the issue names, in the service's error shape", () => {
    const refusal = (contentType: string, body: Buffer) => {
      const read = ours(contentType, body);
      return read instanceof ApiError ? read.toBody().error.code : "read";
    };
    const two = form([field("model", "whisper-1"), field("model", "gpt-4o-transcribe")]);
    expect(refusal(TYPE, two)).toBe("invalid_multipart");
    expect(refusal(TYPE, form([field("model", "whisper-1")], B, ""))).toBe("invalid_multipart");
    const long = "b".repeat(71);
    expect(refusal(`multipart/form-data; boundary=${long}`, form([field("model", "x")], long))).toBe(
      "invalid_header",
    );
    expect(refusal(`multipart/form-data; xboundary=${B}`, form([field("model", "x")]))).toBe(
      "invalid_header",
    );
    expect(refusal("multipart/form-data", form([field("model", "x")]))).toBe("invalid_header");
    expect(refusal(`text/plain; boundary=${B}`, form([field("model", "x")]))).toBe("invalid_header");
  });

  it("keeps a field named like an object's own properties in the map only", () => {
    const fields = formFields(B, form([field("__proto__", "polluted")]));
    expect(fields.get("__proto__")).toBe("polluted");
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});

describe("a form field set for the vendor (withFormField)", () => {
  /** The file's bytes and every field as the standard parser reads the form. */
  async function read(body: Uint8Array): Promise<{ fields: [string, unknown][]; file: Buffer }> {
    const data = await new Response(body, { headers: { "content-type": TYPE } }).formData();
    const fields: [string, unknown][] = [];
    let file = Buffer.alloc(0);
    for (const [name, value] of data) {
      if (typeof value === "string") fields.push([name, value]);
      else file = Buffer.from(await value.arrayBuffer());
    }
    return { fields, file };
  }
  const audio = Buffer.from([0, 13, 10, 45, 45, 255, 1, 2]).toString("latin1");

  it("replaces the field's value and keeps every other part, the file's bytes whole", async () => {
    const body = form([
      field("model", "whisper-1"),
      file("file", audio),
      field("response_format", "srt"),
      field("prompt", "é"),
    ]);
    const out = withFormField(B, body, "response_format", "verbose_json");
    const { fields, file: bytes } = await read(out);
    expect(fields).toEqual([
      ["model", "whisper-1"],
      ["prompt", "é"],
      ["response_format", "verbose_json"],
    ]);
    // The helper writes the form as UTF-8: the file is those bytes, unchanged.
    expect(bytes.equals(Buffer.from(audio, "utf8"))).toBe(true);
    expect(formFields(B, out).get("response_format")).toBe("verbose_json");
  });

  it("adds the field when the form has none", async () => {
    const out = withFormField(
      B,
      form([field("model", "whisper-1"), file("file", audio)]),
      "response_format",
      "json",
    );
    expect((await read(out)).fields).toEqual([
      ["model", "whisper-1"],
      ["response_format", "json"],
    ]);
  });
});
