/* hqekv.h: the stable C API of hqekv, a KV-cache compression engine.
 *
 * C99 and C++ compatible. Every object is an opaque handle created by a
 * *_create / *_load function and released by its *_free function (free of
 * NULL is a no-op). Every fallible call returns an hqekv_status; on failure,
 * hqekv_last_error() gives a message that names the input at fault. No
 * exception ever crosses this boundary, and no call prints or exits.
 *
 * Threads: a handle is used by one thread at a time. The compute thread pool
 * (hqekv_set_threads) is shared by the whole process, so compute calls
 * (decode, generate, attend) on different handles must not run concurrently.
 *
 * Sizes and units: token ids are int32_t; K/V/Q rows are fp32 row-major with
 * the shapes given at each function; byte counts are exact (every byte a KV
 * cache holds is counted); "true bits" = bytes held * 8 / kept elements.
 *
 * Strings returned as const char* belong to the handle (or, for
 * hqekv_last_error, to the calling thread) and stay valid until the handle is
 * freed or the next call that changes them. Functions that fill a caller
 * buffer (char *buf, size_t cap, size_t *len) write at most cap bytes
 * (NUL-terminated when cap > 0), store the full length (without the NUL) in
 * *len, and return HQEKV_ERR_BUFFER_TOO_SMALL when it did not fit: call
 * again with cap >= *len + 1.
 */
#ifndef HQEKV_HQEKV_H_
#define HQEKV_HQEKV_H_

#include <stddef.h>
#include <stdint.h>

/* The API's version: bumped when calls are added (the changelog in
 * docs/api.md lists what each version added) and on any incompatible
 * change. hqekv_api_version() returns the library's value; a program built
 * against version N runs on a library of version >= N with the same
 * HQEKV_ABI_VERSION. */
#define HQEKV_API_VERSION 2
/* Bumped only on an incompatible change of this header (a function, struct
 * or enum value changed or removed); it is the library's SONAME
 * (libhqekv.so.<HQEKV_ABI_VERSION>). */
#define HQEKV_ABI_VERSION 1

#if defined(HQEKV_STATIC_DEFINE)
#define HQEKV_API
#elif defined(_WIN32)
#if defined(HQEKV_BUILDING_LIBRARY)
#define HQEKV_API __declspec(dllexport)
#else
#define HQEKV_API __declspec(dllimport)
#endif
#else
#define HQEKV_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Errors ------------------------------------------------------------ */

typedef enum hqekv_status {
  HQEKV_OK = 0,
  HQEKV_ERR_INVALID_ARGUMENT = 1, /* NULL handle / pointer, bad size, out-of-range value or token */
  HQEKV_ERR_BUFFER_TOO_SMALL = 2, /* the output did not fit: see *len / *n_out */
  HQEKV_ERR_LOAD = 3,             /* a model or KV state file is missing, unreadable or malformed */
  HQEKV_ERR_SPEC = 4,             /* a --kv policy spec or quantization format is invalid */
  HQEKV_ERR_CONTEXT_FULL = 5,     /* the batch does not fit the context length */
  HQEKV_ERR_STATE = 6,            /* the call is not valid now (e.g. logits before any decode) */
  HQEKV_ERR_COMPUTE = 7,          /* the engine or the cache reported an error */
  HQEKV_ERR_OUT_OF_MEMORY = 8,
  HQEKV_ERR_INTERNAL = 9, /* a bug in hqekv: please report the message */
  HQEKV_ERR_ABORTED = 10  /* the context's abort callback asked to stop */
} hqekv_status;

/* Message of the last failed call on this thread ("" when none failed). */
HQEKV_API const char* hqekv_last_error(void);
/* Constant name of a status, e.g. "HQEKV_ERR_SPEC". */
HQEKV_API const char* hqekv_status_name(hqekv_status status);

/* ---- Library ----------------------------------------------------------- */

HQEKV_API int hqekv_api_version(void);     /* == HQEKV_API_VERSION of the built library */
HQEKV_API const char* hqekv_version(void); /* project version, e.g. "0.1.0" */
/* Threads of the shared compute pool (0 = all cores). Results are
 * reproducible for a fixed thread count. */
