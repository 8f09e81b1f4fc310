# Output content of `calibrate`, `study`, `gen-synthetic` and `policies`, and
# their failure messages. Every success test checks exit 0 and the output,
# every failure test a nonzero exit and the message (scripts/cli_functions.cmake).
# Numbers pinned here are deterministic (seeded); where a value may move with
# legitimate changes it is a band, not one number.
include(${CMAKE_CURRENT_LIST_DIR}/scripts/cli_functions.cmake)
set(_root ${PROJECT_SOURCE_DIR})
set(_out ${CMAKE_CURRENT_BINARY_DIR})

# ---- policies ----------------------------------------------------------------
hqekv_cli_success(NAME cli_policies_list ARGS policies
  REGEX "fp16[^a-z]+uncompressed fp16.*fp32[^a-z]+uncompressed fp32.*fp8[^a-z]+FP8 E4M3.*int8[^a-z]+symmetric int8.*kivi[^a-z]+KIVI.*bits +2\\|4 +default 2.*streaming[^a-z]+StreamingLLM.*h2o[^a-z]+H2O.*snapkv.*pyramid.*hqekv")
hqekv_cli_success(NAME cli_policies_check ARGS policies --check kivi:nominal_bits=4
  REGEX "kivi[^a-z]+group=32  \\(default\\)[^a-z]+nominal_bits=4[^a-z]+residual=128  \\(default\\)")
hqekv_cli_failure(NAME cli_err_policies_check_bad_value ARGS policies --check kivi:nominal_bits=3
  MSG "nominal_bits=3: must be one of 2|4")

# ---- study quant -------------------------------------------------------------
# The paper's claims on seeded Gaussian vectors: range correlates with loss;
# uniform wins at 4 bits, normalized at 2 and 1 bit (exact table values).
hqekv_cli_success(NAME cli_study_quant ARGS study quant
  REGEX "4096 vectors of D=128.*uniform 4-bit +u4:tok +0\\.717 +0\\.7826.*eviction +- +0\\.553 +128\\.02.*4  K per-channel +0\\.77947 +2\\.312 +2\\.966  uniform.*2  V per-token +19\\.778 +16\\.86 +0\\.852  normalized.*1  V per-token +250\\.74 +45\\.504 +0\\.181  normalized.*int8 +0\\.840 +0\\.0053548")
hqekv_cli_success(NAME cli_study_quant_json ARGS study quant --vectors 256 --dim 64 --bits 2 --format int8 --json
  REGEX "\"dim\": 64.*\"conversion\": \"int8\".*\"pearson_range_loss\": 0\\.[0-9]+")
hqekv_cli_failure(NAME cli_err_study_group ARGS study quant --dim 100 MSG "--group 32 does not divide --dim 100")
hqekv_cli_failure(NAME cli_err_study_bits ARGS study quant --bits 3 MSG "bit width 3 out of range")

# ---- gen-synthetic -----------------------------------------------------------
# A tiny GGUF, then inspected, run, and refused as an overwrite target.
hqekv_cli_success(NAME cli_gen_synthetic ARGS gen-synthetic -o ${_out}/synth-tiny.gguf --force
  --layers 2 --dim 64 --heads 4 --kv-heads 2 --ff 128 --vocab 300 --ctx 64 --type Q8_0
  REGEX "wrote [^ ]*synth-tiny\\.gguf \\(Q8_0, 2 layers, d_model 64, 0\\.00 GB of weights\\)")
hqekv_cli_success(NAME cli_gen_synthetic_inspect ARGS inspect -m ${_out}/synth-tiny.gguf
  REGEX "layers: +2[^0-9].*d_model: +64[^0-9].*4 query heads, 2 KV heads \\(GQA\\), head_dim 16.*vocab: +300[^0-9].*Q8_0 x15")
hqekv_cli_success(NAME cli_gen_synthetic_run ARGS run -m ${_out}/synth-tiny.gguf -n 3 -t 1
  REGEX "synthetic-llama \\| kv fp16 \\| prompt 1 tok, generated 3 tok")
hqekv_cli_failure(NAME cli_err_gen_synthetic_overwrite ARGS gen-synthetic -o ${_out}/synth-tiny.gguf --layers 2
  MSG "refusing to overwrite existing file")
hqekv_cli_failure(NAME cli_err_gen_synthetic_preset ARGS gen-synthetic -o ${_out}/synth-none.gguf --preset 7b
  MSG "unknown --preset '7b' (known: 1b)")
set_tests_properties(cli_gen_synthetic PROPERTIES FIXTURES_SETUP synth_tiny)
set_tests_properties(cli_gen_synthetic_inspect cli_gen_synthetic_run cli_err_gen_synthetic_overwrite
  PROPERTIES FIXTURES_REQUIRED synth_tiny)

# ---- calibrate ---------------------------------------------------------------
# A short search (6 trials, 4 windows of 128 tokens, < 1 s): a profile for the
# nominal budget, which `run` then accepts for this model.
set(_calib_args calibrate -m ${_root}/models/stories260K.gguf -f ${_root}/data/text/wiki.valid.raw
  --bits 3 --bits-mode nominal --trials 6 --tokens 512 --window 128 -t 1 -q)
hqekv_cli_success(NAME cli_calibrate ARGS ${_calib_args} -o ${_out}/calib-tiny.json --force
  REGEX "profile [^ ]*calib-tiny\\.json: ratios r4/r2/r1/r0 = [0-9.]+/[0-9.]+/[0-9.]+/[0-9.]+[^a-z]+loss [0-9.]+ = KL [0-9.]+ \\+ 2 r1 \\+ 4 r0; true bits [0-9.]+ \\(budget 3 nominal\\); 6 trials"
  FILE ${_out}/calib-tiny.json
  FILE_REGEX "\"achieved_nominal_bits\": [0-3]\\.[0-9]+,.*\"mode\": \"nominal\".*\"tokens\": 512,.*\"window\": 128.*\"format\": \"hqekv-profile\".*\"identity\": \"a52bfa15eb83fa2a\".*\"r4\": 0\\.[0-9]+")
hqekv_cli_success(NAME cli_calibrate_profile_runs ARGS run -n 5 -t 1 --kv hqekv:profile=${_out}/calib-tiny.json
  REGEX "kv hqekv:profile=[^ ]*calib-tiny\\.json \\| prompt 1 tok, generated 5 tok")
hqekv_cli_failure(NAME cli_err_calibrate_exists ARGS ${_calib_args} -o ${_out}/calib-tiny.json
  MSG "pass --force to overwrite it")
set_tests_properties(cli_calibrate PROPERTIES FIXTURES_SETUP calib_tiny)
set_tests_properties(cli_calibrate_profile_runs cli_err_calibrate_exists PROPERTIES FIXTURES_REQUIRED calib_tiny)
hqekv_cli_failure(NAME cli_err_calibrate_impossible ARGS calibrate -m ${_root}/models/stories260K.gguf
  -f ${_root}/data/text/wiki.valid.raw --bits 3 --trials 6 --tokens 512 --window 128 -t 1 -o ${_out}/calib-none.json
  MSG "budget 3 true bits per element is impossible for this model")
hqekv_cli_failure(NAME cli_err_calibrate_no_bits ARGS calibrate -o ${_out}/calib-none.json
  MSG "--bits is required")
