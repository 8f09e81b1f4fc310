// Request parsing and validation of `hqekv serve` (server/request.h) and the
// stop-string scanner (tokenizer/stop_text.h).
#include <gtest/gtest.h>

#include <iterator>
#include <string>

#include "server/request.h"
#include "tokenizer/stop_text.h"

namespace hqekv::server {
namespace {

RequestLimits Limits() {
  RequestLimits l;
  l.ctx = 512;
  l.n_slots = 4;
  return l;
}

// Parses; returns the error (status 0 when the body was accepted).
ApiError Parse(const std::string& body, bool chat, CompletionRequest* out = nullptr) {
  CompletionRequest r;
  ApiError err;
  err.status = 0;
  if (ParseCompletionRequest(body, chat, Limits(), &r, &err) && out) *out = r;
  return err;
}

TEST(Request, CompletionFieldsAreRead) {
  CompletionRequest r;
  ASSERT_EQ(Parse(R"({"prompt":"Once","max_tokens":7,"temperature":0,"top_p":0.9,"top_k":5,
      "min_p":0.1,"seed":42,"stop":["\n","x"],"stream":true,"logprobs":3,"kv":"hqekv:bits=3",
      "id_slot":2,"unknown_field":{"a":1}})",
                  false, &r)
                .status,
            0);
  EXPECT_EQ(r.prompt, "Once");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.sampler.temperature, 0.0f);
  EXPECT_FLOAT_EQ(r.sampler.top_p, 0.9f);
  EXPECT_EQ(r.sampler.top_k, 5);
  EXPECT_FLOAT_EQ(r.sampler.min_p, 0.1f);
  EXPECT_EQ(r.sampler.seed, 42u);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"\n", "x"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_EQ(r.kv, "hqekv:bits=3");
  EXPECT_EQ(r.id_slot, 2);
}

TEST(Request, DefaultsFollowOpenAI) {
  CompletionRequest r;
  ASSERT_EQ(Parse(R"({"prompt":["one prompt"]})", false, &r).status, 0);
  EXPECT_EQ(r.prompt, "one prompt");
  EXPECT_EQ(r.sampler.temperature, 1.0f);
  EXPECT_EQ(r.max_tokens, 0);  // the server's default
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.logprobs);
  EXPECT_EQ(r.id_slot, -1);
}

TEST(Request, ChatMessagesAndTextParts) {
  CompletionRequest r;
  ASSERT_EQ(Parse(R"({"messages":[{"role":"system","content":"Be brief."},
      {"role":"user","content":[{"type":"text","text":"Hi "},{"type":"text","text":"there"}]}],
      "logprobs":true,"top_logprobs":2})",
                  true, &r)
                .status,
            0);
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "Hi there");
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 2);
}

TEST(Request, BadBodiesAre400NamingTheField) {
  struct Case {
    const char* body;
    bool chat;
    const char* param;
  };
  const Case cases[] = {
      {R"({"prompt": "x",)", false, ""},          // malformed JSON
      {R"([1, 2])", false, ""},                   // not an object
      {R"({"max_tokens": 5})", false, "prompt"},  // no prompt
      {R"({"prompt": 5})", false, "prompt"},      // wrong type
      {R"({"prompt": "x", "max_tokens": "5"})", false, "max_tokens"},
      {R"({"prompt": "x", "max_tokens": 0})", false, "max_tokens"},
      {R"({"prompt": "x", "max_tokens": 1000000000})", false, "max_tokens"},  // > ctx
      {R"({"prompt": "x", "max_tokens": 99999999999999999999})", false, "max_tokens"},
      {R"({"prompt": "x", "temperature": -1})", false, "temperature"},
      {R"({"prompt": "x", "temperature": "hot"})", false, "temperature"},
      {R"({"prompt": "x", "top_p": 1.5})", false, "top_p"},
      {R"({"prompt": "x", "top_k": 2.5})", false, "top_k"},
      {R"({"prompt": "x", "seed": -3})", false, "seed"},
      {R"({"prompt": "x", "stream": "yes"})", false, "stream"},
      {R"({"prompt": "x", "stop": [1]})", false, "stop"},
      {R"({"prompt": "x", "stop": ["a","b","c","d","e"]})", false, "stop"},
      {R"({"prompt": "x", "logprobs": 21})", false, "logprobs"},
      {R"({"prompt": "x", "kv": "hqekv:bits=banana"})", false, "kv"},
      {R"({"prompt": "x", "kv": "nosuchpolicy"})", false, "kv"},
      {R"({"prompt": "x", "kv": 3})", false, "kv"},
      {R"({"prompt": "x", "id_slot": 4})", false, "id_slot"},
      {R"({"messages": []})", true, "messages"},
      {R"({"messages": [{"role":"robot","content":"x"}]})", true, "messages"},
      {R"({"messages": [{"role":"user"}]})", true, "messages"},
      {R"({"messages": [{"role":"user","content":[{"type":"image_url"}]}]})", true, "messages"},
      {R"({"messages": [{"role":"user","content":"x"}], "logprobs": 3})", true, "logprobs"},
  };
  for (const Case& c : cases) {
    const ApiError e = Parse(c.body, c.chat);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.type, "invalid_request_error") << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_FALSE(e.message.empty()) << c.body;
  }
}