HQEKV_API hqekv_status hqekv_set_threads(int n_threads);

/* Log messages (llama_log_set's role; since API version 2). The library
 * prints nothing by itself; with a callback it reports what a person wants
 * to know: INFO when a model is loaded or a context or sequence created
 * (what and how big), WARN when a KV policy cannot meet its budget (the note
 * `hqekv run` prints), ERROR with the message of every failed call (the
 * text hqekv_last_error() returns). message is valid during the call only.
 * The callback may run on any thread that calls the library, one call at a
 * time, and must not call hqekv_log_set. NULL removes it (process-wide). */
typedef enum hqekv_log_level {
  HQEKV_LOG_DEBUG = 0,
  HQEKV_LOG_INFO = 1,
  HQEKV_LOG_WARN = 2,
  HQEKV_LOG_ERROR = 3
} hqekv_log_level;
typedef void (*hqekv_log_callback)(hqekv_log_level level, const char* message, void* user);
HQEKV_API void hqekv_log_set(hqekv_log_callback callback, void* user);

/* ---- Model ------------------------------------------------------------- */

typedef struct hqekv_model hqekv_model;

/* Loads a GGUF file or a llama2.c checkpoint. tokenizer_path: llama2.c only,
 * the tokenizer.bin (NULL or "": tok<vocab>.bin, then tokenizer.bin next to
 * the checkpoint). Weights are memory-mapped. */
HQEKV_API hqekv_status hqekv_model_load(const char* path, const char* tokenizer_path,
                                        hqekv_model** out);
/* Contexts keep what they need of the model alive: freeing the model while
 * contexts exist is allowed. */
HQEKV_API void hqekv_model_free(hqekv_model* model);

/* Metadata (0 / -1 / "" for a NULL model). */
HQEKV_API const char* hqekv_model_name(const hqekv_model* model); /* general.name or file stem */
HQEKV_API const char* hqekv_model_arch(const hqekv_model* model); /* "llama", "qwen2", "qwen3" */
HQEKV_API const char* hqekv_model_identity(const hqekv_model* model); /* content hash, 16 hex */
HQEKV_API int hqekv_model_n_vocab(const hqekv_model* model);
HQEKV_API int hqekv_model_n_layers(const hqekv_model* model);
HQEKV_API int hqekv_model_n_embd(const hqekv_model* model);
HQEKV_API int hqekv_model_n_heads(const hqekv_model* model);
HQEKV_API int hqekv_model_n_kv_heads(const hqekv_model* model);
HQEKV_API int hqekv_model_head_dim(const hqekv_model* model);
HQEKV_API int hqekv_model_n_ctx_train(const hqekv_model* model);
HQEKV_API int64_t hqekv_model_n_params(const hqekv_model* model);
HQEKV_API int32_t hqekv_model_bos(const hqekv_model* model); /* -1 when none */
HQEKV_API int32_t hqekv_model_eos(const hqekv_model* model); /* -1 when none */
HQEKV_API int hqekv_model_add_bos(const hqekv_model* model); /* what the file asks for */
HQEKV_API int hqekv_model_is_eog(const hqekv_model* model, int32_t token); /* EOS, EOT, EOM */

/* Token ids of text[0..text_len) (text_len == (size_t)-1: NUL-terminated).
 * add_bos: put BOS first (if the vocab has one); parse_special: control
 * tokens written literally (e.g. "<|eot_id|>") become their ids. Writes at
 * most cap ids; *n_tokens = the full count (HQEKV_ERR_BUFFER_TOO_SMALL when
 * > cap; tokens may be NULL when cap == 0). */
HQEKV_API hqekv_status hqekv_tokenize(const hqekv_model* model, const char* text, size_t text_len,
                                      int add_bos, int parse_special, int32_t* tokens, size_t cap,
                                      size_t* n_tokens);
/* Text of tokens[0..n) generated after token `prev` (pass BOS, or -1 for
 * "start of text"), as `hqekv run` streams it: control tokens give "". */
