# CLI tests: run the built `anvil` binary and check exit codes and output (tests/cli/expect.cmake),
# then end-to-end runs on small models made by tests/cli/gen_tiny.py, checked against ONNX Runtime.

set(ANVIL_CLI_DIR ${CMAKE_CURRENT_SOURCE_DIR}/cli)
set(ANVIL_CLI_WORK ${CMAKE_CURRENT_BINARY_DIR}/cli_work)

# anvil_cli_test(NAME RC [ARGS ...] [OUT re ...] [ERR re ...] [NOT_OUT re])
# RC is the expected exit code or "nonzero". Regexes must not contain ';', arguments neither
# ';' nor '|'.
function(anvil_cli_test name rc)
  cmake_parse_arguments(T "" "NOT_OUT" "ARGS;OUT;ERR;FIXTURES" ${ARGN})
  set(defs -DEXPECT_RC=${rc} -DCWD=${ANVIL_CLI_WORK})
  set(i 0)
  foreach(re IN LISTS T_OUT)
    math(EXPR i "${i} + 1")
    list(APPEND defs "-DOUT${i}=${re}")
  endforeach()
  set(i 0)
  foreach(re IN LISTS T_ERR)
    math(EXPR i "${i} + 1")
    list(APPEND defs "-DERR${i}=${re}")
  endforeach()
  if(T_NOT_OUT)
    list(APPEND defs "-DNOT_OUT=${T_NOT_OUT}")
  endif()
  list(JOIN T_ARGS "|" args)
  add_test(NAME cli.${name}
           COMMAND ${CMAKE_COMMAND} "-DCMD=$<TARGET_FILE:anvil>|${args}" ${defs}
                   -P ${ANVIL_CLI_DIR}/expect.cmake)
  set_tests_properties(cli.${name} PROPERTIES FIXTURES_REQUIRED "cli_workdir;${T_FIXTURES}"
                                              TIMEOUT 120)
endfunction()

add_test(NAME cli.setup COMMAND ${CMAKE_COMMAND} -E make_directory ${ANVIL_CLI_WORK})
set_tests_properties(cli.setup PROPERTIES FIXTURES_SETUP cli_workdir)

# ---- version, help, usage errors ------------------------------------------------------------
anvil_cli_test(version 0 ARGS --version OUT "^anvil [0-9]+\\.[0-9]+\\.[0-9]+\n$")
anvil_cli_test(help 0 ARGS -h OUT "usage: anvil COMMAND" "exit codes:" "  2  usage error"
               "  info " "  run " "  bench " "  dump " "  tune " "  db " "  sysinfo ")
anvil_cli_test(help_topic 0 ARGS help bench OUT "^usage: anvil bench")
anvil_cli_test(no_args 2 ERR "usage: anvil COMMAND")
foreach(sub info run bench dump tune db sysinfo)
  anvil_cli_test(help.${sub} 0 ARGS ${sub} -h OUT "^usage: anvil ${sub}")
  anvil_cli_test(help_long.${sub} 0 ARGS ${sub} --help OUT "^usage: anvil ${sub}")
endforeach()
anvil_cli_test(bad.command 2 ARGS frobnicate ERR "unknown command 'frobnicate'")
anvil_cli_test(bad.top_option 2 ARGS --frobnicate ERR "unknown option '--frobnicate'")
anvil_cli_test(bad.option 2 ARGS run m.onnx -o out --bogus ERR "anvil run: unknown option '--bogus'"
               "anvil run -h")
anvil_cli_test(bad.short_option 2 ARGS info m.onnx -z ERR "unknown option '-z'")
anvil_cli_test(bad.missing_value 2 ARGS run m.onnx -i x=a.npy -o ERR "option '-o' needs a value")
anvil_cli_test(bad.threads_nan 2 ARGS bench m.onnx --threads abc
               ERR "--threads must be a whole number, got 'abc'")
anvil_cli_test(bad.threads_range 2 ARGS run m.onnx -o out --threads 5000
               ERR "--threads must be between 0 and 1024, got 5000")
anvil_cli_test(bad.threads_negative 2 ARGS bench m.onnx --threads=-3 ERR "between 0 and 1024")
anvil_cli_test(bad.threads_trailing 2 ARGS bench m.onnx --threads 4x ERR "whole number, got '4x'")
anvil_cli_test(bad.iters_zero 2 ARGS bench m.onnx --iters 0 ERR "--iters must be between 1")
anvil_cli_test(bad.warmup_huge 2 ARGS bench m.onnx --warmup 99999999999999999999999
               ERR "--warmup must be a whole number")
anvil_cli_test(bad.shape 2 ARGS bench m.onnx --shape x=1xfoo ERR "shape '1xfoo' must be")
anvil_cli_test(bad.shape_syntax 2 ARGS bench m.onnx --shape 1x3 ERR "NAME=VALUE")
anvil_cli_test(bad.shape_twice 2 ARGS bench m.onnx --shape x=1 --shape x=2 ERR "given twice")
anvil_cli_test(bad.input_syntax 2 ARGS run m.onnx -i novalue -o out ERR "NAME=FILE.npy")
anvil_cli_test(bad.flag_with_value 2 ARGS bench m.onnx --json=1 ERR "does not take a value")
anvil_cli_test(bad.no_model 2 ARGS info ERR "missing the model file")
anvil_cli_test(bad.two_models 2 ARGS dump a.onnx b.onnx ERR "unexpected argument 'b.onnx'")
anvil_cli_test(bad.run_no_outdir 2 ARGS run m.onnx -i x=a.npy ERR "missing -o DIR")
anvil_cli_test(bad.sysinfo_arg 2 ARGS sysinfo extra ERR "unexpected argument 'extra'")
# --precision (run, bench, tune, train, compile) and --tolerance (bench, tune)
foreach(sub run bench tune train compile)
  anvil_cli_test(help_precision.${sub} 0 ARGS ${sub} -h OUT "\n  --precision P  +fp32 \\(default\\), bf16")
  anvil_cli_test(bad.precision.${sub} 2 ARGS ${sub} m.onnx --precision fp8
                 ERR "anvil ${sub}: --precision must be fp32, bf16, fp16, auto or int8, got 'fp8'")
