#include "eval/study/pareto_study.h"

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <memory>
#include <set>

#include "core/file.h"
#include "core/hash.h"
#include "eval/run/engine_model.h"
#include "eval/run/json_field.h"
#include "lm/lm_compare.h"
#include "policy/factory.h"
#include "policy/spec.h"

namespace hqekv::eval {
namespace {

using nlohmann::json;

std::string Hex16(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, h);
  return buf;
}

// Shortest text of a budget: 3.4 -> "3.4", 8 -> "8".
std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

bool IsSwitch(const policy::ParamInfo& p) {
  return p.choices == std::vector<std::string>{"0", "1"};
}

const policy::ParamInfo* FindParam(const policy::PolicyInfo& row, const std::string& key) {
  for (const auto& p : row.params) {
    if (p.key == key) return &p;
  }
  return nullptr;
}

// The default grid's specs of one policy-table row (see DefaultParetoGrid).
std::vector<std::string> RowSpecs(const policy::PolicyInfo& row) {
  std::vector<std::string> out;
  if (policy::TakesBudget(row)) {
    const policy::ParamInfo* bits = FindParam(row, "bits");
    if (bits && bits->budget) {
      for (double b : kParetoBudgets) out.push_back(row.name + ":bits=" + Num(b));
    }
    const policy::ParamInfo* nominal = FindParam(row, "nominal_bits");
    if (nominal && nominal->budget && nominal->type == policy::ParamType::kReal) {
      for (double b : kParetoNominalBits) out.push_back(row.name + ":nominal_bits=" + Num(b));
    }
    if (out.empty()) out.push_back(row.name);  // its default budget
    return out;
  }
  const policy::ParamInfo* first = nullptr;
  for (const auto& p : row.params) {
    if (p.type == policy::ParamType::kChoice && !IsSwitch(p)) {
      first = &p;
      break;
    }
  }
  if (!first) return {row.name};
  for (const std::string& v : first->choices) {
    std::string spec = row.name + ":";
    int set = 0;
    for (const auto& p : row.params) {
      if (p.type != policy::ParamType::kChoice || p.choices != first->choices) continue;
      spec += (set++ ? "," : "") + p.key + "=" + v;
    }
    // One non-numeric key at its default: the plain name (fp8, not
    // fp8:format=e4m3); numeric ones stay spelled out (kivi:nominal_bits=2).
    const bool numeric = !v.empty() && std::isdigit(static_cast<unsigned char>(v[0]));
    out.push_back(set == 1 && !numeric && v == first->def ? row.name : spec);
  }
  return out;
}

json CellToJson(const ParetoCell& c) {
  json j = {{"text", c.text},
            {"spec", c.spec},
            {"family", c.family},
            {"key", c.key},
            {"scored", c.scored},
            {"bits", c.bits},
            {"bits_after_prefill", c.bits_after_prefill},
            {"kl", c.kl},
            {"kl_stderr", c.kl_stderr},
            {"agree", c.agree},
            {"agree_stderr", c.agree_stderr},
            {"seconds", c.seconds}};
  if (!c.error.empty()) j["error"] = c.error;
  return j;
}

// Typed field access with errors naming the field and the file.
template <class T>
Status Get(const json& j, const char* key, T* out, const std::string& what) {
  auto it = j.find(key);
  if (it == j.end()) return MakeError(what + ": missing field '" + key + "'");
  if (!JsonTo(*it, out))
    return MakeError(what + ": field '" + key + "' has the wrong type or is out of range");
  return Status::Ok();
}

Result<ParetoCell> CellFromJson(const json& j, const std::string& what) {
  if (!j.is_object()) return MakeError(what + ": a cell is not an object");
  ParetoCell c;
  HQEKV_RETURN_IF_ERROR(Get(j, "text", &c.text, what));
  HQEKV_RETURN_IF_ERROR(Get(j, "spec", &c.spec, what));
  HQEKV_RETURN_IF_ERROR(Get(j, "family", &c.family, what));
  HQEKV_RETURN_IF_ERROR(Get(j, "key", &c.key, what));
  HQEKV_RETURN_IF_ERROR(Get(j, "scored", &c.scored, what));
  HQEKV_RETURN_IF_ERROR(Get(j, "bits", &c.bits, what));
  HQEKV_RETURN_IF_ERROR(Get(j, "bits_after_prefill", &c.bits_after_prefill, what));
  HQEKV_RETURN_IF_ERROR(Get(j, "kl", &c.kl, what));
  HQEKV_RETURN_IF_ERROR(Get(j, "kl_stderr", &c.kl_stderr, what));
  HQEKV_RETURN_IF_ERROR(Get(j, "agree", &c.agree, what));
  HQEKV_RETURN_IF_ERROR(Get(j, "agree_stderr", &c.agree_stderr, what));
  HQEKV_RETURN_IF_ERROR(Get(j, "seconds", &c.seconds, what));
  if (j.contains("error")) HQEKV_RETURN_IF_ERROR(Get(j, "error", &c.error, what));
  return c;
}

// A text read, hashed and tokenized for the protocol.
struct LoadedText {
  ParetoText info;
  std::vector<int32_t> tokens;
};

Result<LoadedText> LoadText(const std::string& path, const EngineModel& model,
                            const ParetoProtocol& p) {
  auto bytes = ReadTextFile(path);
  if (!bytes.ok()) return MakeError("text: " + bytes.message());
  LoadedText t;
  t.info.label = path;
  t.info.hash = Hex16(Fnv1a64(*bytes));
  const Tokenizer& tok = *model.source().tokenizer;
  t.tokens = tok.Encode(*bytes, tok.add_bos() && tok.bos() >= 0);
  const size_t cut = static_cast<size_t>(std::min(p.max_tokens, p.ctx));
  if (t.tokens.size() > cut) t.tokens.resize(cut);
  if (static_cast<int>(t.tokens.size()) <= p.prefill) {
    return MakeError("text '" + path + "' has " + std::to_string(t.tokens.size()) +
                     " tokens (after the cut to --max-tokens / --ctx): nothing to score after "
                     "--prefill " +
                     std::to_string(p.prefill));
  }
  t.info.tokens = static_cast<int>(t.tokens.size());
  return t;
}

Status CheckProtocol(const ParetoProtocol& p) {
  if (p.prefill < 1) return MakeError("--prefill must be >= 1, got " + std::to_string(p.prefill));
  if (p.ctx < 2) return MakeError("--ctx must be >= 2, got " + std::to_string(p.ctx));
  if (p.max_tokens <= p.prefill) {
    return MakeError("--max-tokens " + std::to_string(p.max_tokens) +
                     " leaves nothing to score after --prefill " + std::to_string(p.prefill));
  }
  return Status::Ok();
}

}  // namespace

