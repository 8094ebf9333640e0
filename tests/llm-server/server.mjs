// A minimal OpenAI-compatible chat server around node-llama-cpp, for replicad's real-model tests.
//
//   node server.mjs --node-modules DIR --model FILE.gguf [--port 0] [--host 127.0.0.1]
//
// DIR is the node_modules holding node-llama-cpp (see .ci/install-llm).
//
// Serves GET /v1/models and POST /v1/chat/completions (with and without `stream: true`, SSE
// `chat.completion.chunk` frames ending with `data: [DONE]`, and `usage`). Requests are
// evaluated one at a time on one context sequence, on one thread: llama.cpp's threads wait for
// each other at every step, so on a busy machine (the test suite runs beside it) two threads are
// several times slower than one. Prints one line
// `listening on http://HOST:PORT` on stdout once the model is loaded.
import http from "node:http";
import path from "node:path";
import { pathToFileURL } from "node:url";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith("--") ? [...acc, [a.slice(2), all[i + 1]]] : acc), []),
);
const modelPath = args.model;
if (!modelPath || !args["node-modules"]) {
  console.error("usage: node server.mjs --node-modules DIR --model FILE.gguf [--port N]");
  process.exit(2);
}
const entry = pathToFileURL(path.join(args["node-modules"], "node-llama-cpp", "dist", "index.js"));
const { getLlama, LlamaChatSession } = await import(entry.href);
const modelId = "smollm2-135m-instruct";

const llama = await getLlama({ gpu: false, build: "never", logLevel: "error" });
const model = await llama.loadModel({ modelPath });
const context = await model.createContext({ contextSize: 2048, threads: 1, sequences: 1 });
const sequence = context.getSequence();

let queue = Promise.resolve();
const serially = (job) => {
  const run = queue.then(job, job);
  queue = run.catch(() => {});
  return run;
};

function textOf(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.filter((p) => p.type === "text").map((p) => p.text).join("\n");
  return "";
}

function toHistory(messages) {
  const history = [];
  for (const m of messages.slice(0, -1)) {
    const text = textOf(m.content);
    if (m.role === "system") history.push({ type: "system", text });
    else if (m.role === "assistant") history.push({ type: "model", response: [text] });
    else history.push({ type: "user", text });
  }
  return history;
}

async function complete(body, onText, isClosed) {
  const messages = body.messages ?? [];
  const last = messages[messages.length - 1];
  if (!last || last.role !== "user") throw Object.assign(new Error("the last message must be from the user"), { status: 400 });
  await sequence.clearHistory();
  const session = new LlamaChatSession({ contextSequence: sequence, autoDisposeSequence: false });
  session.setChatHistory([...toHistory(messages), { type: "user", text: "" }].slice(0, -1));
  const abort = new AbortController();
  const text = await session.prompt(textOf(last.content), {
    maxTokens: Math.min(body.max_tokens ?? 64, 256),
    temperature: body.temperature ?? 0,
    signal: abort.signal,
    stopOnAbortSignal: true,
    onTextChunk: (chunk) => {
      if (isClosed()) abort.abort();
      else onText(chunk);
    },
  });
  const promptTokens = model.tokenize(messages.map((m) => textOf(m.content)).join("\n")).length;
  const completionTokens = model.tokenize(text).length;
  session.dispose({ disposeSequence: false });
  return { text, usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens } };
}

function json(res, status, value) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(value));
}

const server = http.createServer(async (req, res) => {
  try {
    if (req.method === "GET" && req.url === "/v1/models") {
      return json(res, 200, { object: "list", data: [{ id: modelId, object: "model", owned_by: "replicad-tests" }] });
    }
    if (req.method !== "POST" || req.url !== "/v1/chat/completions") return json(res, 404, { error: { message: "not found" } });
    let raw = "";
    for await (const chunk of req) raw += chunk;
    const body = JSON.parse(raw);
    const id = `chatcmpl-${Date.now()}`;
    const created = Math.floor(Date.now() / 1000);
    let closed = false;
    res.on("close", () => { closed = true; });
    if (body.stream) {
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      const frame = (choice, extra = {}) =>
        res.write(`data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model: modelId, choices: choice ? [choice] : [], ...extra })}\n\n`);
      frame({ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null });
      const done = await serially(() => complete(body, (t) => frame({ index: 0, delta: { content: t }, finish_reason: null }), () => closed));
      if (!closed) {
        frame({ index: 0, delta: {}, finish_reason: "stop" });
        frame(null, { usage: done.usage });
        res.end("data: [DONE]\n\n");
      }
      return;
    }
    const done = await serially(() => complete(body, () => {}, () => closed));
    json(res, 200, {
      id, object: "chat.completion", created, model: modelId,
      choices: [{ index: 0, message: { role: "assistant", content: done.text }, finish_reason: "stop" }],
      usage: done.usage,
    });
  } catch (e) {
    if (!res.headersSent) json(res, e.status ?? 500, { error: { message: String(e.message ?? e) } });
    else res.end();
  }
});

server.listen(Number(args.port ?? 0), args.host ?? "127.0.0.1", () => {
  const { address, port } = server.address();
  console.log(`listening on http://${address}:${port}`);
});
