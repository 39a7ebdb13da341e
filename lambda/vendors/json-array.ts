const QUOTE = 34;
const BACKSLASH = 92;
const OPEN_BRACE = 123;
const OPEN_BRACKET = 91;
const CLOSE_BRACE = 125;
const CLOSE_BRACKET = 93;

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
    const text = this.pending + this.decoder.decode(chunk, { stream: true });
    const out: string[] = [];
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
          out.push(text.slice(this.start, i + 1));
          this.start = -1;
        }
      }
    }
    // Keep only the element in progress.
    if (this.start === -1) {
      this.pending = "";
      this.scanned = 0;
    } else {
      this.pending = text.slice(this.start);
      this.scanned = this.pending.length;
      this.start = 0;
    }
    return out;
  }
}
