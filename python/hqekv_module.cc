// Python bindings of hqekv over its C API (include/hqekv/hqekv.h):
// The extension `hqekv._hqekv`; the package python/hqekv/ re-exports it and
// adds the high-level API (Model.generate / chat / perplexity, pareto):
//   import hqekv
//   m = hqekv.Model("models/stories260K.gguf")
//   ctx = m.context(kv="kivi:nominal_bits=2", n_ctx=512)
//   text = ctx.generate("Once upon a time", max_new=40)   # greedy by default
//   ctx.kv_stats()                                         # bytes, true bits
//   codes, meta = hqekv.quantize(x, "u4"); y = hqekv.dequantize(codes, meta, "u4", *x.shape)
// Library errors raise hqekv.Error with the library's message; wrong numpy
// dtypes / shapes raise ValueError. Compute releases the GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hqekv/hqekv.h"

namespace py = pybind11;

namespace {

// hqekv.Error, set at module init.
PyObject* g_error = nullptr;

struct LibraryError {
  std::string message;
};

void Check(hqekv_status s) {
  if (s != HQEKV_OK)
    throw LibraryError{std::string(hqekv_status_name(s)) + ": " + hqekv_last_error()};
}

// A string for a C API `const char*`: one with an embedded NUL would be cut
// there (a path or spec silently shortened), so it is refused.
const char* CStr(const std::string& s, const char* what) {
  if (s.find('\0') != std::string::npos)
    throw py::value_error(std::string(what) + ": embedded NUL character");
  return s.c_str();
}

// An array extent or element count as the C API's int, refused past INT_MAX
// instead of wrapping.
int IntSize(py::ssize_t n, const char* what) {
  if (n < 0 || n > std::numeric_limits<int>::max())
    throw py::value_error(std::string(what) + ": " + std::to_string(n) + " is more than " +
                          std::to_string(std::numeric_limits<int>::max()));
  return static_cast<int>(n);
}

// Reads a (buf, cap, len) string of the C API.
template <class Fn>
std::string ReadString(Fn fn) {
  size_t len = 0;
  hqekv_status s = fn(nullptr, 0, &len);
  if (s != HQEKV_OK && s != HQEKV_ERR_BUFFER_TOO_SMALL) Check(s);
  std::string out(len + 1, '\0');
  Check(fn(out.data(), out.size(), &len));
  out.resize(len);
  return out;
}

py::dict StatsDict(const hqekv_kv_stats& st) {
  py::dict d;
  d["bytes_total"] = st.bytes_total;
  d["bytes_payload"] = st.bytes_payload;
  d["bytes_metadata"] = st.bytes_metadata;
  d["bytes_bookkeeping"] = st.bytes_bookkeeping;
  d["bytes_residual"] = st.bytes_residual;
  d["kept_elements"] = st.kept_elements;
  d["original_elements"] = st.original_elements;
  d["true_bits"] = st.true_bits;
  d["bits_per_original"] = st.bits_per_original;
  d["n_layers"] = st.n_layers;
  return d;
}

py::object JsonLoads(const std::string& s) { return py::module_::import("json").attr("loads")(s); }

// Owns a model handle; shared with the contexts made from it (the C API lets
// the model go first, but Python users read metadata through ctx.model).
struct Model {
  std::shared_ptr<hqekv_model> h;
};

struct Context {
  std::shared_ptr<hqekv_model> model;
  std::unique_ptr<hqekv_context, void (*)(hqekv_context*)> h{nullptr, hqekv_context_free};
  int last_batch = 0;  // tokens of the last decode() (rows of embeddings())
};

hqekv_sampler_params SamplerParams(float temperature, int top_k, float top_p, float min_p,
                                   float repeat_penalty, int repeat_last_n, uint64_t seed) {
  hqekv_sampler_params p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.repeat_penalty = repeat_penalty;
  p.repeat_last_n = repeat_last_n;
  p.seed = seed;
  return p;
}

std::vector<int32_t> Tokenize(const hqekv_model* m, const std::string& text, bool add_bos,
                              bool parse_special) {
  size_t n = 0;
  hqekv_status s =
      hqekv_tokenize(m, text.data(), text.size(), add_bos, parse_special, nullptr, 0, &n);
  if (s != HQEKV_OK && s != HQEKV_ERR_BUFFER_TOO_SMALL) Check(s);
  std::vector<int32_t> ids(n);
  Check(hqekv_tokenize(m, text.data(), text.size(), add_bos, parse_special, ids.data(), ids.size(),
                       &n));
  return ids;
}

std::string Detokenize(const hqekv_model* m, const std::vector<int32_t>& ids, int32_t prev) {
  return ReadString([&](char* b, size_t c, size_t* l) {
    return hqekv_detokenize(m, ids.data(), ids.size(), prev, b, c, l);
  });
}

// hqekv_chat_apply_template over [{"role": ..., "content": ...}, ...].
std::string ApplyChatTemplate(const hqekv_model* m, const py::list& messages,
                              const std::optional<std::string>& tmpl, bool add_assistant) {
  std::vector<std::string> roles, contents;
  for (const py::handle& item : messages) {
    const py::dict d = py::cast<py::dict>(item);
    if (!d.contains("role") || !d.contains("content"))
      throw py::value_error("chat messages are dicts with 'role' and 'content'");
    roles.push_back(py::cast<std::string>(d["role"]));
    contents.push_back(py::cast<std::string>(d["content"]));
  }
  std::vector<hqekv_chat_message> msgs(roles.size());
  for (size_t i = 0; i < msgs.size(); ++i)
    msgs[i] = {CStr(roles[i], "chat message role"), CStr(contents[i], "chat message content")};
  const char* t = tmpl ? CStr(*tmpl, "chat template") : nullptr;
  return ReadString([&](char* b, size_t c, size_t* l) {
    return hqekv_chat_apply_template(m, t, msgs.data(), msgs.size(), add_assistant, b, c, l);
  });
}

struct Sampler {
  std::unique_ptr<hqekv_sampler, void (*)(hqekv_sampler*)> h{nullptr, hqekv_sampler_free};
};

struct KvFree {
  void operator()(hqekv_kv* kv) const { hqekv_kv_free(kv); }
};
// The geometry is kept here: every array handed to the C API is checked
// against it (the C API trusts its pointers to hold the store's shape).
struct KvStore {
  std::unique_ptr<hqekv_kv, KvFree> h;
  hqekv_kv_geometry g{};
};

using FloatArray = py::array_t<float, py::array::c_style>;
using ByteArray = py::array_t<uint8_t, py::array::c_style>;

// A C-contiguous float32 array of exactly `shape` (no silent conversion:
// a wrong dtype is an error, so the zero-copy promise holds).
FloatArray RequireFloat(const py::array& a, const std::vector<py::ssize_t>& shape,
                        const char* what) {
  if (!a.dtype().is(py::dtype::of<float>())) {
    throw py::value_error(std::string(what) + ": expected dtype float32, got " +
                          std::string(py::str(a.dtype())));
  }
  if (!(a.flags() & py::array::c_style))
    throw py::value_error(std::string(what) + ": expected a C-contiguous array");
  bool ok = a.ndim() == static_cast<py::ssize_t>(shape.size());
  for (size_t i = 0; ok && i < shape.size(); ++i) ok = a.shape(i) == shape[i];
  if (!ok) {
    std::string want = "(", got = "(";
    for (auto s : shape) want += std::to_string(s) + ",";
    for (py::ssize_t i = 0; i < a.ndim(); ++i) got += std::to_string(a.shape(i)) + ",";
    throw py::value_error(std::string(what) + ": expected shape " + want + ") got " + got + ")");
  }
  return py::reinterpret_borrow<FloatArray>(a);
}

}  // namespace

