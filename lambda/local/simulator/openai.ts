/**
 * OpenAI's wire formats, and Groq's (the same API under `/openai`, with `x_groq` extras and its own
 * usage fields and error texts): the routes of each flavour, its authentication, errors and models.
 * The endpoints live by family: openai-generation.ts, openai-media.ts, openai-analysis.ts.
 */
import { embeddings, moderations } from "./openai-analysis";
import { chatCompletions, completions, type Flavour, responses } from "./openai-generation";
import { audio, images, speech } from "./openai-media";
import { jsonReply, SimulatedError } from "./reply";
import { openAiUsageReport } from "./usage-report";
import type { Route, VendorSim } from "./vendor";

const OPENAI_MODELS = [
  "gpt-4o",
  "gpt-4o-mini",
  "gpt-4.1",
  "gpt-5",
  "o4-mini",
  "text-embedding-3-small",
  "text-embedding-3-large",
  "whisper-1",
  "gpt-4o-transcribe",
  "tts-1",
  "gpt-4o-mini-tts",
  "dall-e-3",
  "gpt-image-1",
  "omni-moderation-latest",
];
const GROQ_MODELS = [
  "llama-3.1-8b-instant",
  "llama-3.3-70b-versatile",
  "openai/gpt-oss-20b",
  "openai/gpt-oss-120b",
  "qwen/qwen3-32b",
];
const MODELS_CREATED = 1_700_000_000;

/** One model as the vendor describes it, in its list and its lookup. */
function modelObject(flavour: Flavour, id: string): Record<string, unknown> {
  return flavour === "groq"
    ? {
        id,
        object: "model",
        created: MODELS_CREATED,
        owned_by: id.split("/")[0] === id ? "Meta" : id.split("/")[0],
        active: true,
        context_window: 131_072,
        public_apps: null,
        max_completion_tokens: 32_768,
      }
    : { id, object: "model", created: MODELS_CREATED, owned_by: "system" };
}

const modelIds = (flavour: Flavour): readonly string[] => (flavour === "groq" ? GROQ_MODELS : OPENAI_MODELS);

function models(flavour: Flavour): Route {
  return () => jsonReply({ object: "list", data: modelIds(flavour).map((id) => modelObject(flavour, id)) });
}

const MODEL_LOOKUP = /^\/v1\/models\/(.+)$/;

/** `GET /v1/models/{model}`: the model, or the vendor's 404 for one it does not serve. */
function model(flavour: Flavour, id: string): Route {
  return () => {
    if (!modelIds(flavour).includes(id)) {
      throw new SimulatedError(
        404,
        `The model \`${id}\` does not exist or you do not have access to it.`,
        "model_not_found",
      );
    }
    return jsonReply(modelObject(flavour, id));
  };
}

function routesOf(flavour: Flavour): Map<string, Route> {
  const shared: [string, Route][] = [
    ["POST /v1/chat/completions", chatCompletions(flavour)],
    ["POST /v1/responses", responses],
    ["GET /v1/models", models(flavour)],
  ];
  if (flavour === "groq") {
    return new Map([
      ...shared,
      ["POST /v1/audio/transcriptions", audio("transcribe", "groq")],
      ["POST /v1/audio/translations", audio("translate", "groq")],
    ]);
  }
  return new Map([
    ...shared,
    ["POST /v1/completions", completions],
    ["POST /v1/embeddings", embeddings],
    ["POST /v1/audio/transcriptions", audio("transcribe")],
    ["POST /v1/audio/translations", audio("translate")],
    ["POST /v1/audio/speech", speech],
    ["POST /v1/images/generations", images("generations")],
    ["POST /v1/images/edits", images("edits")],
    ["POST /v1/images/variations", images("variations")],
    ["POST /v1/moderations", moderations],
    ["GET /v1/organization/usage/completions", openAiUsageReport],
  ]);
}

function errorType(flavour: Flavour, status: number): string {
  if (status === 429) return flavour === "groq" ? "tokens" : "requests";
  if (status >= 500) return flavour === "groq" ? "internal_server_error" : "server_error";
  return "invalid_request_error";
}

function defaultCode(status: number): string | null {
  if (status === 401) return "invalid_api_key";
  if (status === 429) return "rate_limit_exceeded";
  return null;
}

export function openAiFamily(flavour: Flavour): VendorSim {
  const routes = routesOf(flavour);
  return {
    authenticate(req) {
      if (/^Bearer\s+\S/i.test(req.headers.authorization ?? "")) return undefined;
      return flavour === "groq"
        ? new SimulatedError(401, "Invalid API Key", "invalid_api_key")
        : new SimulatedError(
            401,
            "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
          );
    },
    route: (req) => {
      const lookup = req.method === "GET" ? MODEL_LOOKUP.exec(req.path) : null;
      return lookup
        ? model(flavour, decodeURIComponent(lookup[1] as string))
        : routes.get(`${req.method} ${req.path}`);
    },
    notFound: (req) =>
      flavour === "groq"
        ? new SimulatedError(
            404,
            `Unknown request URL: ${req.method} /openai${req.path}. Please check the URL for typos, or see the docs at https://console.groq.com/docs/`,
            "unknown_url",
          )
        : new SimulatedError(404, `Invalid URL (${req.method} ${req.path})`),
    errorReply(error) {
      const code = error.code ?? defaultCode(error.status);
      const body =
        flavour === "groq"
          ? {
              error: {
                message: error.message,
                type: errorType(flavour, error.status),
                ...(code ? { code } : {}),
              },
            }
          : { error: { message: error.message, type: errorType(flavour, error.status), param: null, code } };
      return jsonReply(body, error.status);
    },
    headers: (req) => ({ "x-request-id": req.requestId }),
  };
}