endforeach()
foreach(sub bench tune)
  anvil_cli_test(help_tolerance.${sub} 0 ARGS ${sub} -h OUT "\n  --tolerance X  +precision auto")
  anvil_cli_test(bad.tolerance_zero.${sub} 2 ARGS ${sub} m.onnx --tolerance 0
                 ERR "--tolerance must be a positive number \\(e.g. 0.01\\), got '0'")
endforeach()
anvil_cli_test(bad.tolerance_text 2 ARGS bench m.onnx --tolerance 1e-2x
               ERR "--tolerance must be a positive number")
anvil_cli_test(bad.tolerance_inf 2 ARGS tune m.onnx --tolerance inf
               ERR "--tolerance must be a positive number")
anvil_cli_test(bad.tolerance_run 2 ARGS run m.onnx -o out --tolerance 0.1
               ERR "unknown option '--tolerance'")
anvil_cli_test(help_check.bench 0 ARGS bench -h OUT "\n  --check  +also run an fp32 session")
anvil_cli_test(missing_model_file nonzero ARGS info ${ANVIL_CLI_WORK}/does_not_exist.onnx
               ERR "^anvil: error: ANVIL_ERR_[A-Z_]+: ")

# ---- db: the tuning database (files in the work folder) ------------------------------------
anvil_cli_test(db.check 0 ARGS db check --db tune_check.db
               OUT "^tune_check.db: ok, [0-9]+ records\n$")
anvil_cli_test(db.show 0 ARGS db show --db tune_show.db
               OUT "^database: tune_show.db\n" "\nthis machine: cpu=[^\n]+kern=[0-9a-f]+\n"
                   "\nrecords: [0-9]+ \\([0-9]+ of this machine\\)\n$")
anvil_cli_test(db.export 0 ARGS db export --json --db tune_export.db
               OUT "\"schema_version\":[ \t]*1" "\"records\":")
anvil_cli_test(db.prune 0 ARGS db prune --db tune_prune.db OUT "removed [0-9]+ records of other")
anvil_cli_test(db.merge_self 0 ARGS db merge tune_self.db --db tune_self.db
               OUT "^merged tune_self.db into tune_self.db: 0 records")
anvil_cli_test(db.merge_missing 16 ARGS db merge absent.db --db tune_merge.db
               ERR "ANVIL_ERR_IO: tuning database to merge 'absent.db'")
anvil_cli_test(db.not_a_database 16 ARGS db check --db ${CMAKE_BINARY_DIR}/CMakeCache.txt
               ERR "ANVIL_ERR_IO: tuning database '[^']*CMakeCache.txt' is not an SQLite database")
anvil_cli_test(tune.not_a_database 16 ARGS tune m.onnx --db ${CMAKE_BINARY_DIR}/CMakeCache.txt
               ERR "ANVIL_ERR_IO: ")
anvil_cli_test(bad.tune_budget 2 ARGS tune m.onnx --budget 0 ERR "--budget must be between 1")
anvil_cli_test(bad.tune_no_model 2 ARGS tune ERR "missing the model file")
anvil_cli_test(bad.bench_db_empty 2 ARGS bench m.onnx --db= ERR "--db needs a file name")
anvil_cli_test(bad.db_no_action 2 ARGS db ERR "name an action")
anvil_cli_test(bad.db_action 2 ARGS db frob ERR "unknown action 'frob'")
anvil_cli_test(bad.db_export_no_json 2 ARGS db export ERR "pass --json")
anvil_cli_test(bad.db_merge_no_file 2 ARGS db merge ERR "merge needs the file")
anvil_cli_test(bad.db_import_no_file 2 ARGS db import ERR "import needs the JSON file")
anvil_cli_test(bad.db_import_two_files 2 ARGS db import a.json b.json
               ERR "unexpected argument 'b.json'")
# import: a hand-written export with two records goes in, is exported by the CLI, and that
# export goes into a second database and must export the same text; importing it again keeps
# every record (equal medians are not faster). The chain starts from fresh files each run.
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/cli_db_records.json [=[{"schema_version": 1, "records": [
 {"key": "Gemm|[8,16]|t=1", "fingerprint": "fpA", "family": "Gemm", "dims": [8, 16],
  "variant": "gemm_f32", "params": "mr=4;threads=1", "median_ns": 1234.5678901234567,
  "spread": 1.0625, "reps": 30, "max_err": 1e-7, "source": "offline", "unix_time": 1764000000},
 {"key": "Relu|[4]|t=1", "fingerprint": "fpA", "family": "Relu", "dims": [4],
  "variant": "relu_f32", "params": "", "median_ns": 0.30000000000000004, "spread": 1,
  "reps": 5, "max_err": 0, "source": "online", "unix_time": 1764000001}]}
]=])
add_test(NAME cli.db.import_clean COMMAND sh -c "rm -f tune_imp_*"
         WORKING_DIRECTORY ${ANVIL_CLI_WORK})