HQEKV_API hqekv_status hqekv_detokenize(const hqekv_model* model, const int32_t* tokens, size_t n,
                                        int32_t prev, char* buf, size_t cap, size_t* len);

/* One message of a conversation (both strings NUL-terminated, UTF-8). */
typedef struct hqekv_chat_message {
  const char* role; /* "system", "user" or "assistant" */
  const char* content;
} hqekv_chat_message;

/* The conversation msgs[0..n_msg) rendered as the prompt text of a chat
 * model, as llama_chat_apply_template does (tokenize the result with
 * parse_special = 1). tmpl: NULL for the model's own template
 * (tokenizer.chat_template), a family name ("chatml", "llama3", "phi3",
 * "gemma"), or Jinja template source whose family is then recognised by its
 * markers; model may be NULL when tmpl is given. add_assistant: end with the
 * opening of the assistant's turn. Output by the (buf, cap, len) convention.
 * HQEKV_ERR_INVALID_ARGUMENT for an unknown role or an unrecognised
 * template. */
HQEKV_API hqekv_status hqekv_chat_apply_template(const hqekv_model* model, const char* tmpl,
                                                 const hqekv_chat_message* msgs, size_t n_msg,
                                                 int add_assistant, char* buf, size_t cap,
                                                 size_t* len);

/* ---- Context: a model + a (compressed) KV cache of one sequence -------- */

typedef struct hqekv_context hqekv_context;

/* kv_spec: a `--kv` policy spec, e.g. "fp16", "kivi:bits=2",
 * "hqekv:bits=3.2" (`hqekv policies` lists them; NULL = "fp16"). n_ctx:
 * positions the cache holds (<= 0: the model's context length, at most
 * 4096, as `hqekv run`). */
HQEKV_API hqekv_status hqekv_context_create(const hqekv_model* model, const char* kv_spec,
                                            int n_ctx, hqekv_context** out);
HQEKV_API void hqekv_context_free(hqekv_context* ctx);
HQEKV_API int hqekv_context_n_ctx(const hqekv_context* ctx);
HQEKV_API int hqekv_context_n_past(const hqekv_context* ctx); /* tokens decoded so far */
/* The cache's configuration, e.g. "kivi:bits=2". */
HQEKV_API const char* hqekv_context_kv_describe(const hqekv_context* ctx);

/* Runs tokens[0..n) at positions n_past .. n_past+n-1 and keeps the logits
 * of the last one. A batch into an empty context is the prompt (the
 * policy's prefill compression event); later batches are decoded /
 * teacher-forced tokens. Token ids must be in [0, n_vocab). */
HQEKV_API hqekv_status hqekv_decode(hqekv_context* ctx, const int32_t* tokens, int n);
/* logits[n_vocab] of the last decoded token; valid until the next decode. */
HQEKV_API hqekv_status hqekv_get_logits(const hqekv_context* ctx, const float** logits,
                                        int* n_vocab);
/* Forgets the sequence (n_past = 0, the cache empty). */
HQEKV_API hqekv_status hqekv_context_reset(hqekv_context* ctx);

/* KV state: the context's sequence (tokens, last logits) and its cache as
 * held in memory, compressed tiers and policy state included, with a
 * versioned header (model identity, cache geometry, kv spec) and a checksum;
 * the same format as `hqekv run --prompt-cache` and the server's slot files.
 * A loaded context continues exactly as the saved one (the logits of every
 * later step are bit-identical; the repetition-penalty history restarts
 * from the saved tokens). Loading needs a context of the same model, kv spec
 * and n_ctx; a missing file is HQEKV_ERR_LOAD, a corrupt, truncated or
 * mismatched state HQEKV_ERR_LOAD with the reason, and the context is then
 * unchanged. Saving before any decode: HQEKV_ERR_STATE. Files are written
 * atomically (a temporary file renamed). */