std::string CellKey(const std::string& code_version, const std::string& model_identity,
                    const std::string& text_hash, const std::string& spec,
                    const ParetoProtocol& p) {
  return "pareto-v" + std::to_string(kParetoFormatVersion) + "|code " + code_version + "|model " +
         model_identity + "|text " + text_hash + "|spec " + spec + "|prefill " +
         std::to_string(p.prefill) + " max_tokens " + std::to_string(p.max_tokens) + " ctx " +
         std::to_string(p.ctx) + " ref fp16";
}

json ParetoResultsToJson(const ParetoResults& r) {
  json texts = json::array(), cells = json::array();
  for (const auto& t : r.texts)
    texts.push_back({{"label", t.label}, {"hash", t.hash}, {"tokens", t.tokens}});
  for (const auto& c : r.cells) cells.push_back(CellToJson(c));
  return {{"format", r.format},
          {"command", r.command},
          {"model", r.model},
          {"model_identity", r.model_identity},
          {"code_version", r.code_version},
          {"protocol",
           {{"prefill", r.protocol.prefill},
            {"max_tokens", r.protocol.max_tokens},
            {"ctx", r.protocol.ctx}}},
          {"texts", texts},
          {"grid", r.grid},
          {"cells", cells}};
}

Result<ParetoResults> ParetoResultsFromJson(const json& j, const std::string& what) {
  if (!j.is_object()) return MakeError(what + ": not a JSON object");
  ParetoResults r;
  HQEKV_RETURN_IF_ERROR(Get(j, "format", &r.format, what));
  if (r.format != kParetoFormatVersion) {
    return MakeError(what + ": format " + std::to_string(r.format) + ", this build reads " +
                     std::to_string(kParetoFormatVersion));
  }
  HQEKV_RETURN_IF_ERROR(Get(j, "command", &r.command, what));
  HQEKV_RETURN_IF_ERROR(Get(j, "model", &r.model, what));
  HQEKV_RETURN_IF_ERROR(Get(j, "model_identity", &r.model_identity, what));
  HQEKV_RETURN_IF_ERROR(Get(j, "code_version", &r.code_version, what));
  json p;
  HQEKV_RETURN_IF_ERROR(Get(j, "protocol", &p, what));
  HQEKV_RETURN_IF_ERROR(Get(p, "prefill", &r.protocol.prefill, what));
  HQEKV_RETURN_IF_ERROR(Get(p, "max_tokens", &r.protocol.max_tokens, what));
  HQEKV_RETURN_IF_ERROR(Get(p, "ctx", &r.protocol.ctx, what));
  json texts, cells;
  HQEKV_RETURN_IF_ERROR(Get(j, "texts", &texts, what));
  HQEKV_RETURN_IF_ERROR(Get(j, "grid", &r.grid, what));
  HQEKV_RETURN_IF_ERROR(Get(j, "cells", &cells, what));
  if (!texts.is_array() || !cells.is_array())
    return MakeError(what + ": 'texts' and 'cells' must be arrays");
  for (const json& t : texts) {
    ParetoText x;
    HQEKV_RETURN_IF_ERROR(Get(t, "label", &x.label, what));
    HQEKV_RETURN_IF_ERROR(Get(t, "hash", &x.hash, what));
    HQEKV_RETURN_IF_ERROR(Get(t, "tokens", &x.tokens, what));
    r.texts.push_back(x);
  }
  for (const json& c : cells) {
    HQEKV_ASSIGN_OR_RETURN(ParetoCell cell, CellFromJson(c, what));
    r.cells.push_back(std::move(cell));
  }
  return r;
}