TEST(Request, UnsupportedParametersAre400NamingThemUnlessNeutral) {
  const char* refused[] = {
      R"({"prompt":"x","tools":[{"type":"function","function":{"name":"f"}}]})",
      R"({"prompt":"x","tool_choice":"auto"})",
      R"({"prompt":"x","response_format":{"type":"json_object"}})",
      R"({"prompt":"x","grammar":"root ::= \"a\""})",
      R"({"prompt":"x","suffix":"tail"})",
      R"({"prompt":"x","json_schema":{"type":"object"}})",
      R"({"prompt":"x","mirostat":2})",
      R"({"prompt":"x","typical_p":0.5})",
      R"({"prompt":"x","n":2,"best_of":3})",
      R"({"prompt":"x","echo":true,"logprobs":1})",
  };
  const char* params[] = {"tools",       "tool_choice", "response_format", "grammar", "suffix",
                          "json_schema", "mirostat",    "typical_p",       "best_of", "echo"};
  for (size_t i = 0; i < std::size(refused); ++i) {
    const ApiError e = Parse(refused[i], false);
    EXPECT_EQ(e.status, 400) << refused[i];
    EXPECT_EQ(e.param, params[i]) << refused[i];
    EXPECT_EQ(e.code, "unsupported_parameter") << refused[i];
    EXPECT_NE(e.message.find("not supported"), std::string::npos) << e.message;
  }
  EXPECT_EQ(Parse(R"({"messages":[{"role":"user","content":"x"}],"echo":true})", true).param,
            "echo");
  // Neutral values change nothing: accepted.
  EXPECT_EQ(Parse(R"({"prompt":"x","tools":[],"tool_choice":"none","response_format":
      {"type":"text"},"grammar":"","suffix":null,"mirostat":0,"typical_p":1,"n":2,
      "best_of":2})",
                  false)
                .status,
            0);
}