HQEKV_API hqekv_status hqekv_context_save_state(const hqekv_context* ctx, const char* path);
HQEKV_API hqekv_status hqekv_context_load_state(hqekv_context* ctx, const char* path);
/* The same bytes in memory: *len = the state's size (buf may be NULL when
 * cap == 0; HQEKV_ERR_BUFFER_TOO_SMALL when cap < *len). */
HQEKV_API hqekv_status hqekv_context_state_get_data(const hqekv_context* ctx, uint8_t* buf,
                                                    size_t cap, size_t* len);
HQEKV_API hqekv_status hqekv_context_state_set_data(hqekv_context* ctx, const uint8_t* data,
                                                    size_t len);

/* ---- Sampling (the chain of `hqekv run`) --------------------------------
 * Order per step: repetition penalty over the last repeat_last_n tokens of
 * the context; temperature 0 = argmax (lowest id on ties); else
 * temperature, top-k, softmax, top-p, min-p, draw (seeded xoshiro256**). */

typedef struct hqekv_sampler_params {
  float temperature;    /* 0 = greedy */
  int32_t top_k;        /* 0 = off */
  float top_p;          /* (0, 1]; 1 = off */
  float min_p;          /* [0, 1); 0 = off */
  float repeat_penalty; /* > 0; 1 = off */
  int32_t repeat_last_n;
  uint64_t seed;
} hqekv_sampler_params;

/* The defaults of `hqekv run`: 0.8, 40, 0.95, 0.05, 1.0, 64, seed 0. */
HQEKV_API hqekv_sampler_params hqekv_sampler_default_params(void);
/* Greedy: temperature 0, everything else off. */
HQEKV_API hqekv_sampler_params hqekv_sampler_greedy_params(void);

typedef struct hqekv_sampler hqekv_sampler;
HQEKV_API hqekv_status hqekv_sampler_create(const hqekv_sampler_params* params,
                                            hqekv_sampler** out);
HQEKV_API void hqekv_sampler_free(hqekv_sampler* sampler);
/* OpenAI's presence and frequency penalties on a sampler (0 = off; finite):
 * the logit of a token already in the last repeat_last_n tokens loses
 * presence + frequency x its count. The sampler's random state restarts from
 * its seed. */
HQEKV_API hqekv_status hqekv_sampler_set_penalties(hqekv_sampler* sampler, float presence,
                                                   float frequency);
/* Adds bias[i] to the logit of tokens[i] before every other step (replacing
 * any earlier bias; n = 0 clears it); a bias of -INFINITY bans the token.
 * Ids past the vocabulary are ignored. The random state restarts from the
 * seed. */
HQEKV_API hqekv_status hqekv_sampler_set_logit_bias(hqekv_sampler* sampler, const int32_t* tokens,
                                                    const float* bias, size_t n);
/* Picks the next token from the context's logits; the tokens decoded so far
 * are the history of the repetition penalty. Does not decode it. */
HQEKV_API hqekv_status hqekv_sampler_sample(hqekv_sampler* sampler, const hqekv_context* ctx,
                                            int32_t* token);

/* The loop of `hqekv run`, on a context that has decoded its prompt: up to
 * max_new times, sample a token, stop (without emitting it) at an
 * end-of-generation token, emit it to out[], and decode it unless it is the
 * last one (so the last emitted token is not yet in the context) or the
 * context is full (unless hqekv_context_set_shift is on). *n_out = tokens emitted (out may be NULL
 * when cap == 0; cap must be >= max_new otherwise). */
HQEKV_API hqekv_status hqekv_generate(hqekv_context* ctx, hqekv_sampler* sampler, int max_new,
                                      int32_t* out, size_t cap, size_t* n_out);

/* An abort callback, as llama.h's: hqekv_decode, hqekv_decode_batch and
 * every step of hqekv_generate call abort_fn(user) before computing; a
 * nonzero return stops the call with HQEKV_ERR_ABORTED and the context as
 * before it (hqekv_generate keeps the tokens emitted so far in out[] and
 * *n_out). NULL removes it. The callback runs on the calling thread. */
