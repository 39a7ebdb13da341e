// Transcripts asked in a format that says nothing of the usage the vendor bills.
import type { UsageFormat } from "../core/vendor-model";
import { asArray, asObject, asString } from "./json";

const TEXT = "text/plain; charset=utf-8";

type Rendered = { contentType: string; body: string } | undefined;
type Answer = Record<string, unknown>;

/** Each format the client may ask, rendered from the `json` or `verbose_json` answer fetched instead. */
const RENDER: Record<string, (answer: Answer) => Rendered> = {
  json: (answer) => {
    const text = asString(answer.text);
    if (text === undefined) return undefined;
    // Groq's json answer carries its request id too.
    const body = answer.x_groq === undefined ? { text } : { text, x_groq: answer.x_groq };
    return { contentType: "application/json", body: JSON.stringify(body) };
  },
  text: (answer) => {
    const text = asString(answer.text);
    return text === undefined ? undefined : { contentType: TEXT, body: `${text}\n` };
  },
  srt: (answer) => subtitles("srt", answer),
  vtt: (answer) => subtitles("vtt", answer),
};

/**
 * A route's `usageFormat` from the formats that report no usage and the one each is fetched as: the
 * client's format is rendered from that answer. `json` is the format a form that names none gets. A
 * streamed transcription reports its usage itself and is left alone.
 */
function fetchedAs(formats: Partial<Record<string, "json" | "verbose_json">>) {
  return (form: Map<string, string>): UsageFormat | undefined => {
    if (form.get("stream") === "true") return undefined;
    const asked = form.get("response_format") ?? "json";
    const upstreamValue = formats[asked];
    const render = RENDER[asked];
    return upstreamValue && render && { field: "response_format", upstreamValue, render };
  };
}

/**
 * OpenAI's transcriptions report the seconds or tokens billed in `json` and `verbose_json`, not in
 * `text`, `srt` or `vtt`: text is fetched as `json`, subtitles as `verbose_json` (its segments' times).
 * Every model that serves a format serves the one it is fetched as.
 */
export const openAiTranscriptFormat = fetchedAs({ text: "json", srt: "verbose_json", vtt: "verbose_json" });

/** OpenAI's translations report the seconds in `verbose_json` only (its `duration`). */
export const openAiTranslationFormat = fetchedAs({
  json: "verbose_json",
  text: "verbose_json",
  srt: "verbose_json",
  vtt: "verbose_json",
});

/** Groq's transcriptions and translations report the seconds in `verbose_json` only; it has no subtitles. */
export const groqAudioFormat = fetchedAs({ json: "verbose_json", text: "verbose_json" });

/** SubRip or WebVTT cues from `verbose_json` segments, each ending in a blank line, as whisper writes them. */
function subtitles(format: "srt" | "vtt", answer: Answer): Rendered {
  const cues: string[] = [];
  for (const [i, item] of asArray(answer.segments).entries()) {
    const segment = asObject(item);
    const { start, end } = segment ?? {};
    const text = asString(segment?.text);
    // A segment without its times or text: the vendor's answer goes as it is.
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
