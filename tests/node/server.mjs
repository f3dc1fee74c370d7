// server.mjs - a small OpenAI-compatible server on a real engine, for
// kvchat's remote-model tests: node-llama-cpp (the prebuilt llama.cpp that
// llref uses) behind /v1/chat/completions (streamed as server-sent events,
// or whole) and /v1/models, on 127.0.0.1 only.
//
// usage: node server.mjs --model FILE.gguf --port-file F [--id ID] [--log F]
//                        [--ctx N] [--threads N]
//
// One context sequence serves every request, one at a time, as
// llama-server's slot does: before a request is evaluated, the tokens the
// sequence already holds are compared with the new prompt's, the KV cache
// is cut back to the first difference, and only the rest is evaluated.
// usage.prompt_tokens_details.cached_tokens is that common prefix: what
// llama.cpp reused, not a guess. The chat template is the model's (its
// tokenizer.chat_template, through node-llama-cpp's chat wrappers).
//
// Requests are logged to --log as JSON lines: the messages' roles, the
// prompt's token count, and how many tokens were reused.
import {createServer} from "node:http";
import {appendFileSync, renameSync, writeFileSync} from "node:fs";
import {parseArgs} from "node:util";

const {values: opt} = parseArgs({
    options: {
        model: {type: "string"},
        "port-file": {type: "string"},
        id: {type: "string", default: "tiny-phi3"},
        log: {type: "string"},
        ctx: {type: "string", default: "2048"},
        threads: {type: "string", default: "1"},
        "node-llama-cpp": {type: "string"},
    },
});
if (!opt.model || !opt["port-file"]) {
    console.error("usage: node server.mjs --model FILE.gguf --port-file F [--id ID] [--log F]");
    process.exit(1);
}

const lib = await import(opt["node-llama-cpp"] ?? "node-llama-cpp");
const llama = await lib.getLlama({gpu: false, build: "never", skipDownload: true, progressLogs: false,
                                  logLevel: lib.LlamaLogLevel.error});
const model = await llama.loadModel({modelPath: opt.model, gpuLayers: 0});
const context = await model.createContext({contextSize: Number(opt.ctx), sequences: 1,
                                           threads: Number(opt.threads)});
const sequence = context.getSequence();
const wrapper = lib.resolveChatWrapper(model);
const MODEL_ID = opt.id;

function log(entry) {
    if (opt.log)
        appendFileSync(opt.log, JSON.stringify(entry) + "\n");
}

// one request at a time on the one sequence
let queue = Promise.resolve();
function serially(job) {
    const run = queue.then(job, job);
    queue = run.catch(() => {});
    return run;
}

function sendJson(res, status, obj) {
    const body = JSON.stringify(obj);
    res.writeHead(status, {"Content-Type": "application/json", "Content-Length": Buffer.byteLength(body)});
    res.end(body);
}

function badRequest(res, message) {
    sendJson(res, 400, {error: {message, type: "invalid_request_error"}});
}

// the chat-completions messages as node-llama-cpp's chat history, ending
// with the model's (empty) turn to be generated
function toHistory(messages) {
    const history = [];
    for (const m of messages) {
        if (typeof m !== "object" || m === null || typeof m.content !== "string")
            throw new Error("each message needs a string content");
        if (m.role === "system")
            history.push({type: "system", text: m.content});
        else if (m.role === "user")
            history.push({type: "user", text: m.content});
        else if (m.role === "assistant")
            history.push({type: "model", response: [m.content]});
        else
            throw new Error(`unknown role '${m.role}'`);
    }
    history.push({type: "model", response: []});
    return history;
}

