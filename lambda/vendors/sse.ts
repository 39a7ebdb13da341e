/**
 * Incremental server-sent events: chunks may end anywhere (inside a line, inside a UTF-8 character),
 * so complete events are handed out as soon as their blank line arrives and the rest waits.
 */
export interface SseEvent {
  event: string | undefined;
  data: string;
}

const BLANK_LINE = /\r\n\r\n|\n\n|\r\r/g;

export class SseReader {
  private readonly decoder = new TextDecoder();
  private pending = "";

  /** The raw text of each event this chunk completes, each with its terminating blank line. */
  blocks(chunk: Uint8Array): string[] {
    const text = this.pending + this.decoder.decode(chunk, { stream: true });
    const blocks: string[] = [];
    let start = 0;
    // Resume just before the old tail: a terminator may straddle two chunks.
    BLANK_LINE.lastIndex = Math.max(0, this.pending.length - 3);
    for (let found = BLANK_LINE.exec(text); found; found = BLANK_LINE.exec(text)) {
      const end = found.index + found[0].length;
      blocks.push(text.slice(start, end));
      start = end;
    }
    this.pending = text.slice(start);
    return blocks;
  }

  /** What is left when the stream ends: an event cut short, or "". */
  rest(): string {
    const rest = this.pending + this.decoder.decode();
    this.pending = "";
    return rest;
  }
}

/** The event of one block: its `event:` name and its `data:` lines joined; undefined without data. */
export function parseSseEvent(block: string): SseEvent | undefined {
  let event: string | undefined;
  let data: string | undefined;
  for (const line of block.split(/\r\n|\r|\n/)) {
    if (line.startsWith("data:")) {
      const value = line.charCodeAt(5) === 32 ? line.slice(6) : line.slice(5);
      data = data === undefined ? value : `${data}\n${value}`;
    } else if (line.startsWith("event:")) {
      event = line.charCodeAt(6) === 32 ? line.slice(7) : line.slice(6);
    }
  }
  return data === undefined ? undefined : { event, data };
}

const LINE_BREAK = /(\r\n|\r|\n)/;

/**
 * The block with `data` in place of its data: its first `data:` line holds it, its other data lines go;
 * its other lines (`event:`, `id:`, comments) and line breaks stay as they were. `data` is one line.
 */
export function withEventData(block: string, data: string): string {
  const parts = block.split(LINE_BREAK);
  let out = "";
  let written = false;
  // parts alternates a line and the break after it; the last line has none.
  for (let i = 0; i < parts.length; i += 2) {
    const line = parts[i] ?? "";
    const lineBreak = parts[i + 1] ?? "";
    if (!line.startsWith("data:")) out += line + lineBreak;
    else if (!written) {
      out += `data: ${data}${lineBreak}`;
      written = true;
    }
  }
  return out;
}
