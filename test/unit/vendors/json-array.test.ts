import { readFileSync } from "node:fs";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { JsonArrayReader } from "../../../lambda/vendors/json-array";

const fixture = (name: string) => readFileSync(new URL(`../../fixtures/${name}`, import.meta.url));

/** The bytes cut at the given offsets (sorted, deduplicated, inside the buffer). */
function cut(bytes: Buffer, offsets: number[]): Buffer[] {
  const points = [...new Set(offsets.map((o) => o % (bytes.length + 1)))].sort((a, b) => a - b);
  const parts: Buffer[] = [];
  let at = 0;
  for (const point of points) {
    parts.push(bytes.subarray(at, point));
    at = point;
  }
  parts.push(bytes.subarray(at));
  return parts;
}

describe("JsonArrayReader", () => {
  const elementsOf = (parts: Buffer[]) => {
    const reader = new JsonArrayReader();
    return parts.flatMap((part) => reader.elements(part)).map((text) => JSON.parse(text));
  };

  it("yields each element of a streamed array, braces and quotes inside strings included", () => {
    const bytes = fixture("gemini-stream.json");
    const expected = JSON.parse(bytes.toString());
    expect(elementsOf([bytes])).toEqual(expected);
    fc.assert(
      fc.property(fc.array(fc.nat(), { maxLength: 60 }), (offsets) => {
        expect(elementsOf(cut(bytes, offsets))).toEqual(expected);
      }),
      { numRuns: 300 },
    );
  });

  it("yields an element as soon as it closes", () => {
    const reader = new JsonArrayReader();
    expect(reader.elements(Buffer.from('[{"a":"}"'))).toEqual([]);
    expect(reader.elements(Buffer.from('}\n,\r\n{"b":[1,{"c":2}]'))).toEqual(['{"a":"}"}']);
    expect(reader.elements(Buffer.from("}]"))).toEqual(['{"b":[1,{"c":2}]}']);
  });
});
