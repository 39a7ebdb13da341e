/** OpenAI's media endpoints: audio transcriptions and translations, speech, and images. */
import { parseMultipart } from "./multipart";
import type { Flavour } from "./openai-generation";
import { jsonReply, readJson, requireString, SimulatedError, textReply, unixSeconds } from "./reply";
import { estimateTokens } from "./text";
import type { Route } from "./vendor";

/** 128 kbit/s audio: the duration a simulated transcription bills for an upload. */
const AUDIO_BYTES_PER_SECOND = 16_000;
/** gpt-4o-transcribe style audio tokens per second of audio. */
const AUDIO_TOKENS_PER_SECOND = 10;
const SPEECH_BYTES_PER_CHARACTER = 256;
const SPEECH_CHUNK_BYTES = 16 * 1024;
/** Tokens billed for each input image of an image edit. */
const IMAGE_INPUT_TOKENS = 258;
/** A valid 1x1 PNG: every simulated image. */
const PNG_1X1 =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=";

const TRANSCRIPT_WORDS = ["simulated", "transcript", "of", "the", "uploaded", "audio"];

/**
 * Transcriptions and translations, as OpenAI answers them or as Groq does: Groq reports the duration in
 * `verbose_json` only (no `usage`), adds `x_groq`, and has no subtitle formats.
 */
export function audio(task: "transcribe" | "translate", flavour: Flavour = "openai"): Route {
  return (req) => {
    const form = parseMultipart(req.headers["content-type"], req.body);
    const file = form.files.find((f) => f.field === "file");
    if (!file) throw new SimulatedError(400, "file: Field required", "missing_field");
    const model = form.fields.get("model");
    if (!model) throw new SimulatedError(400, "model: Field required", "missing_field");
    const format = form.fields.get("response_format") ?? "json";
    const seconds = Math.max(1, Math.ceil(file.size / AUDIO_BYTES_PER_SECOND));
    const wordCount = Math.min(200, seconds * 2);
    const words = Array.from({ length: wordCount }, (_, i) => TRANSCRIPT_WORDS[i % TRANSCRIPT_WORDS.length]);
    const text = words.join(" ");
    const promptTokens = estimateTokens(form.fields.get("prompt") ?? "");
    const audioTokens = seconds * AUDIO_TOKENS_PER_SECOND;
    // whisper bills by duration, the gpt-4o transcribers by tokens; translations report no usage.
    const groq = flavour === "groq";
    const usage =
      task === "translate" || groq
        ? undefined
        : model.startsWith("whisper")
          ? { type: "duration", seconds }
          : {
              type: "tokens",
              input_tokens: promptTokens + audioTokens,
              input_token_details: { text_tokens: promptTokens, audio_tokens: audioTokens },
              output_tokens: wordCount,
              total_tokens: promptTokens + audioTokens + wordCount,
            };
    const timestamp = (s: number, separator: string) =>
      `00:${String(Math.floor(s / 60)).padStart(2, "0")}:${String(s % 60).padStart(2, "0")}${separator}000`;
    const extras = groq ? { x_groq: { id: req.requestId } } : {};
    if (groq && !["json", "text", "verbose_json"].includes(format)) {
      throw new SimulatedError(
        400,
        "response_format must be one of [json text verbose_json]",
        "invalid_value",
      );
    }
    switch (format) {
      case "json":
        return jsonReply(usage ? { text, usage } : { text, ...extras });
      case "text":
        return textReply(`${text}\n`);
      case "verbose_json":
        return jsonReply({
          task,
          language: "english",
          duration: seconds,
          text,
          segments: [
            {
              id: 0,
              seek: 0,
              start: 0,
              end: seconds,
              text,
              tokens: [],
              temperature: 0,
              avg_logprob: -0.1,
              compression_ratio: 1,
              no_speech_prob: 0,
            },
          ],
          ...(task === "transcribe" && !groq ? { usage: { type: "duration", seconds } } : {}),
          ...extras,
        });
      case "srt":
        return textReply(`1\n${timestamp(0, ",")} --> ${timestamp(seconds, ",")}\n${text}\n\n`);
      case "vtt":
        return textReply(
          `WEBVTT\n\n${timestamp(0, ".")} --> ${timestamp(seconds, ".")}\n${text}\n\n`,
          "text/vtt",
        );
      default:
        throw new SimulatedError(400, `response_format '${format}' is not supported.`, "invalid_value");
    }
  };
}

