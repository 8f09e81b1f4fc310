/* Many sequences in one context through the C API, compiled as C99 against
 * libhqekv.so:
 *   c_batch_test MODEL
 * Four sequences under two KV policies (fp16 and llama.cpp's q4_0 pair) run
 * their prompts and then 24 greedy steps through ONE hqekv_decode_batch call
 * per step; every sequence's tokens equal a separate single-sequence context
 * under the same policy. Also: per-position logits and top-k log-probs,
 * sequence copy (exact) and truncate (rewind), per-sequence state, the
 * vocabulary and GGUF metadata calls, and errors for bad ids and unasked
 * logits. Exit 0 when every check holds. */
#include <hqekv/hqekv.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_check.h"

#define NSEQ 4
#define STEPS 24
#define MAXP 16

static const char* kSpecs[NSEQ] = {"fp16", "llama:ctk=q4_0,ctv=q4_0", "fp16",
                                   "llama:ctk=q4_0,ctv=q4_0"};
static const char* kPrompts[NSEQ] = {"Once upon a time", "The history of the", "In the year",
                                     "The river"};

/* An abort callback that lets `*left` calls through, then asks to stop. */
static int abort_after(void* user) {
  int* left = (int*)user;
  return (*left)-- <= 0;
}

static int argmax(const float* v, int n) {
  int best = 0, i;
  for (i = 1; i < n; ++i)
    if (v[i] > v[best]) best = i;
  return best;
}

/* Greedy tokens of one prompt in its own context: the reference. */
static void single_run(const hqekv_model* m, const char* spec, const int32_t* prompt, int np,
                       int32_t* out) {
  hqekv_context* c = NULL;
  hqekv_sampler* s = NULL;
  hqekv_sampler_params p = hqekv_sampler_greedy_params();
  int i;
  REQUIRE_OK(hqekv_context_create(m, spec, 256, &c));
  REQUIRE_OK(hqekv_sampler_create(&p, &s));
  REQUIRE_OK(hqekv_decode(c, prompt, np));
  for (i = 0; i < STEPS; ++i) {
    REQUIRE_OK(hqekv_sampler_sample(s, c, &out[i]));
    REQUIRE_OK(hqekv_decode(c, &out[i], 1));
  }
  hqekv_sampler_free(s);
  hqekv_context_free(c);
}