HQEKV_API hqekv_status hqekv_context_set_abort_callback(hqekv_context* ctx, int (*abort_fn)(void*),
                                                        void* user);

/* Context shift for hqekv_generate (llama.cpp's, as `hqekv run`): with
 * enable = 1, a step that finds the context full keeps its first n_keep
 * tokens and the newer half of the rest, recomputes them (every policy), and
 * goes on, so generation outlives n_ctx. n_keep counts from the first token
 * (BOS included; `hqekv run --keep K` keeps K + 1 with a BOS) and must be in
 * [0, n_ctx - 1). enable = 0 (the default) stops at a full context.
 * hqekv_decode never shifts: a batch that does not fit is
 * HQEKV_ERR_CONTEXT_FULL. */
HQEKV_API hqekv_status hqekv_context_set_shift(hqekv_context* ctx, int enable, int n_keep);
/* Context shifts done since the context was created or reset. */
HQEKV_API int hqekv_context_n_shifts(const hqekv_context* ctx);

/* ---- KV statistics ----------------------------------------------------- */

typedef struct hqekv_kv_stats {
  int64_t bytes_total;       /* = payload + metadata + bookkeeping + residual */
  int64_t bytes_payload;     /* codes / fp16 / fp32 values of kept tokens outside the residual */
  int64_t bytes_metadata;    /* scales, minima, means, stds */
  int64_t bytes_bookkeeping; /* positions, tier maps, page tables, importance state */
  int64_t bytes_residual;    /* fp16 residual window */
  int64_t kept_elements;     /* kept (layer, kv head, token) cells * head_dim * 2 */
  int64_t original_elements; /* the same over every token ever appended */
  double true_bits;          /* bytes_total * 8 / kept_elements (0 when empty) */
  double bits_per_original;  /* bytes_total * 8 / original_elements */
  int32_t n_layers;
} hqekv_kv_stats;

HQEKV_API hqekv_status hqekv_context_kv_stats(const hqekv_context* ctx, hqekv_kv_stats* out);
/* The per-layer report as JSON: {"describe", "bytes": {...}, "kept_elements",
 * "original_elements", "true_bits", "bits_per_original", "layers": [{"bytes",
 * "kept_tokens", "k_tiers", "v_tiers"}...]}. */
HQEKV_API hqekv_status hqekv_context_kv_report_json(const hqekv_context* ctx, char* buf, size_t cap,
                                                    size_t* len);

/* ---- Standalone quantization ------------------------------------------
 * A chunk is T tokens x D channels fp32 [T][D] of one (layer, KV head).
 * Formats: "f16", "f32", "fp8e4m3", "fp8e5m2", "int8", "u1" "u2" "u4" "u8",
 * "n1" "n2" "n4", with optional ":tok" / ":chan" (grouping), ":g=32",
 * ":had" (Hadamard). Codes and metadata are two planes, laid out as
 * src/quant/README.md documents. */

/* Exact sizes in bytes of the two planes for a T x D chunk. */
HQEKV_API hqekv_status hqekv_quant_sizes(const char* format, int T, int D, size_t* code_bytes,
                                         size_t* meta_bytes);
/* src[T][D] -> codes[code_cap], meta[meta_cap] (caps >= hqekv_quant_sizes). */
HQEKV_API hqekv_status hqekv_quantize(const char* format, const float* src, int T, int D,
                                      uint8_t* codes, size_t code_cap, uint8_t* meta,
                                      size_t meta_cap);
/* codes, meta (sizes as hqekv_quant_sizes) -> dst[T][D], the reconstruction. */
HQEKV_API hqekv_status hqekv_dequantize(const char* format, const uint8_t* codes, size_t code_size,
                                        const uint8_t* meta, size_t meta_size, int T, int D,
                                        float* dst);

/* ---- Standalone KV store (no model) ------------------------------------ */

typedef struct hqekv_kv_geometry {
  int32_t n_layers;
  int32_t n_q_heads; /* multiple of n_kv_heads (GQA / MQA) */
  int32_t n_kv_heads;
  int32_t head_dim; /* D */
  int32_t max_ctx;  /* largest position + 1 */
} hqekv_kv_geometry;

