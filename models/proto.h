/*
 * proto.h - (internal to models/) the bytes of the protocols models/ speaks
 * above HTTP, parsed from memory and nothing else so that the fuzz targets
 * (tests/fuzz/fuzz_sse.c, tests/fuzz/fuzz_chatjson.c) drive them directly:
 * server-sent events (models/sse.c) and JSON (models/json.c, the only file
 * that includes jansson): the chat-completions request, the streamed and
 * whole responses, error bodies, and lists of strings (a server's models,
 * the hub's files). models/remote.c is the client around them.
 *
 * Errors: negative values with a one-line reason in the caller's err
 * buffer. Text taken from a response is valid UTF-8 (jansson checks every
 * string); text put into a message for the terminal has no control
 * characters.
 */
#ifndef KVCHAT_MODELS_PROTO_H
#define KVCHAT_MODELS_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "models/mdl.h"

/* ==== server-sent events (sse.c) ====
 * The WHATWG event-stream format: lines end with CRLF, LF or CR; "data:"
 * lines add to the event's data (joined by LF), "event:" names it, ":"
 * starts a comment, other fields are ignored; an empty line dispatches the
 * event (nothing, if it had no data). A leading BOM is dropped. An event
 * (or a line) longer than SSE_MAX_EVENT bytes is an error, so a server
 * cannot make us buffer without bound. */

#define SSE_MAX_EVENT (4u << 20)

struct sse {
    char *line;              /* the line being read */
    size_t line_len, line_cap;
    char *data;              /* the event's data so far, LF-joined */
    size_t data_len, data_cap;
    bool have_data;          /* a data field was seen (data may still be empty) */
    char event[64];          /* the event type ("" is "message") */
    bool after_cr;           /* the last byte ended a line with CR: skip a following LF */
    bool started;            /* past a possible BOM */
    uint64_t n_events;       /* dispatched so far */
};

void sse_init(struct sse *s);
void sse_free(struct sse *s);
/* called for each dispatched event (data is NUL-terminated, n bytes);
 * non-zero stops the feed and is returned by sse_feed */
typedef int (*sse_event_fn)(void *ud, const char *event, const char *data, size_t n);
/* Feed bytes: 0 when all were taken, the callback's non-zero value when it
 * stopped (the rest of in is not read), or -1 (err) on an oversized event
 * or out of memory. */
int sse_feed(struct sse *s, const char *in, size_t n, sse_event_fn fn, void *ud, char *err,
             size_t err_size);
/* true if an event has begun but not been dispatched (at the end of the
 * stream it is dropped, as the format says) */
bool sse_pending(const struct sse *s);

/* ==== the chat-completions protocol's JSON (json.c) ==== */

/*
 * The request body: {"model", "messages": [{"role", "content"}...],
 * "stream", "stream_options": {"include_usage": true} (when streaming),
 * then the sampling fields that are set}, compactly, in that order, so
 * that the same conversation gives the same bytes every time. Text that is
 * not valid UTF-8 has each bad sequence replaced by U+FFFD. Returns a
 * malloc'd NUL-terminated string (caller frees) and its length, or NULL
 * (err) when out of memory.
 */
char *chat_request_json(const char *model, const struct mdl_message *msgs, size_t n_msgs,
                        const struct mdl_chat_params *p, bool stream, size_t *len, char *err,
                        size_t err_size);

/* what a response told, streamed chunk by chunk or whole */
struct chat_acc {
    mdl_text_fn on_text;     /* each piece of the answer, as it comes */
    void *ud;
    char *text;              /* all of the answer so far (malloc'd), NUL-terminated */
    size_t len, cap;
    bool done;               /* "[DONE]" was seen */
    bool stopped;            /* on_text asked to stop */
    char finish_reason[32];  /* of choice 0, "" until one comes */
    char model[256];         /* the model the server says answered */
    int64_t prompt_tokens, completion_tokens, cached_tokens; /* -1 until reported */
    double prompt_tok_s, decode_tok_s;                      /* llama-server's timings, -1 */
    uint64_t n_chunks;
};
void chat_acc_init(struct chat_acc *a, mdl_text_fn on_text, void *ud);
void chat_acc_free(struct chat_acc *a);

enum chat_status {
    CHAT_OK = 0,
    CHAT_STOPPED = 1,         /* on_text returned non-zero */
    CHAT_ERR_MALFORMED = -1,  /* not the protocol (err says where) */
    CHAT_ERR_SERVER = -2,     /* the server sent an error object (err has its message) */
    CHAT_ERR_MEMORY = -3,
};
/* One event's data of a streamed answer: "[DONE]" or a chat.completion.chunk
 * object (choices[0].delta.content, finish_reason, model, usage, timings),
 * or an error object. Returns enum chat_status. */
int chat_acc_chunk(struct chat_acc *a, const char *data, size_t n, char *err, size_t err_size);
/* A whole (not streamed) chat.completion object. Returns enum chat_status. */
int chat_acc_response(struct chat_acc *a, const char *body, size_t n, char *err, size_t err_size);

/* The message of an error body ({"error": {"message"}}, {"error": "..."},
 * {"message"} or {"detail"}) into out, made printable and cut to size:
 * 1 if there was one, else 0 (out is then ""). */
int chat_error_message(const char *body, size_t n, char *out, size_t size);

/*
 * The string `field` of every object in the array `array` of a JSON object
 * body ({"data": [{"id": "a"}, ...]} with "data", "id"): *out is a malloc'd
 * array of *count malloc'd strings (free with mdl_strv_free). 0, or
 * CHAT_ERR_MALFORMED / CHAT_ERR_MEMORY (err).
 */
int json_string_list(const char *body, size_t n, const char *array, const char *field, char ***out,
                     size_t *count, char *err, size_t err_size);

#endif