set_tests_properties(cli.db.import_clean PROPERTIES FIXTURES_SETUP cli_db_clean
                                                    FIXTURES_REQUIRED cli_workdir)
anvil_cli_test(db.import_records 0 ARGS db import ${CMAKE_CURRENT_BINARY_DIR}/cli_db_records.json
               --db tune_imp_a.db FIXTURES cli_db_clean
               OUT "^imported [^\n]*cli_db_records.json into tune_imp_a.db"
                   ": 2 records inserted or replaced, 0 kept\n$")
set_tests_properties(cli.db.import_records PROPERTIES FIXTURES_SETUP cli_db_imported)
set(db_export "'$<TARGET_FILE:anvil>' db export --json --db")
add_test(NAME cli.db.import_export COMMAND sh -c "${db_export} tune_imp_a.db > tune_imp_a.json"
         WORKING_DIRECTORY ${ANVIL_CLI_WORK})
set_tests_properties(cli.db.import_export PROPERTIES FIXTURES_SETUP cli_db_exported
                     FIXTURES_REQUIRED "cli_workdir;cli_db_imported")
anvil_cli_test(db.import 0 ARGS db import tune_imp_a.json --db tune_imp_b.db
               FIXTURES cli_db_exported
               OUT "^imported tune_imp_a.json into tune_imp_b.db: 2 records inserted or "
                   "replaced, 0 kept\n$")
set_tests_properties(cli.db.import PROPERTIES FIXTURES_SETUP cli_db_reimported)
add_test(NAME cli.db.import_round_trip
         COMMAND sh -c "${db_export} tune_imp_b.db > tune_imp_b.json && cmp tune_imp_[ab].json"
         WORKING_DIRECTORY ${ANVIL_CLI_WORK})
set_tests_properties(cli.db.import_round_trip PROPERTIES
                     FIXTURES_REQUIRED "cli_workdir;cli_db_exported;cli_db_reimported")
anvil_cli_test(db.import_again 0 ARGS db import tune_imp_a.json --db tune_imp_b.db
               FIXTURES "cli_db_exported;cli_db_reimported"
               OUT ": 0 records inserted or replaced, 2 kept\n$")
anvil_cli_test(db.import_not_json 11 ARGS db import ${CMAKE_BINARY_DIR}/CMakeCache.txt
               --db tune_imp_c.db FIXTURES cli_db_clean
               ERR "ANVIL_ERR_INVALID_ARGUMENT: importing '[^']*CMakeCache.txt': not JSON")
anvil_cli_test(db.import_missing 16 ARGS db import absent.json --db tune_imp_c.db
               FIXTURES cli_db_clean ERR "ANVIL_ERR_IO: importing 'absent.json': cannot open it")
add_test(NAME cli.db.env_path
         COMMAND ${CMAKE_COMMAND} -E env ANVIL_TUNING_DB=${ANVIL_CLI_WORK}/tune_env.db
                 ${CMAKE_COMMAND} "-DCMD=$<TARGET_FILE:anvil>|db|check" -DEXPECT_RC=0
                 "-DOUT1=tune_env.db: ok, 0 records" -P ${ANVIL_CLI_DIR}/expect.cmake)
set_tests_properties(cli.db.env_path PROPERTIES FIXTURES_REQUIRED cli_workdir)

# ---- sysinfo -----------------------------------------------------------------------------
string(CONCAT isa_re "\nAVX2 = [01]\nFMA = [01]\nF16C = [01]\nAVX_VNNI = [01]\nAVX512F = [01]"
       "\nAVX512BW = [01]"
       "\nAVX512VL = [01]\nAVX512DQ = [01]\nAVX512CD = [01]\nAVX512_VNNI = [01]"
       "\nAVX512_BF16 = [01]\nAVX512_FP16 = [01]\nAMX_TILE = [01]\nAMX_BF16 = [01]"
       "\nAMX_INT8 = [01]\n")
# the measured peaks: fp32 on every x86-64 (the baseline SSE loop at least), the rest 0 or more
string(CONCAT peak_re "\npeak\\.fp32\\.gflops = [1-9][0-9]*\\.[0-9]\npeak\\.fp32\\.isa = [a-z0-9]+_f32\n"
       "peak\\.bf16\\.gflops = [0-9]+\\.[0-9]\npeak\\.bf16\\.isa = [a-z0-9_]+\n"
       "peak\\.fp16\\.gflops = [0-9]+\\.[0-9]\npeak\\.fp16\\.isa = [a-z0-9_]+\n"
       "peak\\.int8\\.gops = [0-9]+\\.[0-9]\npeak\\.int8\\.isa = [a-z0-9_]+\n")
anvil_cli_test(sysinfo 0 ARGS sysinfo
               OUT "\ncpu\\.model = [^\n]+\n" "\ncpu\\.logical_cores = [1-9][0-9]*\n"
                   "\ncpu\\.physical_cores = [1-9][0-9]*\n"
                   "\ncache\\.l1d = [^\n]+\ncache\\.l2 = [^\n]+\ncache\\.l3 = [^\n]+\n"
                   "${isa_re}" "${peak_re}"
                   "\nbackend\\.cpu = 1\nbackend\\.cuda = [01]\nvendor\\.onednn = [01]"
                   "\nvendor\\.openblas = [01]\nvendor\\.blis = [01]\nonnx\\.parser = nanopb\n")