typedef struct hqekv_kv hqekv_kv;

/* A cache of one sequence from a policy spec (as hqekv_context_create;
 * profile-based specs are not checked against any model). */
HQEKV_API hqekv_status hqekv_kv_create(const char* spec, const hqekv_kv_geometry* geometry,
                                       hqekv_kv** out);
HQEKV_API void hqekv_kv_free(hqekv_kv* kv);
HQEKV_API const char* hqekv_kv_describe(const hqekv_kv* kv);
/* Appends n tokens to one layer. k, v: [n][n_kv_heads][head_dim] (K already
 * position-encoded); pos[n]: strictly increasing, greater than every position
 * appended to this layer before, < max_ctx. */
HQEKV_API hqekv_status hqekv_kv_append(hqekv_kv* kv, int layer, const float* k, const float* v,
                                       const int32_t* pos, int n);
/* Causal attention of n queries over the kept tokens of one layer.
 * q, out: [n][n_q_heads][head_dim]; query i sees positions <= q_pos[i];
 * scores scaled by 1/sqrt(head_dim), one softmax per (query, head). */
HQEKV_API hqekv_status hqekv_kv_attend(hqekv_kv* kv, int layer, const float* q,
                                       const int32_t* q_pos, int n, float* out);
/* Call once after every layer has appended (and attended) a batch of n
 * tokens; is_prefill = 1 for a prompt. Compression happens here. */
HQEKV_API hqekv_status hqekv_kv_end_batch(hqekv_kv* kv, int n, int is_prefill);
HQEKV_API hqekv_status hqekv_kv_stats_get(const hqekv_kv* kv, hqekv_kv_stats* out);
HQEKV_API hqekv_status hqekv_kv_report_json(const hqekv_kv* kv, char* buf, size_t cap, size_t* len);

/* ---- Many sequences in one context (llama.h's seq_id) --------------------
 * A context holds sequence 0 (what hqekv_decode, hqekv_generate and the
 * state calls use) and any number of sequences added by hqekv_seq_add, each
 * with its own KV cache under its own policy spec and up to n_ctx tokens.
 * Positions are implicit: a sequence's tokens sit at 0, 1, 2, ... in the
 * order they are decoded. hqekv_decode_batch runs tokens of several
 * sequences in ONE forward pass (every weight matrix is read once for all
 * of them; attention runs per sequence on its own cache). */
typedef int32_t hqekv_seq_id;

/* Adds an empty sequence under kv_spec (NULL: the context's spec); *out is
 * its id (> 0, never reused by this context). */
HQEKV_API hqekv_status hqekv_seq_add(hqekv_context* ctx, const char* kv_spec, hqekv_seq_id* out);
/* Removes a sequence and frees its cache; sequence 0 is cleared instead. */
HQEKV_API hqekv_status hqekv_seq_remove(hqekv_context* ctx, hqekv_seq_id seq);
/* Keeps the first n_keep tokens of a sequence and drops the rest (rewind;
 * llama_memory_seq_rm(seq, n_keep, -1)): the kept tokens are recomputed
 * into the cache as one prompt batch, so every policy supports it. */
HQEKV_API hqekv_status hqekv_seq_truncate(hqekv_context* ctx, hqekv_seq_id seq, int n_keep);
/* A new sequence holding an exact copy of src's cache and tokens (same
 * policy: its compressed state is copied, not recomputed). */
HQEKV_API hqekv_status hqekv_seq_copy(hqekv_context* ctx, hqekv_seq_id src, hqekv_seq_id* out);
/* Tokens in a sequence (-1 for an unknown id). */
HQEKV_API int hqekv_seq_n_past(const hqekv_context* ctx, hqekv_seq_id seq);
HQEKV_API const char* hqekv_seq_kv_describe(const hqekv_context* ctx, hqekv_seq_id seq);
HQEKV_API hqekv_status hqekv_seq_kv_stats(const hqekv_context* ctx, hqekv_seq_id seq,
                                          hqekv_kv_stats* out);