Result<ParetoResults> LoadParetoResults(const std::string& path) {
  HQEKV_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return MakeError("'" + path + "' is not valid JSON");
  return ParetoResultsFromJson(j, "'" + path + "'");
}

Status SaveParetoResults(const std::string& path, const ParetoResults& r) {
  return WriteFileAtomic(path, ParetoResultsToJson(r).dump(1) + "\n");
}

std::vector<std::string> DefaultParetoGrid() {
  std::vector<std::string> specs;
  for (const auto& row : policy::PolicyTable()) {
    if (std::find(std::begin(kParetoSkipPolicies), std::end(kParetoSkipPolicies), row.name) !=
        std::end(kParetoSkipPolicies))
      continue;
    for (std::string& s : RowSpecs(row)) specs.push_back(std::move(s));
  }
  for (const char* extra : kParetoExtraSpecs) specs.push_back(extra);
  std::vector<std::string> ok;
  for (const auto& s : specs) {
    auto p = policy::ParseSpec(s);
    if (p.ok() && policy::FindPolicy(p->name)) ok.push_back(s);
  }
  auto grid = NormalizeGrid(ok);
  return grid.ok() ? *grid : std::vector<std::string>{};
}

Result<std::vector<std::string>> NormalizeGrid(const std::vector<std::string>& specs) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& s : specs) {
    if (s.find_first_not_of(" \t") == std::string::npos) continue;  // blank: no spec
    auto p = policy::ParseSpec(s);
    if (!p.ok()) return MakeError("--kv '" + s + "': " + p.message());
    std::string c = p->Canonical();
    if (seen.insert(c).second) out.push_back(c);
  }
  if (out.empty()) return MakeError("the grid of --kv specs is empty");
  return out;
}

