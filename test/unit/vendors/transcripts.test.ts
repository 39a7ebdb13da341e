import { describe, expect, it } from "vitest";
import { transcriptUsageFormat } from "../../../lambda/vendors/transcripts";

const asked = (fields: Record<string, string>) => transcriptUsageFormat(new Map(Object.entries(fields)));

describe("transcripts asked in a format that reports no usage", () => {
  it("fetches text as json and subtitles as verbose_json; leaves the formats that report usage, and streams", () => {
    expect(asked({ response_format: "text" })?.upstreamValue).toBe("json");
    expect(asked({ response_format: "srt" })?.upstreamValue).toBe("verbose_json");
    expect(asked({ response_format: "vtt" })?.upstreamValue).toBe("verbose_json");
    for (const format of ["json", "verbose_json", "diarized_json", "SRT", ""]) {
      expect(asked({ response_format: format }), format).toBeUndefined();
    }
    expect(asked({})).toBeUndefined();
    expect(asked({ response_format: "text", stream: "true" })).toBeUndefined();
  });

  it("renders the text with its newline, and cues with whisper's times, past an hour too", () => {
    expect(asked({ response_format: "text" })?.render({ text: "Hello there." })).toEqual({
      contentType: "text/plain; charset=utf-8",
      body: "Hello there.\n",
    });
    const answer = {
      text: "One. Two.",
      segments: [
        { start: 0, end: 2.5, text: " One." },
        { start: 3661.0125, end: 3662.9996, text: " Two. " },
      ],
    };
    expect(asked({ response_format: "srt" })?.render(answer)?.body).toBe(
      "1\n00:00:00,000 --> 00:00:02,500\nOne.\n\n2\n01:01:01,013 --> 01:01:03,000\nTwo.\n\n",
    );
    expect(asked({ response_format: "vtt" })?.render(answer)?.body).toBe(
      "WEBVTT\n\n00:00:00.000 --> 00:00:02.500\nOne.\n\n01:01:01.013 --> 01:01:03.000\nTwo.\n\n",
    );
  });

  it("cannot render an answer without its text or its segments' times: the vendor's answer goes as it is", () => {
    expect(asked({ response_format: "text" })?.render({ duration: 3 })).toBeUndefined();
    for (const segments of [
      [{ start: 0, text: "x" }],
      [{ start: "0", end: 1, text: "x" }],
      [{ start: 0, end: 1 }],
    ]) {
      expect(
        asked({ response_format: "srt" })?.render({ segments }),
        JSON.stringify(segments),
      ).toBeUndefined();
    }
  });
});