/* Runs n tokens: tokens[i] appended to sequence seq_ids[i] (a sequence's
 * tokens in the order given; the first batch of an empty sequence is its
 * prompt, the policy's compression event). logits[i] != 0 asks for the
 * logits after token i (NULL: after the last token of each sequence). The
 * last token of each sequence always updates that sequence's logits (for
 * hqekv_seq_sample). Checked before anything runs (ids, tokens, room); a
 * batch that fails part-way leaves every sequence as before the call. */
HQEKV_API hqekv_status hqekv_decode_batch(hqekv_context* ctx, const hqekv_seq_id* seq_ids,
                                          const int32_t* tokens, const int8_t* logits, int n);
/* Logits [n_vocab] after token i of the last hqekv_decode_batch (i < 0:
 * counted from the end, as llama_get_logits_ith); HQEKV_ERR_STATE when
 * they were not asked for. Valid until the next batch. */
HQEKV_API hqekv_status hqekv_get_logits_ith(const hqekv_context* ctx, int i, const float** logits,
                                            int* n_vocab);
/* The k most probable next tokens after token i of the last batch, by
 * decreasing probability, with their natural-log probabilities (k <=
 * n_vocab). */
HQEKV_API hqekv_status hqekv_get_top_logprobs_ith(const hqekv_context* ctx, int i, int k,
                                                  int32_t* ids, float* logprobs);
/* Every sequence except seq is removed (llama_memory_seq_keep); sequence 0
 * is cleared unless seq is 0. Since API version 2. */
HQEKV_API hqekv_status hqekv_seq_keep(hqekv_context* ctx, hqekv_seq_id seq);
/* hqekv_sampler_sample on a sequence's last logits and history. */
HQEKV_API hqekv_status hqekv_seq_sample(hqekv_sampler* sampler, const hqekv_context* ctx,
                                        hqekv_seq_id seq, int32_t* token);
/* A sequence's state (tokens, logits, compressed cache), the format of
 * hqekv_context_state_get_data; loading needs a sequence of the same spec. */
HQEKV_API hqekv_status hqekv_seq_state_get_data(const hqekv_context* ctx, hqekv_seq_id seq,
                                                uint8_t* buf, size_t cap, size_t* len);
HQEKV_API hqekv_status hqekv_seq_state_set_data(hqekv_context* ctx, hqekv_seq_id seq,
                                                const uint8_t* data, size_t len);

/* ---- Embeddings (since API version 2) ------------------------------------
 * With embeddings on, every later hqekv_decode and hqekv_decode_batch also
 * keeps each token's final hidden state: the output of the model's last
 * norm, the input of its output head ([n_embd] floats; llama.cpp's
 * embeddings with pooling "none"). They are the model's hidden states as
 * computed with this context's KV policy (a compressed cache changes them as
 * it changes the logits). Valid until the next decode. */
HQEKV_API hqekv_status hqekv_context_set_embeddings(hqekv_context* ctx, int enable);
/* The hidden state after token i of the last decode or decode batch (i < 0:
 * counted from the end). HQEKV_ERR_STATE when embeddings were off for it. */
HQEKV_API hqekv_status hqekv_get_embeddings_ith(const hqekv_context* ctx, int i, const float** embd,
                                                int* n_embd);
typedef enum hqekv_pooling {
  HQEKV_POOLING_MEAN = 1, /* mean over the sequence's tokens in the batch */
  HQEKV_POOLING_LAST = 2, /* its last token (what a causal model has seen most of) */
  HQEKV_POOLING_FIRST = 3 /* its first token (CLS-style) */
} hqekv_pooling;
/* One vector for sequence seq's tokens in the last decode (batch), pooled
 * as `pooling` says (an hqekv_pooling value, passed as int so that any
 * other value is a clean HQEKV_ERR_INVALID_ARGUMENT):
 * out[n_embd] (cap >= n_embd floats), L2-normalised when normalize != 0 (as
 * llama.cpp's embedding example does). */