int main(int argc, char** argv) {
  hqekv_model* m = NULL;
  hqekv_context* ctx = NULL;
  hqekv_sampler* greedy = NULL;
  hqekv_sampler_params gp = hqekv_sampler_greedy_params();
  hqekv_seq_id ids[NSEQ], copy = -1;
  int32_t prompts[NSEQ][MAXP], ref[NSEQ][STEPS], got[NSEQ][STEPS];
  size_t np[NSEQ], n = 0, len = 0;
  hqekv_seq_id bseq[NSEQ * MAXP];
  int32_t btok[NSEQ * MAXP];
  int8_t want[NSEQ * MAXP];
  int i, k, step, vocab = 0, same = 1;
  const float* row = NULL;
  char text[256];
  if (argc != 2) {
    fprintf(stderr, "usage: c_batch_test MODEL\n");
    return 2;
  }
  REQUIRE_OK(hqekv_set_threads(1));
  REQUIRE_OK(hqekv_model_load(argv[1], NULL, &m));
  for (i = 0; i < NSEQ; ++i) {
    REQUIRE_OK(hqekv_tokenize(m, kPrompts[i], strlen(kPrompts[i]), 1, 0, prompts[i], MAXP, &np[i]));
    single_run(m, kSpecs[i], prompts[i], (int)np[i], ref[i]);
  }

  /* One context: sequence 0 is the context's own (fp16), three more added. */
  REQUIRE_OK(hqekv_context_create(m, kSpecs[0], 256, &ctx));
  REQUIRE_OK(hqekv_sampler_create(&gp, &greedy));
  ids[0] = 0;
  for (i = 1; i < NSEQ; ++i) REQUIRE_OK(hqekv_seq_add(ctx, kSpecs[i], &ids[i]));
  CHECK(strcmp(hqekv_seq_kv_describe(ctx, ids[1]), hqekv_seq_kv_describe(ctx, ids[2])) != 0);

  /* Prompts of all four in one batch; logits of every position of sequence 1. */
  for (i = 0; i < NSEQ; ++i) {
    for (k = 0; k < (int)np[i]; ++k) {
      bseq[n] = ids[i];
      btok[n] = prompts[i][k];
      want[n] = (int8_t)(i == 1 || k + 1 == (int)np[i]);
      ++n;
    }
  }
  REQUIRE_OK(hqekv_decode_batch(ctx, bseq, btok, want, (int)n));
  /* Sequence 1's per-position logits predict its own next prompt tokens' ranks sanely:
   * the last row equals the row the single context would sample from. */
  REQUIRE_OK(hqekv_get_logits_ith(ctx, (int)(np[0] + np[1] - 1), &row, &vocab));
  CHECK(argmax(row, vocab) == ref[1][0]);
  {
    int32_t top[5];
    float lp[5];
    REQUIRE_OK(hqekv_get_top_logprobs_ith(ctx, (int)np[0], 5, top, lp));
    REQUIRE_OK(hqekv_get_logits_ith(ctx, (int)np[0], &row, &vocab));
    CHECK(top[0] == argmax(row, vocab));
    CHECK(lp[0] <= 0.0f && lp[0] >= lp[1] && lp[1] >= lp[4]);
  }
  CHECK_ERR(hqekv_get_logits_ith(ctx, 0, &row, &vocab), HQEKV_ERR_STATE, "not asked for");
  CHECK_ERR(hqekv_get_logits_ith(ctx, (int)n, &row, &vocab), HQEKV_ERR_INVALID_ARGUMENT, "outside");

  /* Greedy steps: one batch of four tokens per step. */
  for (step = 0; step < STEPS; ++step) {
    for (i = 0; i < NSEQ; ++i) {
      REQUIRE_OK(hqekv_seq_sample(greedy, ctx, ids[i], &got[i][step]));
      bseq[i] = ids[i];
      btok[i] = got[i][step];
    }
    REQUIRE_OK(hqekv_decode_batch(ctx, bseq, btok, NULL, NSEQ));
  }
  for (i = 0; i < NSEQ; ++i) {
    if (memcmp(got[i], ref[i], sizeof got[i]) != 0) {
      fprintf(stderr, "sequence %d (%s): batched tokens differ from the single context's\n", i,
              kSpecs[i]);
      same = 0;
    }
    CHECK(hqekv_seq_n_past(ctx, ids[i]) == (int)np[i] + STEPS);
  }
  CHECK(same);
  {
    hqekv_kv_stats a, b;
    REQUIRE_OK(hqekv_seq_kv_stats(ctx, ids[0], &a));
    REQUIRE_OK(hqekv_seq_kv_stats(ctx, ids[1], &b));
    CHECK(b.bytes_total * 3 < a.bytes_total); /* q4_0 blocks against fp16 */
  }

  /* Copy: the same next logits as the original, bit for bit. */
  REQUIRE_OK(hqekv_seq_copy(ctx, ids[1], &copy));
  CHECK(hqekv_seq_n_past(ctx, copy) == hqekv_seq_n_past(ctx, ids[1]));
  bseq[0] = ids[1];
  bseq[1] = copy;
  btok[0] = btok[1] = 42;
  REQUIRE_OK(hqekv_decode_batch(ctx, bseq, btok, NULL, 2));
  {
    const float *ra = NULL, *rb = NULL;
    REQUIRE_OK(hqekv_get_logits_ith(ctx, 0, &ra, &vocab));
    REQUIRE_OK(hqekv_get_logits_ith(ctx, 1, &rb, &vocab));
    CHECK(memcmp(ra, rb, sizeof(float) * (size_t)vocab) == 0);
  }

  /* Per-sequence state: sequence 2's bytes loaded into a new fp16 sequence. */
  {
    hqekv_seq_id s2 = -1;
    uint8_t* buf;
    CHECK_ERR(hqekv_seq_state_get_data(ctx, ids[2], NULL, 0, &len), HQEKV_ERR_BUFFER_TOO_SMALL,
              "needs");
    buf = (uint8_t*)malloc(len);
    REQUIRE_OK(hqekv_seq_state_get_data(ctx, ids[2], buf, len, &len));
    REQUIRE_OK(hqekv_seq_add(ctx, "fp16", &s2));
    REQUIRE_OK(hqekv_seq_state_set_data(ctx, s2, buf, len));
    CHECK(hqekv_seq_n_past(ctx, s2) == hqekv_seq_n_past(ctx, ids[2]));
    CHECK_ERR(hqekv_seq_state_set_data(ctx, ids[1], buf, len), HQEKV_ERR_LOAD, "");
    free(buf);
    REQUIRE_OK(hqekv_seq_remove(ctx, s2));
    CHECK(hqekv_seq_n_past(ctx, s2) == -1);
  }

  /* Truncate (rewind) sequence 2 to its prompt: the next greedy token is the first again. */
  REQUIRE_OK(hqekv_seq_truncate(ctx, ids[2], (int)np[2]));
  CHECK(hqekv_seq_n_past(ctx, ids[2]) == (int)np[2]);
  {
    int32_t t = -1;
    REQUIRE_OK(hqekv_seq_sample(greedy, ctx, ids[2], &t));
    CHECK(t == ref[2][0]);
  }
  CHECK_ERR(hqekv_seq_truncate(ctx, ids[2], 1000), HQEKV_ERR_INVALID_ARGUMENT, "outside");

  /* Bad ids, a full sequence, NULLs. */
  bseq[0] = 999;
  btok[0] = 1;
  CHECK_ERR(hqekv_decode_batch(ctx, bseq, btok, NULL, 1), HQEKV_ERR_INVALID_ARGUMENT,
            "no sequence 999");
  CHECK_ERR(hqekv_seq_add(ctx, "nonsense:x=1", &copy), HQEKV_ERR_SPEC, "kv spec");
  CHECK_ERR(hqekv_seq_remove(ctx, 12345), HQEKV_ERR_INVALID_ARGUMENT, "no sequence 12345");
  CHECK_ERR(hqekv_decode_batch(ctx, NULL, btok, NULL, 1), HQEKV_ERR_INVALID_ARGUMENT, "NULL");

  /* Vocabulary and metadata. */
  REQUIRE_OK(hqekv_token_get_text(m, hqekv_model_bos(m), text, sizeof text, &len));
  CHECK(len > 0 && hqekv_token_is_control(m, hqekv_model_bos(m)) == 1);
  CHECK(hqekv_token_is_control(m, -5) == 0);
  CHECK(hqekv_model_meta_count(m) > 5);
  REQUIRE_OK(hqekv_model_meta_val_str(m, "general.architecture", text, sizeof text, &len));
  CHECK(strcmp(text, "llama") == 0);
  REQUIRE_OK(hqekv_model_meta_key_by_index(m, 0, text, sizeof text, &len));
  CHECK(len > 0);
  CHECK_ERR(hqekv_model_meta_val_str(m, "no.such.key", text, sizeof text, &len),
            HQEKV_ERR_INVALID_ARGUMENT, "no.such.key");

  /* Abort callback: generation stops after 3 tokens, which stay emitted and decoded. */
  {
    hqekv_context* c = NULL;
    int left = 3;
    int32_t out[10];
    size_t n_out = 0;
    REQUIRE_OK(hqekv_context_create(m, "fp16", 256, &c));
    REQUIRE_OK(hqekv_decode(c, prompts[0], (int)np[0]));
    REQUIRE_OK(hqekv_context_set_abort_callback(c, abort_after, &left));
    CHECK_ERR(hqekv_generate(c, greedy, 10, out, 10, &n_out), HQEKV_ERR_ABORTED, "abort callback");
    CHECK(n_out == 3 && memcmp(out, ref[0], 3 * sizeof(int32_t)) == 0);
    CHECK(hqekv_context_n_past(c) == (int)np[0] + 3);
    CHECK_ERR(hqekv_decode(c, out, 1), HQEKV_ERR_ABORTED, "abort callback");
    CHECK(hqekv_context_n_past(c) == (int)np[0] + 3);
    CHECK(strcmp(hqekv_status_name(HQEKV_ERR_ABORTED), "HQEKV_ERR_ABORTED") == 0);
    REQUIRE_OK(hqekv_context_set_abort_callback(c, NULL, NULL));
    REQUIRE_OK(hqekv_decode(c, &ref[0][3], 1));
    hqekv_context_free(c);
  }

  /* Logit bias and penalties on a sampler (the chain of `hqekv run` and the server). */
  {
    hqekv_context* c = NULL;
    hqekv_sampler* s = NULL;
    int32_t t = -1, ban = ref[0][0], five = 5;
    float minus_inf = -INFINITY, big = 1000.0f, nan = NAN;
    REQUIRE_OK(hqekv_context_create(m, "fp16", 256, &c));
    REQUIRE_OK(hqekv_decode(c, prompts[0], (int)np[0]));
    REQUIRE_OK(hqekv_sampler_create(&gp, &s));
    REQUIRE_OK(hqekv_sampler_set_logit_bias(s, &ban, &minus_inf, 1));
    REQUIRE_OK(hqekv_sampler_sample(s, c, &t));
    CHECK(t != ref[0][0]);
    REQUIRE_OK(hqekv_sampler_set_logit_bias(s, &five, &big, 1));
    REQUIRE_OK(hqekv_sampler_sample(s, c, &t));
    CHECK(t == 5);
    CHECK_ERR(hqekv_sampler_set_logit_bias(s, &five, &nan, 1), HQEKV_ERR_INVALID_ARGUMENT,
              "finite");
    CHECK_ERR(hqekv_sampler_set_penalties(s, nan, 0.0f), HQEKV_ERR_INVALID_ARGUMENT, "finite");
    REQUIRE_OK(hqekv_sampler_set_logit_bias(s, NULL, NULL, 0));
    REQUIRE_OK(hqekv_sampler_set_penalties(s, 0.5f, 0.5f));
    REQUIRE_OK(hqekv_sampler_sample(s, c, &t));
    CHECK(t >= 0 && t < vocab);
    hqekv_sampler_free(s);
    hqekv_context_free(c);
  }

  hqekv_sampler_free(greedy);
  hqekv_context_free(ctx);
  hqekv_model_free(m);
  if (failures == 0)
    printf("4 sequences, 2 policies, %d batched steps: equal to single runs\n", STEPS);
  return failures == 0 ? 0 : 1;
}