# ANVIL_ISA=scalar must switch every vector feature off in what sysinfo reports
add_test(NAME cli.sysinfo_isa_cap
         COMMAND ${CMAKE_COMMAND} -E env ANVIL_ISA=scalar
                 ${CMAKE_COMMAND} "-DCMD=$<TARGET_FILE:anvil>|sysinfo" -DEXPECT_RC=0
                 "-DOUT1=\nAVX2 = 0\nFMA = 0\n" "-DOUT2=\nAVX512F = 0\n"
                 "-DOUT3=\nisa\\.cap = scalar\n" "-DOUT4=\nAVX_VNNI = 0\n"
                 "-DOUT5=\npeak\\.fp32\\.isa = sse_f32\n"
                 "-DOUT6=\npeak\\.bf16\\.gflops = 0\\.0\npeak\\.bf16\\.isa = none\n"
                 "-DOUT7=\npeak\\.int8\\.gops = 0\\.0\npeak\\.int8\\.isa = none\n"
                 -P ${ANVIL_CLI_DIR}/expect.cmake)
# ANVIL_ISA=avx2 leaves no bf16 or fp16 loop (they are AVX-512 or AMX)
add_test(NAME cli.sysinfo_peak_avx2
         COMMAND ${CMAKE_COMMAND} -E env ANVIL_ISA=avx2
                 ${CMAKE_COMMAND} "-DCMD=$<TARGET_FILE:anvil>|sysinfo" -DEXPECT_RC=0
                 "-DOUT1=\npeak\\.fp32\\.gflops = [1-9][0-9]*\\.[0-9]\n"
                 "-DOUT2=\npeak\\.bf16\\.gflops = 0\\.0\npeak\\.bf16\\.isa = none\n"
                 "-DOUT3=\npeak\\.fp16\\.gflops = 0\\.0\npeak\\.fp16\\.isa = none\n"
                 -P ${ANVIL_CLI_DIR}/expect.cmake)
# --json: the same keys as one JSON object, numbers as numbers
anvil_cli_test(sysinfo_json 0 ARGS sysinfo --json
               OUT "^.\n  \"anvil\\.version\": \"[0-9]+\\.[0-9]+\\.[0-9]+\",\n"
                   "\n  \"cpu\\.logical_cores\": [1-9][0-9]*,\n" "\n  \"AVX2\": [01],\n"
                   "\n  \"peak\\.fp32\\.gflops\": [1-9][0-9]*\\.[0-9],\n  \"peak\\.fp32\\.isa\": \"[a-z0-9]+_f32\",\n"
                   "\n  \"peak\\.bf16\\.gflops\": [0-9]+\\.[0-9],\n  \"peak\\.bf16\\.isa\": \"[a-z0-9_]+\",\n"
                   "\n  \"peak\\.fp16\\.gflops\": [0-9]+\\.[0-9],\n  \"peak\\.fp16\\.isa\": \"[a-z0-9_]+\",\n"
                   "\n  \"peak\\.int8\\.gops\": [0-9]+\\.[0-9],\n  \"peak\\.int8\\.isa\": \"[a-z0-9_]+\",\n"
                   "\n.\n$")

# ---- end to end on generated models --------------------------------------------------------
set(ANVIL_CLI_PYTHON ${PROJECT_SOURCE_DIR}/.venv/bin/python
    CACHE FILEPATH "Python with onnx, onnxruntime and numpy for the CLI end-to-end tests")
set(ANVIL_CLI_HAVE_PY FALSE)
if(EXISTS ${ANVIL_CLI_PYTHON})
  execute_process(COMMAND ${ANVIL_CLI_PYTHON} -c "import onnx, onnxruntime, numpy"
                  RESULT_VARIABLE py_rc OUTPUT_QUIET ERROR_QUIET)
  if(py_rc EQUAL 0)
    set(ANVIL_CLI_HAVE_PY TRUE)
  endif()
endif()

if(NOT ANVIL_CLI_HAVE_PY)
  message(STATUS "anvil CLI end-to-end tests skipped: no ${ANVIL_CLI_PYTHON} with onnx, "
                 "onnxruntime and numpy")
  add_test(NAME cli.e2e COMMAND sh -c "echo 'skipped: no Python venv with onnx/onnxruntime'; exit 77")
  set_tests_properties(cli.e2e PROPERTIES SKIP_RETURN_CODE 77)
  return()
endif()

set(W ${ANVIL_CLI_WORK})
add_test(NAME cli.e2e.gen COMMAND ${ANVIL_CLI_PYTHON} ${ANVIL_CLI_DIR}/gen_tiny.py ${W})
set_tests_properties(cli.e2e.gen PROPERTIES FIXTURES_SETUP cli_models
                                            FIXTURES_REQUIRED cli_workdir)

function(anvil_cli_check name)
  add_test(NAME cli.e2e.${name} COMMAND ${ANVIL_CLI_PYTHON} ${ANVIL_CLI_DIR}/check.py ${ARGN})
  set_tests_properties(cli.e2e.${name} PROPERTIES FIXTURES_REQUIRED cli_models TIMEOUT 120)
endfunction()

anvil_cli_test(e2e.info 0 ARGS info ${W}/tiny.onnx FIXTURES cli_models
               OUT "opset: 17\n" "inputs \\(1\\):\n  x +FLOAT +\\[N,3,8,8\\]\n"
                   "outputs \\(2\\):\n  probs/out:0 +FLOAT +\\[N,10\\]\n  feat\\.map +FLOAT +\\[N,4,8,8\\]\n"
                   "\nparameters: 762 in 4 initializers, 3048 bytes \\(2\\.98 KiB\\)\n"
                   "\nflops: 15666 \\(15\\.7 K\\) per run, estimated with [^\n]*N=1"
                   "\nops \\(6 types\\):\n(  [A-Za-z]+ +1\n)+$")
