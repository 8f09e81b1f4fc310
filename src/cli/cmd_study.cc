// `hqekv study`: measurements behind the method. `study quant` runs the
// quantization study (eval/study/quant_study.h) on seeded synthetic Gaussian
// vectors, or with --from-model MODEL -f TEXT on the real K/V the model writes
// while prefilling TEXT, per layer and overall (eval/study/quant_study_model.h).
// `study pareto` measures KL vs true bits of a grid of policies
// (cli/study_pareto.h, eval/study/pareto_study.h).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <string>

#include "cli/registry.h"
#include "cli/study_pareto.h"
#include "core/file.h"

#include "eval/run/engine_model.h"
#include "eval/study/quant_study.h"
#include "eval/study/quant_study_model.h"

namespace hqekv::cli::cmd_study {
namespace {

struct StudyQuantArgs {
  eval::QuantStudyOptions options;
  bool json = false;
  std::string from_model, text_file;  // --from-model MODEL -f TEXT: real K/V
  int windows = 4;
};

// --from-model: the study on the K/V the model writes while prefilling TEXT
// (eval/study/quant_study_model.h), per layer and overall.
int StudyQuantFromModel(const StudyQuantArgs& a) {
  auto fail = [](const std::string& m) {
    std::fprintf(stderr, "hqekv study quant: error: %s\n", m.c_str());
    return 2;
  };
  if (a.text_file.empty()) return fail("--from-model needs -f TEXT");
  auto model = eval::EngineModel::Load(a.from_model);
  if (!model.ok()) return fail(model.message());
  auto text = ReadTextFile(a.text_file);
  if (!text.ok()) return fail(text.message());
  eval::ModelQuantStudyOptions o;
  o.chunk = a.options.chunk;
  o.bits = a.options.bits;
  o.max_windows = a.windows;
  auto s = eval::RunModelQuantStudy(**model, *text, a.text_file, o);
  if (!s.ok()) return fail(s.message());
  if (a.json) {
    std::printf("%s\n", eval::ModelQuantStudyJson(*s).dump(2).c_str());
  } else {
    std::printf("%s", eval::ModelQuantStudyTables(*s).c_str());
  }
  return 0;
}

int StudyQuant(const StudyQuantArgs& a) {
  auto r = eval::RunQuantStudy(a.options);
  if (!r.ok()) {
    std::fprintf(stderr, "hqekv study quant: error: %s\n", r.message().c_str());
    return 2;
  }
  if (a.json) {
    std::printf("%s\n", eval::QuantStudyJson(*r).dump(2).c_str());
  } else {
    std::printf("%s", eval::QuantStudyTables(*r).c_str());
  }
  return 0;
}

const CommandRegistrar kRegister(90, [](CLI::App& app, int* rc) {
  CLI::App* study =
      app.add_subcommand("study", "Measurements the method rests on (see `study quant`)");
  study->require_subcommand(1);
  auto a = std::make_shared<StudyQuantArgs>();
  CLI::App* q = study->add_subcommand(
      "quant",
      std::string("Range-vs-loss correlation and uniform-vs-normalized loss of KV quantization, "
                  "on seeded standard-Gaussian vectors.\n") +
          eval::kConversionLossHelp);
  q->add_option("--seed", a->options.seed, "Seed of the synthetic vectors")->capture_default_str();
  q->add_option("--vectors", a->options.vectors, "Number of vectors (a multiple of --chunk)")
      ->capture_default_str();
  q->add_option("--dim", a->options.dim, "Vector dimension D (head_dim)")->capture_default_str();
  q->add_option("--chunk", a->options.chunk, "Tokens per K chunk (per-channel group G)")
      ->capture_default_str();
  q->add_option("--group", a->options.group, "Channels per V group (per-token g; divides --dim)")
      ->capture_default_str();
  q->add_option("--bits", a->options.bits, "Bit widths of tables (a) and (b), each 1, 2 or 4")
      ->delimiter(',')
      ->capture_default_str();
  q->add_option("--format", a->options.formats,
                "Extra formats for table (c), e.g. int8, fp8e4m3, u4:chan:had (repeatable; "
                "--format none for no extra formats)")
      ->delimiter(',');
  q->add_flag("--json", a->json, "Print the tables as JSON");
  q->add_option("--from-model", a->from_model,
                "Study the real K/V of this model (.gguf or llama2.c .bin) prefilling -f TEXT");
  q->add_option("-f,--file", a->text_file, "Text prefilled through the model (with --from-model)");
  q->add_option("--windows", a->windows, "Context windows of the text studied (with --from-model)")
      ->capture_default_str();
  q->callback([a, rc] {
    StudyQuantArgs args = *a;
    if (args.options.formats.size() == 1 && args.options.formats[0] == "none")
      args.options.formats.clear();
    *rc = args.from_model.empty() ? StudyQuant(args) : StudyQuantFromModel(args);
  });
  AddStudyPareto(*study, rc);
});

}  // namespace
}  // namespace hqekv::cli::cmd_study
