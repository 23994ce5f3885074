/* anvil_kbench: kernel benchmarks, printed as markdown tables (and JSON on request).
 *
 *   anvil_kbench peak [--threads 1,2] [--seconds S] [--json F]
 *   anvil_kbench gemm [--shapes squares|transformer|all] [--big] [--threads 1,2] [--variants a,b]
 *                     [--reps N] [--json F] ...
 *   anvil_kbench conv [--set resnet50|vgg16|mobilenetv2_dw|all] [--threads 1,2] [--variants a,b]
 *                     [--reps N] [--json F] ...
 *
 * A benchmark, never a test: it reports times and never fails on one. The variants are discovered
 * from the variant table at run time (kern_variants), so kernels added later by anyone are
 * measured without a change here. `anvil_kbench help` lists every option; bench/kernels.md says
 * what the columns mean. */
#include "kbench.h"

#include "api/env.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(void) {
    fprintf(
        stderr,
        "usage: anvil_kbench COMMAND [options]\n"
        "  peak   the machine's multiply-accumulate peak per ISA (fp32 AVX-512/AVX2/SSE,\n"
        "         AVX512-BF16, AVX512-FP16, AMX-BF16, int8 AVX512-VNNI/AVX-VNNI/AMX-INT8 where\n"
        "         present), 1 thread and all threads\n"
        "  gemm   every applicable MatMul variant on square and transformer shapes\n"
        "  conv   every applicable Conv variant on ResNet-50, VGG-16, MobileNetV2 layers\n"
        "Run 'anvil_kbench COMMAND --help' for the options of a command.\n");
}

int main(int argc, char **argv) {
    api_env_init(); /* ANVIL_ISA caps what the kernels see, as in anvil */
    if (argc < 2) {
        usage();
        return 2;
    }
    /* oneDNN's OpenMP workers spin after each call for GOMP_SPINCOUNT polls, by default 300000
     * (milliseconds here): round-robin timing then runs the next variant with one of its two
     * threads sharing a CPU with a spinning one, and anvil's 2-thread runs read at 1 thread's
     * speed in about half the repetitions (at 10000 the variant right after oneDNN still lost
     * a tenth). Bounded to 1000 (microseconds), every variant of a round starts from sleeping
     * workers alike. libgomp reads the
     * variable when it loads, so the process starts again with it set; an explicit setting of it
     * or of OMP_WAIT_POLICY is kept. */
    if (!getenv("GOMP_SPINCOUNT") && !getenv("OMP_WAIT_POLICY") &&
        setenv("GOMP_SPINCOUNT", "1000", 1) == 0)
        execv("/proc/self/exe", argv); /* on failure, go on as we are */
    /* Detection first: it also asks Linux for the AMX tile state, which threads started later
     * inherit. */
    (void)core_hw_get();
    if (!strcmp(argv[1], "peak")) return kb_cmd_peak(argc - 2, argv + 2);
    if (!strcmp(argv[1], "gemm")) return kb_cmd_gemm(argc - 2, argv + 2);
    if (!strcmp(argv[1], "conv")) return kb_cmd_conv(argc - 2, argv + 2);
    usage();
    return !strcmp(argv[1], "help") || !strcmp(argv[1], "--help") ? 0 : 2;
}