anvil_cli_test(e2e.info_static 0 ARGS info ${W}/collide.onnx FIXTURES cli_models
               OUT "\nflops: 3 per run, from static shapes\n" "\nparameters: 0 in 0 initializers"
                   "\nops \\(2 types\\):\n  Identity +1\n  Neg +1\n$")
anvil_cli_test(e2e.run 0 ARGS run ${W}/tiny.onnx -i x=${W}/x.npy -o ${W}/run_out/nested
               FIXTURES cli_models
               OUT "probs/out:0 -> [^\n]*/run_out/nested/probs_out_0\\.npy FLOAT \\[2,10\\]\n"
                   "feat\\.map -> [^\n]*/run_out/nested/feat_map\\.npy FLOAT \\[2,4,8,8\\]\n")
set_tests_properties(cli.e2e.run PROPERTIES FIXTURES_SETUP cli_run_out)
anvil_cli_check(run_probs npy ${W}/run_out/nested/probs_out_0.npy ${W}/expected/probs_out_0.npy)
anvil_cli_check(run_feat npy ${W}/run_out/nested/feat_map.npy ${W}/expected/feat_map.npy)
set_tests_properties(cli.e2e.run_probs cli.e2e.run_feat PROPERTIES
                     FIXTURES_REQUIRED "cli_models;cli_run_out")

anvil_cli_test(e2e.run_collide 0 ARGS run ${W}/collide.onnx -i v=${W}/v.npy -o ${W}/collide_out
               --threads 1 FIXTURES cli_models
               OUT "o\\.1 -> [^\n]*/collide_out/o_1\\.npy FLOAT \\[3\\]\n"
                   "o_1 -> [^\n]*/collide_out/o_1_1\\.npy FLOAT \\[3\\]\n")
set_tests_properties(cli.e2e.run_collide PROPERTIES FIXTURES_SETUP cli_collide_out)
anvil_cli_check(collide_first npy ${W}/collide_out/o_1.npy ${W}/expected/collide_first.npy)
anvil_cli_check(collide_second npy ${W}/collide_out/o_1_1.npy ${W}/expected/collide_second.npy)
set_tests_properties(cli.e2e.collide_first cli.e2e.collide_second PROPERTIES
                     FIXTURES_REQUIRED "cli_models;cli_collide_out")

anvil_cli_test(e2e.run_missing_input 11 ARGS run ${W}/tiny.onnx -o ${W}/unused FIXTURES cli_models
               ERR "ANVIL_ERR_INVALID_ARGUMENT: missing inputs: 'x' \\(FLOAT \\[N,3,8,8\\]\\)")
anvil_cli_test(e2e.run_missing_one_of_two 11 ARGS run ${W}/gather.onnx -i idx=${W}/x.npy
               -o ${W}/unused FIXTURES cli_models ERR "missing inputs: 'a' \\(FLOAT \\[N,4\\]\\)"
               NOT_OUT "->")
anvil_cli_test(e2e.run_unknown_input 11 ARGS run ${W}/tiny.onnx -i nope=${W}/x.npy -o ${W}/unused
               FIXTURES cli_models
               ERR "the model has no input named 'nope'" "the model's inputs are: 'x' FLOAT \\[N,3,8,8\\]")
anvil_cli_test(e2e.run_input_twice 11 ARGS run ${W}/tiny.onnx -i x=${W}/x.npy -i x=${W}/x.npy
               -o ${W}/unused FIXTURES cli_models ERR "input 'x' is given twice")
anvil_cli_test(e2e.run_bad_npy nonzero ARGS run ${W}/tiny.onnx -i x=${W}/no_such.npy -o ${W}/unused
               FIXTURES cli_models ERR "anvil: error: ANVIL_ERR_[A-Z_]+: input 'x': ")
anvil_cli_test(e2e.run_outdir_is_file 16 ARGS run ${W}/tiny.onnx -i x=${W}/x.npy -o ${W}/x.npy
               FIXTURES cli_models ERR "ANVIL_ERR_IO: ")
anvil_cli_test(e2e.run_profile 0 ARGS run ${W}/tiny.onnx -i x=${W}/x.npy -o ${W}/prof_out
               --profile ${W}/run_profile.json --threads 1 FIXTURES cli_models)
set_tests_properties(cli.e2e.run_profile PROPERTIES FIXTURES_SETUP cli_profile)
anvil_cli_check(run_profile_trace trace ${W}/run_profile.json)
set_tests_properties(cli.e2e.run_profile_trace PROPERTIES
                     FIXTURES_REQUIRED "cli_models;cli_profile")

# Forced variants: by node (strict) and by op type; the trace names what ran, outputs unchanged.
anvil_cli_test(e2e.run_forced 0 ARGS run ${W}/tiny.onnx -i x=${W}/x.npy -o ${W}/forced_out
               --variant fc1=gemm_f32_4x8_portable --variant Conv=reference
               --profile ${W}/forced_profile.json --threads 2 FIXTURES cli_models)
set_tests_properties(cli.e2e.run_forced PROPERTIES FIXTURES_SETUP cli_forced)
anvil_cli_check(run_forced_trace trace-variants ${W}/forced_profile.json
                fc1=gemm_f32_4x8_portable conv1=reference)
anvil_cli_check(run_forced_probs npy ${W}/forced_out/probs_out_0.npy ${W}/expected/probs_out_0.npy)
set_tests_properties(cli.e2e.run_forced_trace cli.e2e.run_forced_probs PROPERTIES
                     FIXTURES_REQUIRED "cli_models;cli_forced")
