#include "eval/study/quant_study_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "cache/plain_cache.h"

namespace hqekv::eval {

RecordingKvCache::RecordingKvCache(std::unique_ptr<KvCache> inner) : inner_(std::move(inner)) {
  const KvGeometry& g = inner_->geometry();
  k_.assign(g.n_layers, std::vector<std::vector<float>>(g.n_kv_heads));
  v_ = k_;
}

Status RecordingKvCache::Append(int layer, const float* k, const float* v, const int32_t* pos,
                                int n) {
  HQEKV_RETURN_IF_ERROR(inner_->Append(layer, k, v, pos, n));  // validates layer and shapes
  const KvGeometry& g = inner_->geometry();
  const int D = g.head_dim;
  for (int i = 0; i < n; ++i)
    for (int h = 0; h < g.n_kv_heads; ++h) {
      const size_t off = (static_cast<size_t>(i) * g.n_kv_heads + h) * D;
      k_[layer][h].insert(k_[layer][h].end(), k + off, k + off + D);
      v_[layer][h].insert(v_[layer][h].end(), v + off, v + off + D);
    }
  return Status::Ok();
}

void RecordingKvCache::CutToChunks(int chunk) {
  const size_t D = static_cast<size_t>(inner_->geometry().head_dim);
  for (auto* rec : {&k_, &v_})
    for (auto& layer : *rec)
      for (auto& head : layer) head.resize(head.size() / D / chunk * chunk * D);
}

namespace {

QuantStudyOptions StudyOptions(const ModelQuantStudyOptions& o, int vectors, int D) {
  QuantStudyOptions q;
  q.vectors = vectors;
  q.dim = D;
  q.chunk = o.chunk;
  q.group = std::min(32, D);
  q.bits = o.bits;
  q.formats.clear();  // table (c) is the synthetic study's
  return q;
}

// Study of one kind (K or V) over the given layers' recordings.
Result<QuantStudyResult> Study(const RecordingKvCache& rec, const std::vector<int>& layers,
                               bool keys, const ModelQuantStudyOptions& o,
                               const std::string& source) {
  const KvGeometry& g = rec.geometry();
  std::vector<float> x;
  for (int l : layers)
    for (int h = 0; h < g.n_kv_heads; ++h) {
      const auto& r = keys ? rec.keys(l, h) : rec.values(l, h);
      x.insert(x.end(), r.begin(), r.end());
    }
  const int vectors = static_cast<int>(x.size() / g.head_dim);
  if (vectors < o.chunk)
    return MakeError("the text gives " + std::to_string(vectors) +
                     " vectors, fewer than one chunk of " + std::to_string(o.chunk) + " tokens");
  return RunQuantStudyOn(x, StudyOptions(o, vectors, g.head_dim), source);
}

}  // namespace

Result<ModelQuantStudy> RunModelQuantStudy(EvalModel& model, const std::string& text,
                                           const std::string& text_path,
                                           const ModelQuantStudyOptions& o) {
  if (o.chunk < 1 || o.max_windows < 1 || o.window < 0)
    return MakeError("study: chunk and max_windows must be >= 1, window >= 0");
  const int window = o.window > 0 ? o.window : model.TrainedContext();
  if (window < o.chunk)
    return MakeError("study: window of " + std::to_string(window) + " tokens is below one chunk");
  const std::vector<int32_t> ids = model.Encode(text, false);
  if (static_cast<int>(ids.size()) < o.chunk)
    return MakeError("text '" + text_path + "' has " + std::to_string(ids.size()) +
                     " tokens, fewer than one chunk");
  const KvGeometry g = model.Geometry(window);
  HQEKV_ASSIGN_OR_RETURN(auto inner, PlainKvCache::Create(g, PlainPrecision::kF32));
  RecordingKvCache rec(std::move(inner));

  ModelQuantStudy s;
  s.model = model.Name();
  s.text_path = text_path;
  s.geometry = g;
  std::vector<float> logits;
  // Windows of BOS + (window - 1) text tokens, consecutive, from an empty cache.
  const std::vector<int32_t> bos_only = model.Encode("", true);  // [BOS], or empty without BOS
  const size_t head = bos_only.empty() ? 0 : 1;
  std::vector<int32_t> win;
  for (size_t start = 0; start < ids.size() && s.windows < o.max_windows; start += window - head) {
    win.assign(bos_only.begin(), bos_only.begin() + head);
    const size_t end = std::min(ids.size(), start + window - head);
    win.insert(win.end(), ids.begin() + start, ids.begin() + end);
    if (static_cast<int>(win.size()) < o.chunk) break;
    rec.Reset();
    HQEKV_RETURN_IF_ERROR(
        model.Forward(rec, win.data(), static_cast<int>(win.size()), 0, true, &logits));
    rec.CutToChunks(o.chunk);
    s.tokens += static_cast<int>(win.size());
    ++s.windows;
  }
  const std::string src = "real K/V of " + s.model + " on " + text_path;
  std::vector<int> all;
  for (int l = 0; l < g.n_layers; ++l) {
    all.push_back(l);
    HQEKV_ASSIGN_OR_RETURN(auto k,
                           Study(rec, {l}, true, o, src + " (layer " + std::to_string(l) + " K)"));
    HQEKV_ASSIGN_OR_RETURN(auto v,
                           Study(rec, {l}, false, o, src + " (layer " + std::to_string(l) + " V)"));
    s.k_layers.push_back(std::move(k));
    s.v_layers.push_back(std::move(v));
  }
  HQEKV_ASSIGN_OR_RETURN(auto k, Study(rec, all, true, o, src + " (all layers, K)"));
  HQEKV_ASSIGN_OR_RETURN(auto v, Study(rec, all, false, o, src + " (all layers, V)"));
  s.k_all = std::move(k);
  s.v_all = std::move(v);
  return s;
}

namespace {

double CorrOf(const QuantStudyResult& r, const std::string& prefix) {
  for (const auto& c : r.correlation)
    if (c.conversion.rfind(prefix, 0) == 0) return c.pearson;
  return NAN;
}

const LayoutLossRow* LayoutOf(const QuantStudyResult& r, int bits,
                              const std::string& layout_prefix) {
  for (const auto& l : r.layouts)
    if (l.bits == bits && l.layout.rfind(layout_prefix, 0) == 0) return &l;
  return nullptr;
}

std::string F(double v, const char* fmt = "%.3f") {
  if (std::isnan(v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

}  // namespace

nlohmann::json ModelQuantStudyJson(const ModelQuantStudy& s) {
  nlohmann::json j;
  j["model"] = s.model;
  j["text"] = s.text_path;
  j["tokens"] = s.tokens;
  j["windows"] = s.windows;
  j["geometry"] = {{"n_layers", s.geometry.n_layers},
                   {"n_kv_heads", s.geometry.n_kv_heads},
                   {"head_dim", s.geometry.head_dim}};
  nlohmann::json layers = nlohmann::json::array();
  for (size_t l = 0; l < s.k_layers.size(); ++l)
    layers.push_back(
        {{"layer", l}, {"K", QuantStudyJson(s.k_layers[l])}, {"V", QuantStudyJson(s.v_layers[l])}});
  j["layers"] = layers;
  j["all"] = {{"K", QuantStudyJson(s.k_all)}, {"V", QuantStudyJson(s.v_all)}};
  return j;
}

std::string ModelQuantStudyTables(const ModelQuantStudy& s) {
  std::ostringstream o;
  const auto& bits = s.k_all.options.bits;
  o << "Quantization study on real K/V: " << s.model << ", " << s.text_path << " (" << s.tokens
    << " tokens in " << s.windows << " windows; " << s.geometry.n_layers << " layers x "
    << s.geometry.n_kv_heads << " KV heads, head_dim " << s.geometry.head_dim << "; K chunks of "
    << s.k_all.options.chunk << " tokens, V groups of " << s.k_all.options.group << " channels).\n"
    << kConversionLossHelp << "\n\n";
  o << "Table 1: Pearson correlation of range and conversion loss (paper, Llama-3.1-8B: 0.96 / "
       "0.96 / 0.95 at "
       "4/2/1 bits, 0.91 eviction)\n";
  o << "  layer  kind";
  for (int b : bits) o << "   " << b << "-bit";
  o << "  evict\n";
  auto row1 = [&](const std::string& name, const QuantStudyResult& r, const char* kind) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "  %-5s  %-4s", name.c_str(), kind);
    o << buf;
    for (int b : bits) {
      std::snprintf(buf, sizeof buf, "  %6s", F(CorrOf(r, "uniform " + std::to_string(b))).c_str());
      o << buf;
    }
    std::snprintf(buf, sizeof buf, "  %6s\n", F(CorrOf(r, "eviction")).c_str());
    o << buf;
  };
  for (size_t l = 0; l < s.k_layers.size(); ++l) {
    row1(std::to_string(l), s.k_layers[l], "K");
    row1(std::to_string(l), s.v_layers[l], "V");
  }
  row1("all", s.k_all, "K");
  row1("all", s.v_all, "V");
  o << "\nTable 2: mean conversion loss per vector, uniform vs normalized (paper: uniform better "
       "at 4 bits, "
       "normalized at 1 bit)\n";
  o << "  layer  kind  bits      uniform   normalized  better\n";
  auto row2 = [&](const std::string& name, const QuantStudyResult& r, const char* kind,
                  const std::string& layout) {
    for (int b : bits) {
      const LayoutLossRow* l = LayoutOf(r, b, layout);
      if (!l) continue;
      char buf[160];
      std::snprintf(buf, sizeof buf, "  %-5s  %-4s  %4d  %11.5g  %11.5g  %s\n", name.c_str(), kind,
                    b, l->uniform_loss, l->normal_loss, l->better.c_str());
      o << buf;
    }
  };
  for (size_t l = 0; l < s.k_layers.size(); ++l) {
    row2(std::to_string(l), s.k_layers[l], "K", "K");
    row2(std::to_string(l), s.v_layers[l], "V", "V");
  }
  row2("all", s.k_all, "K", "K");
  row2("all", s.v_all, "V", "V");
  return o.str();
}

}  // namespace hqekv::eval