HQEKV_API hqekv_status hqekv_get_embeddings_seq(const hqekv_context* ctx, hqekv_seq_id seq,
                                                int pooling, int normalize, float* out, size_t cap);

/* ---- Vocabulary and file metadata ------------------------------------------ */
/* The text of a token as the vocabulary stores it (SentencePiece pieces keep
 * their U+2581 spaces, byte tokens read <0xNN>). */
HQEKV_API hqekv_status hqekv_token_get_text(const hqekv_model* model, int32_t token, char* buf,
                                            size_t cap, size_t* len);
/* 1 for a control token (BOS, EOS, chat markers), 0 otherwise or out of range. */
HQEKV_API int hqekv_token_is_control(const hqekv_model* model, int32_t token);
/* GGUF metadata: the number of keys, the key at index i, and a key's value
 * as text (arrays as their type, length and first 8 items). A missing key
 * is HQEKV_ERR_INVALID_ARGUMENT; llama2.c files have no metadata. */
HQEKV_API int hqekv_model_meta_count(const hqekv_model* model);
HQEKV_API hqekv_status hqekv_model_meta_key_by_index(const hqekv_model* model, int i, char* buf,
                                                     size_t cap, size_t* len);
HQEKV_API hqekv_status hqekv_model_meta_val_str(const hqekv_model* model, const char* key,
                                                char* buf, size_t cap, size_t* len);

/* ---- Quality of a KV policy against a reference -------------------------
 * The protocol of `hqekv ppl --kv SPEC --ref REF` (docs/evaluation.md): the
 * tokens are cut into consecutive chunks of n_ctx (a shorter stream is one
 * chunk; the first token of each chunk becomes BOS when the model file asks
 * for one); in each chunk the first n_prefill tokens run as one batch (the
 * policy's compression event), the rest are teacher-forced one at a time
 * and each of their next-token distributions is compared with the
 * reference cache's. Figures equal `hqekv ppl --json`'s for the same input. */
typedef struct hqekv_compare_params {
  int32_t n_ctx;     /* tokens per chunk, >= 2; 0 = min(512, tokens) */
  int32_t n_prefill; /* 0 = n_ctx / 2 */
  int32_t n_chunks;  /* 0 = every whole chunk */
  int32_t ref_top_k; /* -1 = exact KL unless a chunk would store > 64M values
                        (then 256, a lower bound); 0 = exact; k = top-k bound */
} hqekv_compare_params;

HQEKV_API hqekv_compare_params hqekv_compare_default_params(void);

typedef struct hqekv_compare_result {
  int32_t n_chunks, n_ctx, n_prefill;
  int64_t n_scored;                /* next-token predictions compared */
  double ppl_ref, ppl_test;        /* perplexity of the scored tokens */
  double kl_mean, kl_stderr;       /* KL(ref || test), nats per token */
  double kl_p99, kl_max;           /* over the scored positions */
  double top1_agree, top1_stderr;  /* fraction with the same argmax */
  int32_t kl_is_top_k_bound;       /* 1: KL over the ref's top-k + one bucket */
  hqekv_kv_stats kv_after_prefill; /* the test cache after the last chunk's prefill */
  hqekv_kv_stats kv_end;           /* ... and after its last token */
  hqekv_kv_stats ref_kv_end;       /* the reference cache at the same point */
} hqekv_compare_result;

/* Scores kv_spec against ref_spec (NULL: "fp16") on tokens[0..n). params
 * NULL: the defaults. Errors: HQEKV_ERR_SPEC (either spec),
 * HQEKV_ERR_INVALID_ARGUMENT (too few tokens, a prefill that leaves nothing
 * to score, a token outside the vocabulary), HQEKV_ERR_COMPUTE. */
HQEKV_API hqekv_status hqekv_compare(const hqekv_model* model, const int32_t* tokens, size_t n,
                                     const char* kv_spec, const char* ref_spec,
                                     const hqekv_compare_params* params, hqekv_compare_result* out);
HQEKV_API hqekv_status hqekv_kv_reset(hqekv_kv* kv);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HQEKV_HQEKV_H_ */