anvil_cli_test(e2e.run_forced_unknown_variant 11 ARGS run ${W}/tiny.onnx -i x=${W}/x.npy
               -o ${W}/unused --variant Gemm=gemm_f32_99x99 FIXTURES cli_models
               ERR "Gemm has no variant named 'gemm_f32_99x99'; it has: reference, gemm_i8_dynamic, gemm_bf16_32x32_amx, gemm_bf16, gemm_fp16, gemm_f32")
anvil_cli_test(e2e.run_forced_unknown_node 11 ARGS run ${W}/tiny.onnx -i x=${W}/x.npy
               -o ${W}/unused --variant nosuchnode=reference FIXTURES cli_models
               ERR "'nosuchnode' is neither a node of the model nor an op type")
anvil_cli_test(e2e.run_forced_every_node 0 ARGS run ${W}/tiny.onnx -i x=${W}/x.npy
               -o ${W}/unused --variant relu1=reference --variant fc1=gemm_f32 --variant
               softmax1=reference --variant pool1=reference --variant conv1=reference
               --variant flatten1=reference FIXTURES cli_models OUT "probs/out:0 -> ")
anvil_cli_test(e2e.run_forced_bad_syntax 2 ARGS run ${W}/tiny.onnx --variant fc1 -o ${W}/unused
               FIXTURES cli_models ERR "--variant must look like NAME=VALUE")

anvil_cli_test(e2e.bench_text 0 ARGS bench ${W}/tiny.onnx --iters 3 --warmup 1 --threads 1
               FIXTURES cli_models
               OUT "threads: 1\n" "  x +FLOAT +\\[1,3,8,8\\] \\(random\\)\n"
                   "\nload: [0-9.]+ ms\n" "\nfirst run: [0-9.]+ ms"
                   "\nlatency over 3 runs \\(after 1 warmup\\): min [0-9.]+ ms, median"
                   "\nthroughput: [0-9.]+ inferences/s\nmemory: arena "
               ERR "input 'x' dimension 0 \\(N\\) is symbolic. using 1")
anvil_cli_check(bench_json bench-json $<TARGET_FILE:anvil> ${W}/tiny.onnx --iters 4 --warmup 0
                --threads 1 --shape x=2x3x8x8 --expect iterations=4 threads=1
                inputs.0.shape=[2,3,8,8] inputs.0.source=random)
anvil_cli_check(bench_json_file bench-json $<TARGET_FILE:anvil> ${W}/tiny.onnx --iters 2
                -i x=${W}/x.npy --expect inputs.0.source=file inputs.0.shape=[2,3,8,8])
anvil_cli_check(bench_json_ints bench-json $<TARGET_FILE:anvil> ${W}/gather.onnx --iters 2
                --shape a=3x4 --expect inputs.0.shape=[3,4] inputs.1.dtype=INT64
                inputs.1.shape=[3])
# precision: fp16 runs (fp16 GEMMs where the CPU has AVX512-FP16, else fp32 with a warning) and
# is checked against fp32 like bf16; compile takes it (emit.random_fp16 checks the libraries);
# --check compares with an fp32 session (fp32 against itself: errors 0, every top-1 agrees)
anvil_cli_test(e2e.bench_check_fp16 0 ARGS bench ${W}/tiny.onnx --iters 2 --warmup 0 --threads 1
               --precision fp16 --check --explain FIXTURES cli_models
               OUT "\nprecision: fp16\n"
                   "\naccuracy of precision fp16 against fp32 \\(one run of each on the same inputs\\):\n"
                   "\nfc1 +Gemm +[a-z0-9_]+ +(fp32|fp16) +")
anvil_cli_test(e2e.compile_fp16 0 ARGS compile ${W}/tiny.onnx --shape x=1x3x8x8 -o ${W}/lib_fp16
               --precision fp16 FIXTURES cli_models)
anvil_cli_check(bench_check_fp32 bench-json $<TARGET_FILE:anvil> ${W}/tiny.onnx --iters 2
                --warmup 0 --threads 1 --shape x=3x3x8x8 --precision fp32 --check
                --expect precision=fp32 check.reference=fp32 check.outputs.0.name=probs/out:0
                check.outputs.0.max_rel_err=0 check.outputs.0.mean_rel_err=0
                check.outputs.0.top1_agreement=1 check.outputs.0.rows=3
                check.outputs.1.name=feat.map check.outputs.1.max_rel_err=0)
anvil_cli_test(e2e.bench_check_bf16 0 ARGS bench ${W}/tiny.onnx --iters 2 --warmup 0 --threads 1
               --precision bf16 --check --explain FIXTURES cli_models
               OUT "\nprecision: bf16\n"
                   "\naccuracy of precision bf16 against fp32 \\(one run of each on the same inputs\\):\n"
                   "\nprobs/out:0 +[0-9.e+-]+ +[0-9.e+-]+  [0-9.]+% of 1 rows\n"
                   "\nfeat.map +[0-9.e+-]+ +[0-9.e+-]+  -\n"
                   "\nfc1 +Gemm +[a-z0-9_]+ +(fp32|bf16) +")
# int8: the Gemm in dynamic int8 where the CPU has AVX512-VNNI, checked against fp32 the same way
anvil_cli_test(e2e.bench_check_int8 0 ARGS bench ${W}/tiny.onnx --iters 2 --warmup 0 --threads 1
               --precision int8 --check --explain FIXTURES cli_models
               OUT "\nprecision: int8\n"
                   "\naccuracy of precision int8 against fp32 \\(one run of each on the same inputs\\):\n"
                   "\nfc1 +Gemm +[a-z0-9_]+ +(fp32|int8) +")