const SPEECH_CONTENT_TYPES: Record<string, string> = {
  mp3: "audio/mpeg",
  opus: "audio/opus",
  aac: "audio/aac",
  flac: "audio/flac",
  wav: "audio/wav",
  pcm: "audio/pcm",
};

export const speech: Route = (req) => {
  const body = readJson(req);
  requireString(body, "model");
  requireString(body, "voice");
  const input = requireString(body, "input");
  const format = typeof body.response_format === "string" ? body.response_format : "mp3";
  const contentType = SPEECH_CONTENT_TYPES[format];
  if (!contentType)
    throw new SimulatedError(400, `response_format '${format}' is not supported.`, "invalid_value");
  // Audio length follows the text; the bytes are a deterministic pattern, streamed like the vendor does.
  const audioBytes = Buffer.alloc(input.length * SPEECH_BYTES_PER_CHARACTER);
  for (let i = 0; i < audioBytes.length; i++)
    audioBytes[i] = (i * 31 + input.charCodeAt(i % input.length)) & 0xff;
  const chunks: Buffer[] = [];
  for (let at = 0; at < audioBytes.length; at += SPEECH_CHUNK_BYTES) {
    chunks.push(audioBytes.subarray(at, at + SPEECH_CHUNK_BYTES));
  }
  return { status: 200, headers: { "content-type": contentType }, chunks };
};

/** gpt-image-1 output tokens per image, by quality, for square and for tall/wide sizes. */
const IMAGE_OUTPUT_TOKENS: Record<string, [number, number]> = {
  low: [272, 408],
  medium: [1056, 1584],
  high: [4160, 6240],
};

export function images(kind: "generations" | "edits" | "variations"): Route {
  return (req) => {
    let fields: Map<string, string>;
    let inputImages = 0;
    if (kind === "generations") {
      const body = readJson(req);
      fields = new Map(
        Object.entries(body).map(([key, value]) => [
          key,
          typeof value === "string" ? value : JSON.stringify(value),
        ]),
      );
    } else {
      const form = parseMultipart(req.headers["content-type"], req.body);
      fields = form.fields;
      inputImages = form.files.filter((f) => f.field === "image" || f.field === "image[]").length;
      if (inputImages === 0) throw new SimulatedError(400, "image: Field required", "missing_field");
    }
    const prompt = fields.get("prompt") ?? "";
    if (kind !== "variations" && prompt === "") {
      throw new SimulatedError(400, "prompt: Field required", "missing_field");
    }
    const model = fields.get("model") ?? "dall-e-2";
    const n = Number.parseInt(fields.get("n") ?? "1", 10);
    if (!Number.isInteger(n) || n < 1 || n > 10) throw new SimulatedError(400, "n must be between 1 and 10.");
    const gptImage = model.startsWith("gpt-image");
    const requestedSize = fields.get("size") ?? "1024x1024";
    const size = requestedSize === "auto" ? "1024x1024" : requestedSize;
    const b64 = gptImage || fields.get("response_format") === "b64_json";
    const data = Array.from({ length: n }, () =>
      b64
        ? { b64_json: PNG_1X1 }
        : {
            // A data URL, so that a client can fetch the image offline.
            url: `data:image/png;base64,${PNG_1X1}`,
            ...(model === "dall-e-3" ? { revised_prompt: prompt } : {}),
          },
    );
    if (!gptImage) return jsonReply({ created: unixSeconds(), data });
    const requestedQuality = fields.get("quality") ?? "auto";
    const quality = requestedQuality in IMAGE_OUTPUT_TOKENS ? requestedQuality : "medium";
    const perImage = (IMAGE_OUTPUT_TOKENS[quality] as [number, number])[size === "1024x1024" ? 0 : 1];
    const textTokens = estimateTokens(prompt);
    const imageTokens = inputImages * IMAGE_INPUT_TOKENS;
    const outputTokens = perImage * n;
    return jsonReply({
      created: unixSeconds(),
      background: "opaque",
      data,
      output_format: "png",
      quality,
      size,
      usage: {
        input_tokens: textTokens + imageTokens,
        input_tokens_details: { text_tokens: textTokens, image_tokens: imageTokens },
        output_tokens: outputTokens,
        total_tokens: textTokens + imageTokens + outputTokens,
      },
    });
  };
}