PYBIND11_MODULE(_hqekv, mod) {
  mod.doc() =
      "hqekv's binding over its C API (include/hqekv/hqekv.h); import the package `hqekv`, which "
      "re-exports these names next to the high-level API.";
  static py::exception<LibraryError> error(mod, "Error", PyExc_RuntimeError);
  g_error = error.ptr();
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const LibraryError& e) {
      PyErr_SetString(g_error, e.message.c_str());
    }
  });
  mod.attr("__version__") = hqekv_version();
  mod.attr("api_version") = hqekv_api_version();
  mod.def(
      "apply_chat_template",
      [](const py::list& messages, const std::string& tmpl, bool add_generation_prompt) {
        return ApplyChatTemplate(nullptr, messages, tmpl, add_generation_prompt);
      },
      py::arg("messages"), py::arg("template"), py::arg("add_generation_prompt") = true,
      "Prompt text of a conversation with a chat family (chatml, llama3, phi3, gemma) or Jinja "
      "template source, without a model.");
  mod.def(
      "set_threads", [](int n) { Check(hqekv_set_threads(n)); }, py::arg("n"),
      "Threads of the compute pool (0 = all cores); results are reproducible for a fixed count.");

  py::class_<Model>(mod, "Model", "A model file (GGUF or llama2.c checkpoint), memory-mapped.")
      .def(py::init([](const std::string& path, const std::string& tokenizer) {
             hqekv_model* m = nullptr;
             Check(hqekv_model_load(
                 CStr(path, "Model: path"),
                 tokenizer.empty() ? nullptr : CStr(tokenizer, "Model: tokenizer"), &m));
             return Model{std::shared_ptr<hqekv_model>(m, hqekv_model_free)};
           }),
           py::arg("path"), py::arg("tokenizer") = "")
      .def_property_readonly(
          "name", [](const Model& m) { return std::string(hqekv_model_name(m.h.get())); })
      .def_property_readonly(
          "arch", [](const Model& m) { return std::string(hqekv_model_arch(m.h.get())); })
      .def_property_readonly(
          "identity", [](const Model& m) { return std::string(hqekv_model_identity(m.h.get())); })
      .def_property_readonly("n_vocab",
                             [](const Model& m) { return hqekv_model_n_vocab(m.h.get()); })
      .def_property_readonly("n_layers",
                             [](const Model& m) { return hqekv_model_n_layers(m.h.get()); })
      .def_property_readonly("n_embd", [](const Model& m) { return hqekv_model_n_embd(m.h.get()); })
      .def_property_readonly("n_heads",
                             [](const Model& m) { return hqekv_model_n_heads(m.h.get()); })
      .def_property_readonly("n_kv_heads",
                             [](const Model& m) { return hqekv_model_n_kv_heads(m.h.get()); })
      .def_property_readonly("head_dim",
                             [](const Model& m) { return hqekv_model_head_dim(m.h.get()); })
      .def_property_readonly("n_ctx_train",
                             [](const Model& m) { return hqekv_model_n_ctx_train(m.h.get()); })
      .def_property_readonly("n_params",
                             [](const Model& m) { return hqekv_model_n_params(m.h.get()); })
      .def_property_readonly("bos", [](const Model& m) { return hqekv_model_bos(m.h.get()); })
      .def_property_readonly("add_bos",
                             [](const Model& m) { return hqekv_model_add_bos(m.h.get()) != 0; })
      .def(
          "is_eog",
          [](const Model& m, int32_t token) { return hqekv_model_is_eog(m.h.get(), token) != 0; },
          py::arg("token"), "True for an end-of-generation token (EOS, EOT, EOM).")
      .def(
          "compare_tokens",
          [](const Model& m, const std::vector<int32_t>& tokens, const std::string& kv,
             const std::string& ref, int n_ctx, int n_prefill, int n_chunks, int ref_top_k) {
            hqekv_compare_params p = hqekv_compare_default_params();
            p.n_ctx = n_ctx;
            p.n_prefill = n_prefill;
            p.n_chunks = n_chunks;
            p.ref_top_k = ref_top_k;
            hqekv_compare_result r{};
            const char* k = CStr(kv, "compare: kv");
            const char* b = CStr(ref, "compare: ref");
            {
              py::gil_scoped_release nogil;
              Check(hqekv_compare(m.h.get(), tokens.data(), tokens.size(), k, b, &p, &r));
            }
            py::dict d;
            d["chunks"] = r.n_chunks;
            d["n_ctx"] = r.n_ctx;
            d["n_prefill"] = r.n_prefill;
            d["scored"] = r.n_scored;
            d["ppl_ref"] = r.ppl_ref;
            d["ppl"] = r.ppl_test;
            d["kl"] = r.kl_mean;
            d["kl_stderr"] = r.kl_stderr;
            d["kl_p99"] = r.kl_p99;
            d["kl_max"] = r.kl_max;
            d["top1"] = r.top1_agree;
            d["top1_stderr"] = r.top1_stderr;
            d["kl_is_top_k_bound"] = r.kl_is_top_k_bound != 0;
            d["kv_after_prefill"] = StatsDict(r.kv_after_prefill);
            d["kv_end"] = StatsDict(r.kv_end);
            d["ref_kv_end"] = StatsDict(r.ref_kv_end);
            return d;
          },
          py::arg("tokens"), py::arg("kv"), py::arg("ref") = "fp16", py::arg("n_ctx") = 0,
          py::arg("n_prefill") = 0, py::arg("n_chunks") = 0, py::arg("ref_top_k") = -1,
          "hqekv_compare: KL / top-1 / perplexity of the kv spec against the ref spec on tokens, "
          "by the protocol of `hqekv ppl --kv --ref` (equal figures).")
      .def_property_readonly("eos", [](const Model& m) { return hqekv_model_eos(m.h.get()); })
      .def(
          "tokenize",
          [](const Model& m, const std::string& text, py::object add_bos, bool parse_special) {
            const bool bos =
                add_bos.is_none() ? (hqekv_model_add_bos(m.h.get()) != 0) : add_bos.cast<bool>();
            return Tokenize(m.h.get(), text, bos, parse_special);
          },
          py::arg("text"), py::arg("add_bos") = py::none(), py::arg("parse_special") = false,
          "Token ids of text (add_bos None: as the model file asks).")
      .def(
          "detokenize",
          [](const Model& m, const std::vector<int32_t>& ids, int32_t prev) {
            return py::bytes(Detokenize(m.h.get(), ids, prev));
          },
          py::arg("tokens"), py::arg("prev") = -1,
          "Bytes of tokens generated after token prev (-1: start of text), as `hqekv run` streams "
          "them.")
      .def(
          "apply_chat_template",
          [](const Model& m, const py::list& messages, std::optional<std::string> tmpl,
             bool add_generation_prompt) {
            return ApplyChatTemplate(m.h.get(), messages, tmpl, add_generation_prompt);
          },
          py::arg("messages"), py::arg("template") = py::none(),
          py::arg("add_generation_prompt") = true,
          "Prompt text of a conversation ([{'role', 'content'}, ...]) with the model's chat "
          "template, or `template` (a family name or Jinja source).")
      .def(
          "context",
          [](const Model& m, const std::string& kv, int n_ctx) {
            Context c;
            c.model = m.h;
            hqekv_context* h = nullptr;
            Check(hqekv_context_create(m.h.get(), CStr(kv, "context: kv"), n_ctx, &h));
            c.h.reset(h);
            return c;
          },
          py::arg("kv") = "fp16", py::arg("n_ctx") = 0,
          "A context (KV cache of one sequence) under a --kv policy spec; n_ctx 0: the model's, at "
          "most 4096.");

  py::class_<Sampler>(
      mod, "Sampler",
      "A sampler chain (temperature, top-k, top-p, min-p, repetition penalty, seed); "
      "temperature 0 is greedy.")
      .def(py::init([](float temperature, int top_k, float top_p, float min_p, float repeat_penalty,
                       int repeat_last_n, uint64_t seed) {
             hqekv_sampler_params p = SamplerParams(temperature, top_k, top_p, min_p,
                                                    repeat_penalty, repeat_last_n, seed);
             hqekv_sampler* s = nullptr;
             Check(hqekv_sampler_create(&p, &s));
             Sampler out;
             out.h.reset(s);
             return out;
           }),
           py::arg("temperature") = 0.0f, py::arg("top_k") = 0, py::arg("top_p") = 1.0f,
           py::arg("min_p") = 0.0f, py::arg("repeat_penalty") = 1.0f, py::arg("repeat_last_n") = 64,
           py::arg("seed") = 0)
      .def(
          "sample",
          [](Sampler& s, const Context& c) {
            int32_t token = -1;
            Check(hqekv_sampler_sample(s.h.get(), c.h.get(), &token));
            return token;
          },
          py::arg("ctx"),
          "The next token from the context's last logits (the tokens decoded so far are the "
          "repetition history); does not decode it.");

  py::class_<Context>(mod, "Context", "A model and the (compressed) KV cache of one sequence.")
      .def_property_readonly("n_ctx",
                             [](const Context& c) { return hqekv_context_n_ctx(c.h.get()); })
      .def_property_readonly("n_past",
                             [](const Context& c) { return hqekv_context_n_past(c.h.get()); })
      .def_property_readonly(
          "kv", [](const Context& c) { return std::string(hqekv_context_kv_describe(c.h.get())); })
      .def(
          "decode",
          [](Context& c, const std::vector<int32_t>& tokens) {
            const int n = IntSize(static_cast<py::ssize_t>(tokens.size()), "decode: len(tokens)");
            py::gil_scoped_release nogil;
            Check(hqekv_decode(c.h.get(), tokens.data(), n));
            c.last_batch = n;
          },
          py::arg("tokens"), "Runs tokens at the next positions (the first batch is the prompt).")
      .def(
          "logits",
          [](py::object self) {
            const Context& c = self.cast<const Context&>();
            const float* l = nullptr;
            int n = 0;
            Check(hqekv_get_logits(c.h.get(), &l, &n));
            // A read-only view into the context's buffer, valid until the next decode.
            FloatArray a({static_cast<py::ssize_t>(n)}, {sizeof(float)}, l, self);
            a.attr("setflags")(py::arg("write") = false);
            return a;
          },
          "Logits [n_vocab] of the last decoded token (a read-only view, valid until the next "
          "decode).")
      .def(
          "set_embeddings",
          [](Context& c, bool on) { Check(hqekv_context_set_embeddings(c.h.get(), on ? 1 : 0)); },
          py::arg("on") = true,
          "Keep each decoded token's final hidden state (hqekv_context_set_embeddings).")
      .def(
          "embeddings",
          [](const Context& c) {
            const float* e = nullptr;
            int d = 0;
            Check(hqekv_get_embeddings_ith(c.h.get(), 0, &e, &d));
            FloatArray a({static_cast<py::ssize_t>(c.last_batch), static_cast<py::ssize_t>(d)});
            for (int i = 0; i < c.last_batch; ++i) {
              Check(hqekv_get_embeddings_ith(c.h.get(), i, &e, &d));
              std::copy(e, e + d, a.mutable_data() + static_cast<size_t>(i) * d);
            }
            return a;
          },
          "Hidden states [n_tokens, n_embd] of the last decode (embeddings must be on).")
      .def(
          "embedding",
          [](const Context& c, const std::string& pooling, bool normalize) {
            hqekv_pooling p;
            if (pooling == "mean") {
              p = HQEKV_POOLING_MEAN;
            } else if (pooling == "last") {
              p = HQEKV_POOLING_LAST;
            } else if (pooling == "first") {
              p = HQEKV_POOLING_FIRST;
            } else {
              throw py::value_error("embedding: pooling must be 'mean', 'last' or 'first', got '" +
                                    pooling + "'");
            }
            const int d = hqekv_model_n_embd(c.model.get());
            FloatArray a({static_cast<py::ssize_t>(d)});
            Check(hqekv_get_embeddings_seq(c.h.get(), 0, p, normalize ? 1 : 0, a.mutable_data(),
                                           static_cast<size_t>(d)));
            return a;
          },
          py::arg("pooling") = "mean", py::arg("normalize") = true,
          "One vector [n_embd] for the last decode (hqekv_get_embeddings_seq).")
      .def("reset",
           [](Context& c) {
             Check(hqekv_context_reset(c.h.get()));
             c.last_batch = 0;
           })
      .def(
          "save_state",
          [](const Context& c, const std::string& path) {
            const char* p = CStr(path, "save_state: path");
            py::gil_scoped_release nogil;
            Check(hqekv_context_save_state(c.h.get(), p));
          },
          py::arg("path"),
          "Writes the sequence and its (compressed) KV cache to path (hqekv_context_save_state).")
      .def(
          "load_state",
          [](Context& c, const std::string& path) {
            const char* p = CStr(path, "load_state: path");
            py::gil_scoped_release nogil;
            Check(hqekv_context_load_state(c.h.get(), p));
          },
          py::arg("path"),
          "Restores a state saved by a context of the same model, kv spec and n_ctx; on error "
          "the context is unchanged.")
      .def(
          "state_bytes",
          [](const Context& c) {
            size_t len = 0;
            const hqekv_status s = hqekv_context_state_get_data(c.h.get(), nullptr, 0, &len);
            if (s != HQEKV_ERR_BUFFER_TOO_SMALL) Check(s);
            std::string out(len, '\0');
            Check(hqekv_context_state_get_data(c.h.get(), reinterpret_cast<uint8_t*>(out.data()),
                                               out.size(), &len));
            return py::bytes(out);
          },
          "The state as bytes (hqekv_context_state_get_data).")
      .def(
          "set_state_bytes",
          [](Context& c, const py::bytes& data) {
            const std::string d = data;
            Check(hqekv_context_state_set_data(
                c.h.get(), reinterpret_cast<const uint8_t*>(d.data()), d.size()));
          },
          py::arg("data"), "Restores a state from state_bytes().")
      .def(
          "generate_tokens",
          [](Context& c, int max_new, float temperature, int top_k, float top_p, float min_p,
             float repeat_penalty, int repeat_last_n, uint64_t seed) {
            hqekv_sampler_params p = SamplerParams(temperature, top_k, top_p, min_p, repeat_penalty,
                                                   repeat_last_n, seed);
            std::vector<int32_t> out(max_new > 0 ? max_new : 0);
            size_t n = 0;
            {
              py::gil_scoped_release nogil;
              hqekv_sampler* s = nullptr;
              Check(hqekv_sampler_create(&p, &s));
              std::unique_ptr<hqekv_sampler, void (*)(hqekv_sampler*)> owner(s, hqekv_sampler_free);
              Check(hqekv_generate(c.h.get(), s, max_new, out.data(), out.size(), &n));
            }
            out.resize(n);
            return out;
          },
          py::arg("max_new") = 256, py::arg("temperature") = 0.0f, py::arg("top_k") = 0,
          py::arg("top_p") = 1.0f, py::arg("min_p") = 0.0f, py::arg("repeat_penalty") = 1.0f,
          py::arg("repeat_last_n") = 64, py::arg("seed") = 0,
          "The loop of `hqekv run` after a decoded prompt: sample, stop at end of generation, "
          "decode.")
      .def(
          "generate",
          [](Context& c, const std::string& prompt, int max_new, float temperature, int top_k,
             float top_p, float min_p, float repeat_penalty, int repeat_last_n, uint64_t seed) {
            Check(hqekv_context_reset(c.h.get()));
            hqekv_model* m = c.model.get();
            const std::vector<int32_t> ids =
                Tokenize(m, prompt, hqekv_model_add_bos(m) || prompt.empty(), false);
            if (ids.empty())
              throw LibraryError{"empty prompt and the model's tokenizer has no BOS token"};
            hqekv_sampler_params p = SamplerParams(temperature, top_k, top_p, min_p, repeat_penalty,
                                                   repeat_last_n, seed);
            std::vector<int32_t> out(max_new > 0 ? max_new : 0);
            size_t n = 0;
            {
              py::gil_scoped_release nogil;
              Check(hqekv_decode(c.h.get(), ids.data(), static_cast<int>(ids.size())));
              c.last_batch = static_cast<int>(ids.size());
              hqekv_sampler* s = nullptr;
              Check(hqekv_sampler_create(&p, &s));
              std::unique_ptr<hqekv_sampler, void (*)(hqekv_sampler*)> owner(s, hqekv_sampler_free);
              Check(hqekv_generate(c.h.get(), s, max_new, out.data(), out.size(), &n));
            }
            out.resize(n);
            const std::string text = Detokenize(m, out, ids.back());
            // Bytes to str; a UTF-8 character cut by max_new becomes U+FFFD.
            return py::reinterpret_steal<py::str>(PyUnicode_DecodeUTF8(
                text.data(), static_cast<py::ssize_t>(text.size()), "replace"));
          },
          py::arg("prompt") = "", py::arg("max_new") = 256, py::arg("temperature") = 0.0f,
          py::arg("top_k") = 0, py::arg("top_p") = 1.0f, py::arg("min_p") = 0.0f,
          py::arg("repeat_penalty") = 1.0f, py::arg("repeat_last_n") = 64, py::arg("seed") = 0,
          "Resets the context, decodes the prompt (BOS as `hqekv run`), generates; returns the new "
          "text "
          "(greedy by default; the prompt itself is not repeated).")
      .def(
          "kv_stats",
          [](const Context& c) {
            hqekv_kv_stats st;
            Check(hqekv_context_kv_stats(c.h.get(), &st));
            return StatsDict(st);
          },
          "Bytes held by the KV cache (total and by purpose), kept / original elements, true bits.")
      .def(
          "kv_report",
          [](const Context& c) {
            return JsonLoads(ReadString([&](char* b, size_t cap, size_t* l) {
              return hqekv_context_kv_report_json(c.h.get(), b, cap, l);
            }));
          },
          "The per-layer report (tier histograms, bytes) as a dict.");

  mod.def(
      "quant_sizes",
      [](const std::string& fmt, int T, int D) {
        size_t cb = 0, mb = 0;
        Check(hqekv_quant_sizes(CStr(fmt, "format"), T, D, &cb, &mb));
        return py::make_tuple(cb, mb);
      },
      py::arg("format"), py::arg("T"), py::arg("D"),
      "Bytes of the code and metadata planes of a T x D chunk.");
  mod.def(
      "quantize",
      [](py::array x, const std::string& fmt) {
        if (x.ndim() != 2)
          throw py::value_error("quantize: expected a 2-D array [T, D], got " +
                                std::to_string(x.ndim()) + " dimensions");
        const int T = IntSize(x.shape(0), "quantize: T"), D = IntSize(x.shape(1), "quantize: D");
        FloatArray a = RequireFloat(x, {x.shape(0), x.shape(1)}, "quantize");
        size_t cb = 0, mb = 0;
        Check(hqekv_quant_sizes(CStr(fmt, "format"), T, D, &cb, &mb));
        ByteArray codes(static_cast<py::ssize_t>(cb)), meta(static_cast<py::ssize_t>(mb));
        const float* src = a.data();
        uint8_t* c = codes.mutable_data();
        uint8_t* m = meta.mutable_data();
        {
          py::gil_scoped_release nogil;
          Check(hqekv_quantize(CStr(fmt, "format"), src, T, D, c, cb, m, mb));
        }
        return py::make_tuple(codes, meta);
      },
      py::arg("x"), py::arg("format"),
      "Quantizes a float32 [T, D] chunk (read in place); returns (codes, meta) uint8 arrays.");
  mod.def(
      "dequantize",
      [](ByteArray codes, ByteArray meta, const std::string& fmt, int T, int D) {
        const char* f = CStr(fmt, "format");
        FloatArray out(
            {static_cast<py::ssize_t>(T > 0 ? T : 0), static_cast<py::ssize_t>(D > 0 ? D : 0)});
        const uint8_t* c = codes.data();
        const uint8_t* m = meta.data();
        float* dst = out.mutable_data();
        const size_t cs = codes.size(), ms = meta.size();
        {
          py::gil_scoped_release nogil;
          Check(hqekv_dequantize(f, c, cs, m, ms, T, D, dst));
        }
        return out;
      },
      py::arg("codes"), py::arg("meta"), py::arg("format"), py::arg("T"), py::arg("D"),
      "The float32 [T, D] reconstruction of (codes, meta).");

  py::class_<KvStore>(
      mod, "KvStore",
      "A KV cache under a policy spec, without a model: append K/V rows, attend, stats.")
      .def(py::init([](const std::string& spec, int n_layers, int n_q_heads, int n_kv_heads,
                       int head_dim, int max_ctx) {
             const hqekv_kv_geometry g = {n_layers, n_q_heads, n_kv_heads, head_dim, max_ctx};
             hqekv_kv* kv = nullptr;
             Check(hqekv_kv_create(CStr(spec, "KvStore: spec"), &g, &kv));
             return KvStore{std::unique_ptr<hqekv_kv, KvFree>(kv), g};
           }),
           py::arg("spec"), py::arg("n_layers"), py::arg("n_q_heads"), py::arg("n_kv_heads"),
           py::arg("head_dim"), py::arg("max_ctx"))
      .def_property_readonly(
          "describe", [](const KvStore& s) { return std::string(hqekv_kv_describe(s.h.get())); })
      .def(
          "append",
          [](KvStore& s, int layer, py::array k, py::array v, const std::vector<int32_t>& pos) {
            const int n = IntSize(static_cast<py::ssize_t>(pos.size()), "append: len(pos)");
            FloatArray ka = RequireFloat(k, {n, s.g.n_kv_heads, s.g.head_dim},
                                         "append: k [n, n_kv_heads, head_dim]");
            FloatArray va = RequireFloat(v, {n, s.g.n_kv_heads, s.g.head_dim},
                                         "append: v [n, n_kv_heads, head_dim]");
            py::gil_scoped_release nogil;
            Check(hqekv_kv_append(s.h.get(), layer, ka.data(), va.data(), pos.data(), n));
          },
          py::arg("layer"), py::arg("k"), py::arg("v"), py::arg("pos"))
      .def(
          "attend",
          [](KvStore& s, int layer, py::array q, const std::vector<int32_t>& pos) {
            const int n = IntSize(static_cast<py::ssize_t>(pos.size()), "attend: len(pos)");
            FloatArray qa = RequireFloat(q, {n, s.g.n_q_heads, s.g.head_dim},
                                         "attend: q [n, n_q_heads, head_dim]");
            FloatArray out({static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(s.g.n_q_heads),
                            static_cast<py::ssize_t>(s.g.head_dim)});
            const float* qp = qa.data();
            float* op = out.mutable_data();
            {
              py::gil_scoped_release nogil;
              Check(hqekv_kv_attend(s.h.get(), layer, qp, pos.data(), n, op));
            }
            return out;
          },
          py::arg("layer"), py::arg("q"), py::arg("pos"))
      .def(
          "end_batch",
          [](KvStore& s, int n, bool is_prefill) {
            Check(hqekv_kv_end_batch(s.h.get(), n, is_prefill));
          },
          py::arg("n"), py::arg("is_prefill"))
      .def("stats",
           [](const KvStore& s) {
             hqekv_kv_stats st;
             Check(hqekv_kv_stats_get(s.h.get(), &st));
             return StatsDict(st);
           })
      .def("report",
           [](const KvStore& s) {
             return JsonLoads(ReadString([&](char* b, size_t cap, size_t* l) {
               return hqekv_kv_report_json(s.h.get(), b, cap, l);
             }));
           })
      .def("reset", [](KvStore& s) { Check(hqekv_kv_reset(s.h.get())); });
}