anvil_cli_test(e2e.bench_no_check 0 ARGS bench ${W}/tiny.onnx --iters 2 --warmup 0 --threads 1
               FIXTURES cli_models OUT "\nprecision: fp32\n" NOT_OUT "accuracy")
# A precision without the ISA for it (ANVIL_ISA=avx2 hides AVX-512 and AMX on every CPU): a
# warning that names what is missing, and the session runs fp32 kernels.
function(anvil_cli_precision_without_isa precision missing)
  add_test(NAME cli.e2e.${precision}_without_isa
           COMMAND ${CMAKE_COMMAND} -E env ANVIL_ISA=avx2
                   ${CMAKE_COMMAND} "-DCMD=$<TARGET_FILE:anvil>|bench|${W}/tiny.onnx|--iters|1|--precision|${precision}"
                   -DEXPECT_RC=0
                   "-DERR1=anvil warn: precision ${precision} asked for, but [^\n]* ${missing}: the session runs fp32 kernels instead"
                   -P ${ANVIL_CLI_DIR}/expect.cmake)
  set_tests_properties(cli.e2e.${precision}_without_isa
                       PROPERTIES FIXTURES_REQUIRED "cli_workdir;cli_models")
endfunction()
anvil_cli_precision_without_isa(bf16 "neither AVX512_BF16 nor AMX-BF16")
anvil_cli_precision_without_isa(fp16 "no AVX512-FP16")
anvil_cli_precision_without_isa(auto "no AVX512_BF16, AMX-BF16 or AVX512-FP16")
anvil_cli_precision_without_isa(int8 "no AVX512-VNNI")
# the other commands take it too
anvil_cli_test(e2e.run_bf16 0 ARGS run ${W}/tiny.onnx -i x=${W}/x.npy -o ${W}/out_bf16
               --precision bf16 FIXTURES cli_models OUT "probs/out:0 -> ")
anvil_cli_test(e2e.run_fp16 0 ARGS run ${W}/tiny.onnx -i x=${W}/x.npy -o ${W}/out_fp16
               --precision fp16 FIXTURES cli_models OUT "probs/out:0 -> ")

anvil_cli_test(e2e.bench_shape_fixed_dim 11 ARGS bench ${W}/tiny.onnx --shape x=2x5x8x8
               FIXTURES cli_models ERR "dimension 1 is fixed to 3 by the model")
anvil_cli_test(e2e.bench_shape_rank 11 ARGS bench ${W}/tiny.onnx --shape x=2x3x8
               FIXTURES cli_models ERR "has rank 3 but the model declares \\[N,3,8,8\\]")
anvil_cli_test(e2e.bench_shape_unknown 11 ARGS bench ${W}/tiny.onnx --shape y=1
               FIXTURES cli_models ERR "--shape names 'y', which is not an input of the model")

anvil_cli_test(e2e.dump_text 0 ARGS dump ${W}/tiny.onnx FIXTURES cli_models
               OUT "^graph 'tiny' \\(opset 17\\): 1 inputs, 2 outputs, 6 nodes, 4 initializers"
                   "#0 conv1 = Conv\\(x\\[N,3,8,8\\], w\\[4,3,3,3\\], b\\[4\\]\\) -> conv_out: FLOAT\\[N,4,8,8\\] \\{[^\n]*kernel_shape=\\[3,3\\]"
                   "#5 softmax1 = Softmax\\(logits\\[N,10\\]\\) -> probs/out:0: FLOAT\\[N,10\\] \\{axis=-1\\}")
# the graph a session runs: Relu fused into the conv (which now writes the Relu's output)
anvil_cli_test(e2e.dump_opt 0 ARGS dump ${W}/tiny.onnx --opt-level 1 FIXTURES cli_models
               OUT "5 nodes"
                   "#0 conv1 = Conv\\(x\\[N,3,8,8\\], w\\[4,3,3,3\\], b\\[4\\]\\) -> feat.map: [^\n]* fused\\[Relu\\]\n")
anvil_cli_test(e2e.dump_opt_bad 2 ARGS dump ${W}/tiny.onnx --opt-level 7 FIXTURES cli_models
               ERR "--opt-level must be between 0 and 3, got 7")
# --passes: the pass summary line says what ran; fuse_epilogue off keeps the Relu; bench runs
# the unfused graph; an unknown pass is a usage error that lists the passes
anvil_cli_test(e2e.dump_passes 0 ARGS dump ${W}/tiny.onnx --opt-level 1 FIXTURES cli_models
               OUT "^passes: const_nodes 0 [^\n]*; fuse_epilogue 1 [^\n]*\n" "5 nodes")
anvil_cli_test(e2e.dump_passes_off 0 ARGS dump ${W}/tiny.onnx --opt-level 1 --passes -fuse_epilogue
               FIXTURES cli_models OUT "fuse_epilogue off" "6 nodes" NOT_OUT "fused\\[")
anvil_cli_test(e2e.bench_passes_off 0 ARGS bench ${W}/tiny.onnx --iters 2 --json
               --passes none,+fold_conv_bn FIXTURES cli_models OUT "\"nodes_run\":5")
anvil_cli_test(e2e.passes_bad 2 ARGS run ${W}/tiny.onnx --passes -fuse_everything
               FIXTURES cli_models
               ERR "'fuse_everything' is not a pass; the passes are const_nodes, [^\n]*fuse_attention")
anvil_cli_test(e2e.dump_onnx 0 ARGS dump ${W}/tiny.onnx --opt-level 1 --onnx ${W}/tiny_opt.onnx
               FIXTURES cli_models OUT "^passes: ")