TEST(Request, ChoicesPenaltiesLogitBiasEchoAndTokenPrompts) {
  CompletionRequest r;
  ASSERT_EQ(Parse(R"({"prompt":[[5, 6, 7]],"n":3,"echo":true,"presence_penalty":0.5,
      "frequency_penalty":-1,"logit_bias":{"12":-100,"3":2.5},"repeat_penalty":1.1,
      "repeat_last_n":16})",
                  false, &r)
                .status,
            0);
  EXPECT_TRUE(r.prompt_is_tokens);
  EXPECT_EQ(r.prompt_tokens, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(r.n, 3);
  EXPECT_TRUE(r.echo);
  EXPECT_FLOAT_EQ(r.sampler.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(r.sampler.frequency_penalty, -1.0f);
  EXPECT_FLOAT_EQ(r.sampler.repeat_penalty, 1.1f);
  EXPECT_EQ(r.sampler.repeat_last_n, 16);
  ASSERT_EQ(r.sampler.logit_bias.size(), 2u);
  // llama-server's array form; false bans.
  ASSERT_EQ(Parse(R"({"prompt":[1,2],"logit_bias":[[4,false],[9,1]]})", false, &r).status, 0);
  EXPECT_EQ(r.prompt_tokens, (std::vector<int32_t>{1, 2}));
  ASSERT_EQ(r.sampler.logit_bias.size(), 2u);
  EXPECT_EQ(r.sampler.logit_bias[0].first, 4);
  EXPECT_EQ(r.sampler.logit_bias[0].second, kLogitBan);
  RequestLimits lim = Limits();
  lim.vocab = 100;
  ApiError e;
  CompletionRequest q;
  EXPECT_FALSE(ParseCompletionRequest(R"({"prompt":[1,100]})", false, lim, &q, &e));
  EXPECT_EQ(e.param, "prompt");
  EXPECT_FALSE(
      ParseCompletionRequest(R"({"prompt":"x","logit_bias":{"100":1}})", false, lim, &q, &e));
  EXPECT_EQ(e.param, "logit_bias");
  for (const char* body : {R"({"prompt":"x","n":0})", R"({"prompt":"x","n":17})",
                           R"({"prompt":"x","n":2,"id_slot":0})"})
    EXPECT_EQ(Parse(body, false).param, "n") << body;
  for (const char* body :
       {R"({"prompt":"x","logit_bias":{"a":1}})", R"({"prompt":"x","logit_bias":{"1":101}})",
        R"({"prompt":"x","logit_bias":[[1]]})", R"({"prompt":"x","logit_bias":"no"})",
        R"({"prompt":"x","logit_bias":{"1":true}})"})
    EXPECT_EQ(Parse(body, false).param, "logit_bias") << body;
  for (const char* body :
       {R"({"prompt":"x","presence_penalty":2.5})", R"({"prompt":"x","frequency_penalty":"lots"})"})
    EXPECT_EQ(Parse(body, false).status, 400) << body;
  EXPECT_EQ(Parse(R"({"prompt":["a","b"]})", false).param, "prompt");  // one prompt a request
  EXPECT_EQ(Parse(R"({"prompt":[1.5]})", false).param, "prompt");
}

TEST(Request, NativeCompletionUsesLlamaServersDefaults) {
  CompletionRequest r;
  ApiError e;
  ASSERT_TRUE(ParseCompletionRequest(R"({"prompt":"x","n_predict":-1})", RequestKind::kNative,
                                     Limits(), &r, &e))
      << e.message;
  EXPECT_EQ(r.max_tokens, 0);  // -1: the server's default
  EXPECT_FLOAT_EQ(r.sampler.temperature, kRunSamplerDefaults.temperature);
  EXPECT_EQ(r.sampler.top_k, kRunSamplerDefaults.top_k);
  EXPECT_FLOAT_EQ(r.sampler.min_p, kRunSamplerDefaults.min_p);
  ASSERT_TRUE(ParseCompletionRequest(R"({"prompt":"x","n_predict":7,"temperature":0})",
                                     RequestKind::kNative, Limits(), &r, &e));
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.sampler.temperature, 0.0f);
}

TEST(Request, ErrorJsonHasOpenAIShape) {
  const ApiError e = BadRequest("bad 'kv'", "kv");
  EXPECT_EQ(
      e.ToJson(),
      R"({"error":{"code":null,"message":"bad 'kv'","param":"kv","type":"invalid_request_error"}})");
}

TEST(StopText, HoldsBackOnlyWhatAStopCouldClaim) {
  StopText s({"END", "\n\n"});
  EXPECT_FALSE(s.Add("Hello E"));
  EXPECT_EQ(s.Release(), "Hello");  // " E" could still start "END"
  EXPECT_FALSE(s.Add("N"));
  EXPECT_EQ(s.Release(), " ");
  EXPECT_TRUE(s.Add("D and more"));
  EXPECT_EQ(s.Flush(), "");  // the text stops before "END"
}

TEST(StopText, NoStopsReleasesEverything) {
  StopText s({});
  EXPECT_FALSE(s.Add("a"));
  EXPECT_EQ(s.Release(), "a");
  EXPECT_FALSE(s.Add("b"));
  EXPECT_EQ(s.Flush(), "b");
}

}  // namespace
}  // namespace hqekv::server