async function complete(req, res, body) {
    if (body.model !== undefined && body.model !== MODEL_ID)
        return sendJson(res, 404, {error: {message: `model '${body.model}' not found`, type: "not_found"}});
    if (!Array.isArray(body.messages) || body.messages.length === 0)
        return badRequest(res, "messages must be a non-empty list");
    let history;
    try {
        history = toHistory(body.messages);
    } catch (e) {
        return badRequest(res, e.message);
    }
    const state = wrapper.generateContextState({chatHistory: history});
    const tokens = state.contextText.tokenize(model.tokenizer);
    if (tokens.length >= context.contextSize)
        return badRequest(res, `prompt is too long (${tokens.length} tokens, context ${context.contextSize})`);
    const stream = body.stream === true;
    const wantUsage = !stream || body.stream_options?.include_usage === true;
    const maxTokens = Number.isInteger(body.max_tokens) && body.max_tokens > 0 ? body.max_tokens : 64;
    const stops = (Array.isArray(body.stop) ? body.stop : typeof body.stop === "string" ? [body.stop] : [])
        .filter((s) => typeof s === "string" && s.length > 0);
    const sampling = {
        temperature: typeof body.temperature === "number" ? body.temperature : 0.8,
        topP: typeof body.top_p === "number" ? body.top_p : undefined,
        seed: Number.isInteger(body.seed) ? body.seed % 2 ** 32 : undefined,
    };

    // llama.cpp's prompt reuse: keep the common prefix, evaluate the rest
    // (at least one token, for the logits of the next)
    const before = sequence.nextTokenIndex;
    const same = sequence.compareContextTokens(tokens).firstDifferentIndex;
    const reuse = Math.min(same, tokens.length - 1);
    if (reuse < sequence.nextTokenIndex)
        await sequence.eraseContextTokenRanges([{start: reuse, end: sequence.nextTokenIndex}]);
    log({roles: body.messages.map((m) => m.role), stream: body.stream === true, prompt_tokens: tokens.length, held: before, cached: reuse});

    const id = "chatcmpl-" + Date.now().toString(36);
    const created = Math.floor(Date.now() / 1000);
    const chunk = (delta, finish) => ({id, object: "chat.completion.chunk", created, model: MODEL_ID,
                                       choices: [{index: 0, delta, finish_reason: finish}]});
    let closed = false;
    res.on("close", () => { closed = true; });
    if (stream) {
        res.writeHead(200, {"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                            "Connection": "close"});
        res.write("data: " + JSON.stringify(chunk({role: "assistant", content: ""}, null)) + "\n\n");
    }

    // generate; text is sent only when it cannot be the start of a stop
    // string and does not end inside a character (U+FFFD held back)
    const generated = [];
    let text = "", sent = 0, finish = "length";
    const t0 = Date.now();
    let tFirst = 0;
    for await (const token of sequence.evaluate(tokens.slice(reuse), sampling)) {
        if (closed)
            break;
        generated.push(token);
        if (!tFirst)
            tFirst = Date.now();
        text = model.detokenize(generated);
        const hit = stops.map((s) => text.indexOf(s)).filter((i) => i >= 0);
        if (hit.length) {
            text = text.slice(0, Math.min(...hit));
            finish = "stop";
            break;
        }
        let safe = text.length;
        while (safe > sent && text[safe - 1] === "\ufffd")
            safe--;
        for (const s of stops)
            for (let k = Math.min(s.length - 1, safe - sent); k > 0; k--)
                if (text.slice(safe - k, safe) === s.slice(0, k)) {
                    safe -= k;
                    break;
                }
        if (stream && safe > sent) {
            res.write("data: " + JSON.stringify(chunk({content: text.slice(sent, safe)}, null)) + "\n\n");
            sent = safe;
        }
        if (generated.length >= maxTokens)
            break;
    }
    if (generated.length < maxTokens && finish === "length")
        finish = "stop"; // an end-of-generation token
    if (closed)
        return;
    const usage = {prompt_tokens: tokens.length, completion_tokens: generated.length,
                   total_tokens: tokens.length + generated.length,
                   prompt_tokens_details: {cached_tokens: reuse}};
    const timings = {cache_n: reuse, prompt_n: tokens.length - reuse, predicted_n: generated.length,
                     predicted_ms: Date.now() - (tFirst || t0)};
    if (!stream)
        return sendJson(res, 200, {id, object: "chat.completion", created, model: MODEL_ID,
                                   choices: [{index: 0, message: {role: "assistant", content: text},
                                              finish_reason: finish}], usage, timings});
    if (text.length > sent)
        res.write("data: " + JSON.stringify(chunk({content: text.slice(sent)}, null)) + "\n\n");
    res.write("data: " + JSON.stringify(chunk({}, finish)) + "\n\n");
    if (wantUsage)
        res.write("data: " + JSON.stringify({id, object: "chat.completion.chunk", created, model: MODEL_ID,
                                             choices: [], usage}) + "\n\n");
    res.end("data: [DONE]\n\n");
}

const server = createServer((req, res) => {
    const path = (req.url ?? "").split("?")[0].replace(/\/+$/, "");
    if (req.method === "GET" && path === "/v1/models")
        return sendJson(res, 200, {object: "list", data: [{id: MODEL_ID, object: "model", owned_by: "kvchat-tests"}]});
    if (req.method !== "POST" || path !== "/v1/chat/completions")
        return sendJson(res, 404, {error: {message: `no route ${req.method} ${req.url}`}});
    const parts = [];
    req.on("data", (d) => parts.push(d));
    req.on("end", () => {
        let body;
        try {
            body = JSON.parse(Buffer.concat(parts).toString("utf8"));
        } catch (e) {
            return badRequest(res, "the body is not JSON: " + e.message);
        }
        serially(() => complete(req, res, body)).catch((e) => {
            if (!res.headersSent)
                sendJson(res, 500, {error: {message: String(e?.message ?? e)}});
            else
                res.end();
        });
    });
});

server.listen(0, "127.0.0.1", () => {
    const f = opt["port-file"];
    writeFileSync(f + ".tmp", String(server.address().port));
    renameSync(f + ".tmp", f);
});
for (const sig of ["SIGTERM", "SIGINT"])
    process.on(sig, () => { server.close(); process.exit(0); });