Result<ParetoResults> RunParetoStudy(const ParetoOptions& opt, const ParetoResults* previous,
                                     const std::function<Status(const ParetoResults&)>& save) {
  HQEKV_RETURN_IF_ERROR(CheckProtocol(opt.protocol));
  if (opt.texts.empty()) return MakeError("no text: give -f TEXT");
  HQEKV_ASSIGN_OR_RETURN(std::vector<std::string> grid, NormalizeGrid(opt.grid));
  HQEKV_ASSIGN_OR_RETURN(std::unique_ptr<EngineModel> model, EngineModel::Load(opt.model));
  const ModelConfig& mc = model->source().config;
  if (mc.max_ctx > 0 && opt.protocol.ctx > mc.max_ctx) {
    return MakeError("--ctx " + std::to_string(opt.protocol.ctx) +
                     " is more than the model's context length of " + std::to_string(mc.max_ctx));
  }
  std::vector<LoadedText> texts;  // all read before any cell runs: bad input fails fast
  for (const auto& path : opt.texts) {
    HQEKV_ASSIGN_OR_RETURN(LoadedText t, LoadText(path, *model, opt.protocol));
    texts.push_back(std::move(t));
  }

  ParetoResults r;
  r.command = opt.command;
  r.model = opt.model;
  r.model_identity = model->Identity();
  r.code_version = opt.code_version;
  r.protocol = opt.protocol;
  r.grid = grid;
  for (const auto& t : texts) r.texts.push_back(t.info);

  std::map<std::string, const ParetoCell*> cached;
  if (previous && !opt.fresh) {
    for (const auto& c : previous->cells) cached[c.key] = &c;
  }
  const policy::CacheContext for_model =
      policy::ForModel(mc.name, model->source().identity, mc.n_layers);
  const KvGeometry geometry = model->Geometry(opt.protocol.ctx);
  const int total = static_cast<int>(texts.size() * grid.size());
  int done = 0;
  // What is saved after each computed cell: the cells so far plus the cached
  // cells of this run not reached yet, so an interrupted run loses neither.
  std::set<std::string> planned, placed;
  for (const auto& t : texts) {
    for (const auto& s : grid)
      planned.insert(CellKey(opt.code_version, r.model_identity, t.info.hash, s, opt.protocol));
  }
  auto save_progress = [&]() -> Status {
    if (!save) return Status::Ok();
    ParetoResults partial = r;
    for (const auto& [key, cell] : cached) {
      if (planned.count(key) && !placed.count(key)) partial.cells.push_back(*cell);
    }
    return save(partial);
  };
  for (const auto& t : texts) {
    std::unique_ptr<lm::ReferenceScores> ref;  // computed when the first cell needs it
    for (const auto& spec_text : grid) {
      ParetoCell c;
      c.text = t.info.label;
      c.spec = spec_text;
      c.key = CellKey(opt.code_version, r.model_identity, t.info.hash, spec_text, opt.protocol);
      auto hit = cached.find(c.key);
      const bool reused = hit != cached.end();
      if (reused) {
        c = *hit->second;
        c.text = t.info.label;  // the key holds the hash, not the label
      } else {
        HQEKV_ASSIGN_OR_RETURN(policy::PolicySpec spec, policy::ParseSpec(spec_text));
        c.family = spec.name;
        auto cache = policy::CreateCache(spec, geometry, for_model);
        if (!cache.ok()) {
          c.error = cache.message();
        } else {
          if (!ref) {
            HQEKV_ASSIGN_OR_RETURN(std::unique_ptr<KvCache> ref_cache,
                                   MakeKvCache("fp16", geometry));
            // Exact KL (the whole vocabulary) unless that stores > 64M values.
            const int scored = t.info.tokens - opt.protocol.prefill;
            const int top_k = static_cast<int64_t>(mc.vocab_size) * scored <= (64 << 20) ? 0 : 256;
            HQEKV_ASSIGN_OR_RETURN(lm::ReferenceScores rs,
                                   lm::ComputeReference(model->llama(), *ref_cache, t.tokens,
                                                        opt.protocol.prefill, top_k));
            ref = std::make_unique<lm::ReferenceScores>(std::move(rs));
          }
          HQEKV_ASSIGN_OR_RETURN(lm::LmScore s,
                                 lm::ScoreAgainstReference(model->llama(), **cache, *ref));
          c.scored = s.scored;
          c.bits = s.stats_end.bits_per_original();
          c.bits_after_prefill = s.stats_after_prefill.bits_per_original();
          c.kl = s.kl;
          c.kl_stderr = s.kl_stderr;
          c.agree = s.top1_agree;
          c.agree_stderr = s.top1_stderr;
          c.seconds = s.seconds;
        }
      }
      r.cells.push_back(c);
      placed.insert(c.key);
      ++done;
      if (!reused) HQEKV_RETURN_IF_ERROR(save_progress());
      if (opt.on_cell) opt.on_cell(done, total, c, reused);
    }
  }
  HQEKV_RETURN_IF_ERROR(save_progress());
  return r;
}

}  // namespace hqekv::eval
