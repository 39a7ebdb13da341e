const QUOTE = 34;
const BACKSLASH = 92;
const OPEN_BRACE = 123;
const OPEN_BRACKET = 91;
const CLOSE_BRACE = 125;
const CLOSE_BRACKET = 93;

/** A run of a streamed JSON array's text: one whole element, or text between elements (brackets, commas). */
export interface JsonArrayPiece {
  text: string;
  element: boolean;
}

/**
 * Splits a streamed JSON array (`[{...},\r\n{...}]`, Gemini's stream without `alt=sse`) into the text
 * of its elements as each one completes. Strings are tracked so braces inside them do not count.
 */
export class JsonArrayReader {
  private readonly decoder = new TextDecoder();
  private pending = "";
  private scanned = 0;
  private depth = 0;
  private inString = false;
  private escaped = false;
  private start = -1;

  elements(chunk: Uint8Array): string[] {
    return this.pieces(chunk)
      .filter((piece) => piece.element)
      .map((piece) => piece.text);
  }

  /**
   * All of the text this chunk completes, in order: each element once whole, and the text between
   * elements as it comes. Only an element in progress waits.
   */
  pieces(chunk: Uint8Array): JsonArrayPiece[] {
    const text = this.pending + this.decoder.decode(chunk, { stream: true });
    const out: JsonArrayPiece[] = [];
    let handed = 0;
    for (let i = this.scanned; i < text.length; i++) {
      const ch = text.charCodeAt(i);
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (ch === BACKSLASH) this.escaped = true;
        else if (ch === QUOTE) this.inString = false;
      } else if (ch === QUOTE) {
        this.inString = true;
      } else if (ch === OPEN_BRACE || ch === OPEN_BRACKET) {
        if (this.depth === 1) this.start = i;
        this.depth++;
      } else if (ch === CLOSE_BRACE || ch === CLOSE_BRACKET) {
        this.depth--;
        if (this.depth === 1 && this.start !== -1) {
          if (this.start > handed) out.push({ text: text.slice(handed, this.start), element: false });
          out.push({ text: text.slice(this.start, i + 1), element: true });
          handed = i + 1;
          this.start = -1;
        }
      }
    }
    // Keep only the element in progress.
    const kept = this.start === -1 ? text.length : this.start;
    if (kept > handed) out.push({ text: text.slice(handed, kept), element: false });
    this.pending = text.slice(kept);
    this.scanned = this.pending.length;
    if (this.start !== -1) this.start = 0;
    return out;
  }

  /** What is left when the stream ends: an element cut short, or "". */
  rest(): string {
    const rest = this.pending + this.decoder.decode();
    this.pending = "";
    return rest;
  }
}
