import { describe, expect, it } from "vitest";
import type { UsageFormat } from "../../../lambda/core/vendor-model";
import {
  groqAudioFormat,
  openAiTranscriptFormat,
  openAiTranslationFormat,
} from "../../../lambda/vendors/transcripts";

type Format = (form: Map<string, string>) => UsageFormat | undefined;
const asked = (format: Format, fields: Record<string, string>) => format(new Map(Object.entries(fields)));
const fetched = (format: Format, fields: Record<string, string>) => asked(format, fields)?.upstreamValue;

describe("transcripts asked in a format that reports no usage", () => {
  it("OpenAI transcriptions: text fetched as json, subtitles as verbose_json; json, verbose_json and streams as sent", () => {
    expect(fetched(openAiTranscriptFormat, { response_format: "text" })).toBe("json");
    expect(fetched(openAiTranscriptFormat, { response_format: "srt" })).toBe("verbose_json");
    expect(fetched(openAiTranscriptFormat, { response_format: "vtt" })).toBe("verbose_json");
    for (const format of ["json", "verbose_json", "diarized_json", "SRT", ""]) {
      expect(asked(openAiTranscriptFormat, { response_format: format }), format).toBeUndefined();
    }
    expect(asked(openAiTranscriptFormat, {})).toBeUndefined();
    expect(asked(openAiTranscriptFormat, { response_format: "text", stream: "true" })).toBeUndefined();
  });

  it("OpenAI translations and Groq: every format but verbose_json fetched as verbose_json, json the default", () => {
    for (const format of ["json", "text", "srt", "vtt"]) {
      expect(fetched(openAiTranslationFormat, { response_format: format }), format).toBe("verbose_json");
    }
    expect(fetched(openAiTranslationFormat, {})).toBe("verbose_json");
    expect(asked(openAiTranslationFormat, { response_format: "verbose_json" })).toBeUndefined();
    expect(fetched(groqAudioFormat, {})).toBe("verbose_json");
    expect(fetched(groqAudioFormat, { response_format: "text" })).toBe("verbose_json");
    // Groq has no subtitles: its own refusal reaches the client.
    expect(asked(groqAudioFormat, { response_format: "srt" })).toBeUndefined();
  });

  it("renders json (with Groq's x_groq), the text with its newline, and cues with whisper's times past an hour", () => {
    const answer = {
      task: "transcribe",
      duration: 3663,
      text: "One. Two.",
      segments: [
        { start: 0, end: 2.5, text: " One." },
        { start: 3661.0125, end: 3662.9996, text: " Two. " },
      ],
      x_groq: { id: "req_1" },
    };
    expect(asked(groqAudioFormat, {})?.render(answer)).toEqual({
      contentType: "application/json",
      body: '{"text":"One. Two.","x_groq":{"id":"req_1"}}',
    });
    expect(asked(openAiTranslationFormat, {})?.render({ ...answer, x_groq: undefined })?.body).toBe(
      '{"text":"One. Two."}',
    );
    expect(asked(openAiTranscriptFormat, { response_format: "text" })?.render(answer)).toEqual({
      contentType: "text/plain; charset=utf-8",
      body: "One. Two.\n",
    });
    expect(asked(openAiTranscriptFormat, { response_format: "srt" })?.render(answer)?.body).toBe(
      "1\n00:00:00,000 --> 00:00:02,500\nOne.\n\n2\n01:01:01,013 --> 01:01:03,000\nTwo.\n\n",
    );
    expect(asked(openAiTranscriptFormat, { response_format: "vtt" })?.render(answer)?.body).toBe(
      "WEBVTT\n\n00:00:00.000 --> 00:00:02.500\nOne.\n\n01:01:01.013 --> 01:01:03.000\nTwo.\n\n",
    );
  });

  it("cannot render an answer without its text or its segments' times: the vendor's answer goes as it is", () => {
    expect(
      asked(openAiTranscriptFormat, { response_format: "text" })?.render({ duration: 3 }),
    ).toBeUndefined();
    expect(asked(groqAudioFormat, {})?.render({ text: 3 })).toBeUndefined();
    for (const segments of [
      [{ start: 0, text: "x" }],
      [{ start: "0", end: 1, text: "x" }],
      [{ start: 0, end: 1 }],
    ]) {
      expect(
        asked(openAiTranscriptFormat, { response_format: "srt" })?.render({ segments }),
        JSON.stringify(segments),
      ).toBeUndefined();
    }
  });
});