anvil_cli_test(e2e.dump_onnx_and_dot 2 ARGS dump ${W}/tiny.onnx --dot ${W}/t.dot --onnx ${W}/t.onnx
               FIXTURES cli_models ERR "--dot and --onnx: give one of them")
anvil_cli_test(e2e.dump_onnx_unwritable 16 ARGS dump ${W}/tiny.onnx --onnx ${W}/no/such/dir/t.onnx
               FIXTURES cli_models ERR "cannot open '[^']*t.onnx' for writing")
anvil_cli_test(e2e.bench_opt0 0 ARGS bench ${W}/tiny.onnx --opt-level 0 --iters 2 --json
               FIXTURES cli_models OUT "\"opt_level\":0" "\"nodes_run\":5")
anvil_cli_test(e2e.bench_opt1 0 ARGS bench ${W}/tiny.onnx --iters 2 --json
               FIXTURES cli_models OUT "\"opt_level\":1" "\"nodes_run\":4")
anvil_cli_test(e2e.dump_dot_stdout 0 ARGS dump ${W}/tiny.onnx --dot - FIXTURES cli_models
               OUT "^digraph \"tiny\" \\{\n" "shape=note" "\\}\n$")
anvil_cli_test(e2e.dump_dot 0 ARGS dump ${W}/tiny.onnx --dot ${W}/tiny.dot FIXTURES cli_models
               NOT_OUT ".")
set_tests_properties(cli.e2e.dump_dot PROPERTIES FIXTURES_SETUP cli_dot)
anvil_cli_check(dump_dot_valid dot ${W}/tiny.dot)
set_tests_properties(cli.e2e.dump_dot_valid PROPERTIES FIXTURES_REQUIRED "cli_models;cli_dot")
anvil_cli_test(e2e.dump_dot_bad_path 16 ARGS dump ${W}/tiny.onnx --dot ${W}/no/such/dir/x.dot
               FIXTURES cli_models ERR "ANVIL_ERR_IO: cannot open '[^']*x\\.dot' for writing")
# --precision: the plan of a session at that precision, node by node, and its bf16 regions
anvil_cli_test(e2e.dump_precision_fp32 0 ARGS dump ${W}/tiny.onnx --precision fp32 --threads 1
               FIXTURES cli_models
               OUT "^node +op +variant +compute +storage +region\n"
                   "\nfc1 +Gemm +[a-z0-9_]+ +fp32 +fp32 +-\n"
                   "\n0 of [0-9]+ nodes compute in bf16, 0.0% of the [0-9.e+-]+ GFLOP, in 0 regions\n"
               NOT_OUT "\nregion  nodes")
anvil_cli_test(e2e.dump_precision_bf16 0 ARGS dump ${W}/tiny.onnx --precision bf16 --threads 1
               --shape x=2x3x8x8 FIXTURES cli_models
               OUT "\nfc1 +Gemm +[a-z0-9_]+ +(fp32 +fp32 +-|bf16 +[a-z0-9+ ]+ +[0-9]+)\n"
                   "\n[0-9]+ of [0-9]+ nodes compute in bf16, [0-9.]+% of the [0-9.e+-]+ GFLOP, in [0-9]+ regions?\n")
anvil_cli_test(e2e.dump_precision_input 0 ARGS dump ${W}/tiny.onnx --precision fp32 -i x=${W}/x.npy
               FIXTURES cli_models OUT "\nfc1 +Gemm +[a-z0-9_]+ +fp32 +fp32 +-\n")
anvil_cli_test(e2e.dump_precision_input_unknown 11 ARGS dump ${W}/tiny.onnx --precision fp32
               -i nope=${W}/x.npy FIXTURES cli_models ERR "the model has no input named 'nope'")
anvil_cli_test(e2e.dump_precision_dot 2 ARGS dump ${W}/tiny.onnx --precision bf16 --dot -
               FIXTURES cli_models ERR "--precision prints the plan's formats as text; drop --dot")
anvil_cli_test(e2e.dump_threads_alone 2 ARGS dump ${W}/tiny.onnx --threads 1
               FIXTURES cli_models ERR "--tolerance, --threads, --shape and -i go with --precision")
anvil_cli_test(help_precision.dump 0 ARGS dump -h OUT "\n  --precision P    fp32, bf16, fp16, auto or int8")
anvil_cli_test(bad.precision.dump 2 ARGS dump m.onnx --precision fp8
               ERR "anvil dump: --precision must be fp32, bf16, fp16, auto or int8, got 'fp8'")

# ---- tune: the offline tuner and sessions reading its database ----------------------------
add_test(NAME cli.e2e.tune COMMAND ${ANVIL_CLI_PYTHON} ${ANVIL_CLI_DIR}/check_tune.py
                                   $<TARGET_FILE:anvil> ${W}/tune)
set_tests_properties(cli.e2e.tune PROPERTIES FIXTURES_REQUIRED cli_workdir TIMEOUT 900)
# precision auto: bf16 kept only within the tolerance, and the report says why not elsewhere
add_test(NAME cli.e2e.precision_auto
         COMMAND ${ANVIL_CLI_PYTHON} ${ANVIL_CLI_DIR}/check_precision_auto.py $<TARGET_FILE:anvil>
                 ${PROJECT_SOURCE_DIR}/tests/unit/data/api_matmul.onnx ${W}/precision_auto)
set_tests_properties(cli.e2e.precision_auto PROPERTIES FIXTURES_REQUIRED cli_workdir TIMEOUT 300
                                                       SKIP_RETURN_CODE 77)
