// Transcripts asked as plain text or subtitles: answers that say nothing of the usage the vendor bills.
import type { UsageFormat } from "../core/vendor-model";
import { asArray, asObject, asString } from "./json";

const TEXT = "text/plain; charset=utf-8";

/**
 * OpenAI-style transcription and translation answer `text`, `srt` and `vtt` without the seconds or
 * tokens billed (`json` and `verbose_json` report them). Asked as text, the transcript is fetched as
 * `json`; as subtitles, as `verbose_json` (its segments' times): every model that serves a format serves
 * the one it is fetched as. A streamed transcription reports its usage itself and is left alone.
 */
export function transcriptUsageFormat(form: Map<string, string>): UsageFormat | undefined {
  if (form.get("stream") === "true") return undefined;
  const asked = form.get("response_format");
  if (asked === "text") {
    return {
      field: "response_format",
      upstreamValue: "json",
      render: (answer) => {
        const text = asString(answer.text);
        return text === undefined ? undefined : { contentType: TEXT, body: `${text}\n` };
      },
    };
  }
  if (asked === "srt" || asked === "vtt") {
    return {
      field: "response_format",
      upstreamValue: "verbose_json",
      render: (answer) => subtitles(asked, answer),
    };
  }
  return undefined;
}

/** SubRip or WebVTT cues from `verbose_json` segments, each ending in a blank line, as whisper writes them; undefined when a segment lacks its times or text. */
function subtitles(
  format: "srt" | "vtt",
  answer: Record<string, unknown>,
): { contentType: string; body: string } | undefined {
  const cues: string[] = [];
  for (const [i, item] of asArray(answer.segments).entries()) {
    const segment = asObject(item);
    const { start, end } = segment ?? {};
    const text = asString(segment?.text);
    if (typeof start !== "number" || typeof end !== "number" || text === undefined) return undefined;
    const times = `${timestamp(start, format)} --> ${timestamp(end, format)}`;
    cues.push(format === "srt" ? `${i + 1}\n${times}\n${text.trim()}\n\n` : `${times}\n${text.trim()}\n\n`);
  }
  const body = cues.join("");
  return { contentType: TEXT, body: format === "vtt" ? `WEBVTT\n\n${body}` : body };
}

/** `00:01:02,345` (SubRip) or `00:01:02.345` (WebVTT). */
function timestamp(seconds: number, format: "srt" | "vtt"): string {
  const ms = Math.max(0, Math.round(seconds * 1000));
  const pad = (n: number, width = 2) => String(n).padStart(width, "0");
  const clock = `${pad(Math.floor(ms / 3_600_000))}:${pad(Math.floor(ms / 60_000) % 60)}:${pad(Math.floor(ms / 1000) % 60)}`;
  return `${clock}${format === "srt" ? "," : "."}${pad(ms % 1000, 3)}`;
}
