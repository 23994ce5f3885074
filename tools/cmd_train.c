/* anvil train: trains a model's weights on arrays from an .npz file (anvil.h's training session)
 * and writes the trained model as ONNX. Epochs of shuffled batches (the last partial batch of an
 * epoch is left out of the updates, as a seeded shuffle reaches every sample over the epochs);
 * a progress line per epoch on stderr, the validation set evaluated after each, a summary on
 * stdout (or one JSON object). */
#include "cli.h"
#include "core/core.h"
#include "train_common.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void cli_train_usage(FILE *f) {
    fputs(
        "usage: anvil train MODEL.onnx --data FILE.npz -o TRAINED.onnx [options]\n"
        "\n"
        "Trains the model's float32 initializers. FILE.npz holds one array per model input,\n"
        "named after it, with the samples along the first dim, and the targets in an array\n"
        "named `labels` (int64 class indices for cross_entropy and nll, floats of the output's\n"
        "shape for mse). Each epoch shuffles the samples (seeded) and steps through batches of\n"
        "--batch; the last partial batch of an epoch is not trained on.\n"
        "\n"
        "options:\n"
        "  --data FILE.npz            the training set (required)\n"
        "  --val FILE.npz             a validation set, evaluated after every epoch\n"
        "  -o, --out FILE.onnx        where the trained model goes (required)\n"
        "  --loss cross_entropy|nll|mse  the loss (default cross_entropy): softmax cross-entropy\n"
        "                             of logits [N, C]; nll: the mean negative log-likelihood of\n"
        "                             an output that holds log-probabilities [N, C] (a\n"
        "                             LogSoftmax's; PyTorch's nll_loss); mse: mean squared error\n"
        "  --output NAME              the model output the loss reads (default: the first)\n"
        "  --labels NAME              the array of targets (default labels)\n"
        "  --optimizer sgd|adam|adamw (default sgd)\n"
        "  --lr X                     learning rate (default 0.01)\n"
        "  --momentum M               SGD momentum (default 0); --nesterov for Nesterov's\n"
        "  --weight-decay W           L2 for sgd and adam, decoupled for adamw (default 0)\n"
        "  --schedule constant|step|cosine  learning rate over the epochs (default constant;\n"
        "                             step: x0.1 every --step-epochs, default 30)\n"
        "  --warmup N                 steps of linear warm-up (default 0)\n"
        "  --clip NORM                clip the gradients' global L2 norm\n"
        "  --accumulate K             sum K batches' gradients per update (default 1)\n"
        "  --epochs N                 (default 10)   --batch B (default 32)\n"
        "  --seed S                   shuffle seed (default 1)\n"
        "  --threads T                threads (default: all cores)\n"
        "  --opt-level N              graph rewrites of the training graph (default 1, 0: none)\n"
        "  --checkpoint FILE          save parameters and optimizer state after every epoch\n"
        "                             (atomically: an interrupted run keeps the last one)\n"
        "  --resume                   continue from --checkpoint FILE when it exists\n"
        "  --profile FILE.json        write per-node timings of the training steps as a Chrome\n"
        "                             trace (forward, backward and loss nodes)\n"
        "  --precision P              fp32 (default), bf16 (MatMul/Gemm round their operands to\n"
        "                             bfloat16 and accumulate in fp32, forward and backward;\n"
        "                             parameters, gradients and optimizer state stay fp32),\n"
        "                             auto (bf16 where tuning finds it faster); fp16 is\n"
        "                             refused (no loss scaling: use bf16)\n" CLI_TUNING_HELP
        "  --tune offline             measure every node of the training graph (forward and\n"
        "                             backward) before the first step, as anvil tune does,\n"
        "                             and train with the winners\n"
        "  --json                     print the summary as one JSON object\n"
        "  -q, --quiet                no progress lines\n"
        "  -h, --help                 show this help\n",
        f);
}

enum {
    O_DATA = 1,
    O_VAL,
    O_OUT,
    O_LOSS,
    O_OUTPUT,
    O_LABELS,
    O_OPT,
    O_LR,
    O_MOM,
    O_NESTEROV,
    O_WD,
    O_SCHED,
    O_STEP,
    O_WARMUP,
    O_CLIP,
    O_ACC,
    O_EPOCHS,
    O_BATCH,
    O_SEED,
    O_THREADS,
    O_JSON,
    O_QUIET,
    O_OPT_LEVEL,
    O_CKPT,
    O_RESUME,
    O_PROFILE,
    O_PRECISION
};

typedef struct train_args {
    const char *model, *data, *val, *out, *output, *labels;
    anvil_train_config cfg;
    const char *schedule, *checkpoint, *profile;
    cli_tuning tuning;
    bool offline;       /* --tune offline: tune the training graph before the first step */
    char db_path[4096]; /* where --tune offline writes */
    long long epochs, batch, seed, warmup, step_epochs;
    bool json, quiet, resume;
} train_args;

/* The loss reads class scores (logits or log-probabilities) against class indices: accuracy is
 * reported. */
static bool classifies(const anvil_train_config *c) {
    return c->loss == ANVIL_LOSS_CROSS_ENTROPY || c->loss == ANVIL_LOSS_NLL;
}

/* Correct argmax predictions of a [B, C] float tensor against int64 labels (0 without them). */
static int64_t correct(const anvil_tensor *pred, const anvil_tensor *labels) {
    if (!pred || anvil_tensor_rank(pred) != 2 || anvil_tensor_dtype(labels) != ANVIL_DTYPE_INT64)
        return 0;
    const int64_t b = anvil_tensor_dims(pred)[0], c = anvil_tensor_dims(pred)[1];
    const float *p = anvil_tensor_data((anvil_tensor *)pred);
    const int64_t *l = anvil_tensor_data((anvil_tensor *)labels);
    int64_t hits = 0;
    for (int64_t i = 0; i < b; i++) {
        int64_t best = 0;
        for (int64_t j = 1; j < c; j++)
            if (p[i * c + j] > p[i * c + best]) best = j;
        hits += best == l[i];
    }
    return hits;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t next_rand(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef struct pass_stats {
    double loss;
    int64_t hits, seen;
} pass_stats;

/* One pass over d: training steps (train) or evaluation, batches of b. */
static anvil_status epoch(anvil_train_session *ts, const train_args *a, const cli_dataset *d,
                          const char *const *names, size_t n_in, bool train, int64_t *order,
                          long long ep, long long *step, long long total_steps, pass_stats *out) {
    memset(out, 0, sizeof *out);
    const int64_t n = d->samples, b = a->batch;
    const int64_t batches = train ? n / b : (n + b - 1) / b;
    anvil_tensor *batch[65] = {NULL};
    anvil_status st = ANVIL_OK;
    const double t0 = now_s();
    for (int64_t k = 0; k < batches && st == ANVIL_OK; k++) {
        const int64_t bs = k * b + b <= n ? b : n - k * b;
        st = cli_dataset_gather(d, n_in + 1, order + k * b, bs, batch);
        if (st != ANVIL_OK) break;
        if (train) {
            /* warm-up, then the schedule */
            double lr = a->cfg.lr;
            if (!strcmp(a->schedule, "cosine"))
                lr *= 0.5 * (1.0 + cos(3.14159265358979 * (double)*step / (double)total_steps));
            else if (!strcmp(a->schedule, "step"))
                lr *= pow(0.1, (double)((ep - 1) / a->step_epochs));
            if (a->warmup > 0 && *step < a->warmup) lr *= (double)(*step + 1) / (double)a->warmup;
            anvil_train_set_lr(ts, (float)lr);
        }
        float loss;
        anvil_tensor *pred = NULL;
        st = (train ? anvil_train_step : anvil_train_eval)(
            ts, n_in, names, (const anvil_tensor *const *)batch, batch[n_in], &loss, &pred);
        if (st != ANVIL_OK) break;
        out->loss += (double)loss * (double)bs;
        out->hits += correct(pred, batch[n_in]);
        out->seen += bs;
        anvil_tensor_free(pred);
        if (train) (*step)++;
        /* a terminal sees the line redrawn; a log gets it once per epoch */
        if (train && !a->quiet && (k + 1 == batches || (k % 8 == 0 && isatty(2)))) {
            const double dt = now_s() - t0, rate = (double)out->seen / (dt > 0 ? dt : 1e-9);
            const int width = 24, filled = (int)((k + 1) * width / batches);
            fprintf(stderr, "%sepoch %lld/%lld [%.*s%*s] loss %.4f", isatty(2) ? "\r" : "", ep,
                    a->epochs, filled, "########################", width - filled, "",
                    out->loss / (double)out->seen);
            if (classifies(&a->cfg))
                fprintf(stderr, " acc %5.1f%%", 100.0 * (double)out->hits / (double)out->seen);
            fprintf(stderr, " %.0f samples/s ETA %.0fs ", rate,
                    (double)(n - out->seen) / (rate > 0 ? rate : 1));
        }
    }
    for (size_t i = 0; i <= n_in && i < 65; i++) anvil_tensor_free(batch[i]);
    if (out->seen) out->loss /= (double)out->seen;
    return st;
}

static bool parse_args(int argc, char **argv, train_args *a) {
    static const cli_option opts[] = {{"data", 0, true, O_DATA},
                                      {"val", 0, true, O_VAL},
                                      {"out", 'o', true, O_OUT},
                                      {"loss", 0, true, O_LOSS},
                                      {"output", 0, true, O_OUTPUT},
                                      {"labels", 0, true, O_LABELS},
                                      {"optimizer", 0, true, O_OPT},
                                      {"lr", 0, true, O_LR},
                                      {"momentum", 0, true, O_MOM},
                                      {"nesterov", 0, false, O_NESTEROV},
                                      {"weight-decay", 0, true, O_WD},
                                      {"schedule", 0, true, O_SCHED},
                                      {"step-epochs", 0, true, O_STEP},
                                      {"warmup", 0, true, O_WARMUP},
                                      {"clip", 0, true, O_CLIP},
                                      {"accumulate", 0, true, O_ACC},
                                      {"epochs", 0, true, O_EPOCHS},
                                      {"batch", 0, true, O_BATCH},
                                      {"seed", 0, true, O_SEED},
                                      {"threads", 0, true, O_THREADS},
                                      {"json", 0, false, O_JSON},
                                      {"quiet", 'q', false, O_QUIET},
                                      {"opt-level", 0, true, O_OPT_LEVEL},
                                      {"checkpoint", 0, true, O_CKPT},
                                      {"resume", 0, false, O_RESUME},
                                      {"profile", 0, true, O_PROFILE},
                                      {"precision", 0, true, O_PRECISION},
                                      CLI_TUNING_OPTIONS,
                                      {NULL, 0, false, 0}};
    anvil_train_config_default(&a->cfg);
    a->labels = "labels";
    a->schedule = "constant";
    a->epochs = 10;
    a->batch = CLI_TRAIN_BATCH;
    a->seed = 1;
    a->step_epochs = 30;
    cli_parser p;
    cli_parser_init(&p, "train", argc, argv, opts);
    const char *v;
    int id;
    long long n;
    while ((id = cli_parser_next(&p, &v)) != CLI_ARG_END) {
        char *end = NULL;
        switch (id) {
        case CLI_ARG_ERROR:
            return false;
        case CLI_ARG_HELP:
            cli_train_usage(stdout);
            exit(0);
        case CLI_ARG_POSITIONAL:
            if (a->model) return cli_usage_error("train", "one model only"), false;
            a->model = v;
            break;
        case O_DATA:
            a->data = v;
            break;
        case O_VAL:
            a->val = v;
            break;
        case O_OUT:
            a->out = v;
            break;
        case O_OUTPUT:
            a->output = v;
            break;
        case O_LABELS:
            a->labels = v;
            break;
        case O_NESTEROV:
            a->cfg.nesterov = 1;
            break;
        case O_JSON:
            a->json = true;
            break;
        case O_CKPT:
            a->checkpoint = v;
            break;
        case O_RESUME:
            a->resume = true;
            break;
        case O_PROFILE:
            a->profile = v;
            a->cfg.profiling = 1;
            break;
        case O_QUIET:
            a->quiet = true;
            break;
        case O_LOSS:
            if (!cli_parse_loss("train", v, &a->cfg.loss)) return false;
            break;
        case O_OPT:
            if (!strcmp(v, "sgd"))
                a->cfg.optimizer = ANVIL_OPTIMIZER_SGD;
            else if (!strcmp(v, "adam"))
                a->cfg.optimizer = ANVIL_OPTIMIZER_ADAM;
            else if (!strcmp(v, "adamw"))
                a->cfg.optimizer = ANVIL_OPTIMIZER_ADAMW;
            else
                return cli_usage_error("train", "--optimizer %s: use sgd, adam or adamw", v), false;
            break;
        case O_SCHED:
            if (strcmp(v, "constant") && strcmp(v, "step") && strcmp(v, "cosine"))
                return cli_usage_error("train", "--schedule %s: use constant, step or cosine", v),
                       false;
            a->schedule = v;
            break;
        case O_LR:
        case O_MOM:
        case O_WD:
        case O_CLIP: {
            const float f = strtof(v, &end);
            if (!end || *end || !isfinite(f) || f < 0)
                return cli_usage_error("train", "'%s' is not a number >= 0", v), false;
            *(id == O_LR    ? &a->cfg.lr
              : id == O_MOM ? &a->cfg.momentum
              : id == O_WD  ? &a->cfg.weight_decay
                            : &a->cfg.clip_norm) = f;
            break;
        }
        case O_ACC:
            if (!cli_parse_int("train", "--accumulate", v, 1, 1 << 20, &n)) return false;
            a->cfg.accumulate = (int)n;
            break;
        case O_PRECISION:
            if (!cli_parse_precision("train", v)) return false;
            a->cfg.precision = v;
            break;
        case O_OPT_LEVEL:
            if (!cli_parse_int("train", "--opt-level", v, 0, 3, &n)) return false;
            a->cfg.opt_level = (int)n;
            break;
        case O_THREADS:
            if (!cli_parse_int("train", "--threads", v, 0, 1024, &n)) return false;
            a->cfg.threads = (int)n;
            break;
        case O_EPOCHS:
            if (!cli_parse_int("train", "--epochs", v, 1, 1 << 24, &a->epochs)) return false;
            break;
        case O_BATCH:
            if (!cli_parse_int("train", "--batch", v, 1, 1 << 24, &a->batch)) return false;
            break;
        case O_SEED:
            if (!cli_parse_int("train", "--seed", v, 0, (1LL << 62), &a->seed)) return false;
            break;
        case O_WARMUP:
            if (!cli_parse_int("train", "--warmup", v, 0, 1LL << 40, &a->warmup)) return false;
            break;
        case O_STEP:
            if (!cli_parse_int("train", "--step-epochs", v, 1, 1 << 24, &a->step_epochs))
                return false;
            break;
        default:
            if (id == CLI_OPT_TUNE && !strcmp(v, "offline")) {
                a->offline = true;
                break;
            }
            if (cli_tuning_option(&a->tuning, "train", id, v) < 0) return false;
            break;
        }
    }
    if (!a->model) return cli_usage_error("train", "missing MODEL.onnx"), false;
    a->cfg.tuning_db = a->tuning.no_db ? "" : a->tuning.db;
    if (a->offline) {
        if (a->tuning.no_db)
            return cli_usage_error("train",
                                   "--tune offline writes a tuning database: drop --no-db"),
                   false;
        if (cli_tuning_db_path(a->tuning.db, a->db_path, sizeof a->db_path) != 0) return false;
        a->cfg.tuning_db = a->db_path;
    }
    a->cfg.online_rounds =
        a->tuning.online ? (int)(a->tuning.rounds > 0 ? a->tuning.rounds : 3) : 0;
    if (!a->data) return cli_usage_error("train", "missing --data FILE.npz"), false;
    if (!a->out) return cli_usage_error("train", "missing -o TRAINED.onnx"), false;
    if (a->resume && !a->checkpoint)
        return cli_usage_error("train", "--resume needs --checkpoint FILE"), false;
    a->cfg.output = a->output;
    a->cfg.seed = (uint64_t)a->seed;
    return true;
}

static void summary(const train_args *a, const pass_stats *tr, const pass_stats *va, bool has_val,
                    double seconds, uint64_t updates, const anvil_train_memory *mem) {
    const double mib = 1.0 / (1024.0 * 1024.0);
    const double peak = (double)(mem->arena_bytes + mem->param_bytes + mem->optimizer_bytes) * mib;
    const bool acc = classifies(&a->cfg);
    if (a->json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "model", a->model);
        cJSON_AddStringToObject(o, "output_model", a->out);
        cJSON_AddNumberToObject(o, "epochs", (double)a->epochs);
        cJSON_AddNumberToObject(o, "updates", (double)updates);
        cJSON_AddNumberToObject(o, "seconds", seconds);
        cJSON_AddNumberToObject(o, "arena_bytes", (double)mem->arena_bytes);
        cJSON_AddNumberToObject(o, "param_bytes", (double)mem->param_bytes);
        cJSON_AddNumberToObject(o, "optimizer_bytes", (double)mem->optimizer_bytes);
        cJSON_AddNumberToObject(o, "train_loss", tr->loss);
        if (acc) cJSON_AddNumberToObject(o, "train_accuracy", (double)tr->hits / (double)tr->seen);
        if (has_val) {
            cJSON_AddNumberToObject(o, "val_loss", va->loss);
            if (acc)
                cJSON_AddNumberToObject(o, "val_accuracy", (double)va->hits / (double)va->seen);
        }
        char *s = cJSON_PrintUnformatted(o);
        if (s) printf("%s\n", s);
        free(s);
        cJSON_Delete(o);
        return;
    }
    printf("trained %lld epochs (%llu updates) in %.1f s -> %s\n", a->epochs,
           (unsigned long long)updates, seconds, a->out);
    printf("memory %.1f MiB: activations %.1f (forward and backward, one plan), parameters %.1f, "
           "optimizer state %.1f\n",
           peak, (double)mem->arena_bytes * mib, (double)mem->param_bytes * mib,
           (double)mem->optimizer_bytes * mib);
    printf("train loss %.4f", tr->loss);
    if (acc) printf("  accuracy %.2f%%", 100.0 * (double)tr->hits / (double)tr->seen);
    printf("\n");
    if (has_val) {
        printf("val   loss %.4f", va->loss);
        if (acc) printf("  accuracy %.2f%%", 100.0 * (double)va->hits / (double)va->seen);
        printf("\n");
    }
}

int cli_train_main(int argc, char **argv) {
    train_args a;
    memset(&a, 0, sizeof a);
    if (!parse_args(argc, argv, &a)) return CLI_EXIT_USAGE;
    anvil_model *m = NULL;
    anvil_train_session *ts = NULL;
    cli_dataset tr = {0}, va = {0};
    int64_t *order = NULL, *val_order = NULL;
    const char **names = NULL;
    anvil_status st = anvil_model_load(a.model, &m);
    if (st == ANVIL_OK) st = cli_dataset_load(a.data, m, a.labels, &tr);
    if (st == ANVIL_OK && a.val) st = cli_dataset_load(a.val, m, a.labels, &va);
    const size_t n_in = m ? anvil_model_input_count(m) : 0;
    if (st == ANVIL_OK && n_in > 64)
        st =
            core_err(ANVIL_ERR_UNSUPPORTED, "the model has %zu inputs; anvil train takes 64", n_in);
    if (st == ANVIL_OK && a.batch > tr.samples)
        st = core_err(ANVIL_ERR_INVALID_ARGUMENT,
                      "--batch %lld is larger than the %lld training samples", a.batch,
                      (long long)tr.samples);
    if (st == ANVIL_OK) st = anvil_train_session_create(m, &a.cfg, &ts);
    if (st == ANVIL_OK) {
        names = calloc(n_in + 1, sizeof *names);
        order = calloc((size_t)tr.samples, sizeof *order);
        val_order = a.val ? calloc((size_t)va.samples, sizeof *val_order) : NULL;
        if (!names || !order || (a.val && !val_order)) st = ANVIL_ERR_OUT_OF_MEMORY;
    }
    for (size_t i = 0; st == ANVIL_OK && i < n_in; i++) {
        anvil_value_info vi;
        st = anvil_model_input_info(m, i, &vi);
        names[i] = vi.name;
    }
    for (int64_t i = 0; order && i < tr.samples; i++) order[i] = i;
    for (int64_t i = 0; val_order && i < va.samples; i++) val_order[i] = i;
    pass_stats ts_stats = {0}, vs = {0};
    uint64_t rng = (uint64_t)a.seed;
    long long step = 0;
    const long long per_epoch = tr.samples / (a.batch > 0 ? a.batch : 1);
    const long long total = a.epochs * per_epoch;
    long long first = 1;
    if (st == ANVIL_OK && a.resume && access(a.checkpoint, F_OK) == 0) {
        st = anvil_train_load(ts, a.checkpoint);
        if (st == ANVIL_OK) {
            step = (long long)anvil_train_steps(ts);
            first = step / (per_epoch > 0 ? per_epoch : 1) + 1;
            if (!a.quiet)
                fprintf(stderr, "resuming from '%s' after epoch %lld (%lld steps)\n", a.checkpoint,
                        first - 1, step);
        }
    }
    if (st == ANVIL_OK && a.offline) {
        /* the training graph of the first batch measured before any step */
        anvil_tensor *first[65] = {NULL};
        const double tt0 = now_s();
        int tuned = 0;
        st = cli_dataset_gather(&tr, n_in + 1, order, a.batch, first);
        if (st == ANVIL_OK)
            st = anvil_train_tune(ts, n_in, names, (const anvil_tensor *const *)first, first[n_in],
                                  0.0, &tuned);
        for (size_t i = 0; i <= n_in; i++) anvil_tensor_free(first[i]);
        if (st == ANVIL_OK && !a.quiet)
            fprintf(stderr, "tuned %d problems of the training graph in %.1f s (%s)\n", tuned,
                    now_s() - tt0, a.db_path);
    }
    const double t0 = now_s();
    for (long long ep = 1; st == ANVIL_OK && ep <= a.epochs; ep++) {
        for (int64_t i = tr.samples - 1; i > 0; i--) {
            const int64_t j = (int64_t)(next_rand(&rng) % (uint64_t)(i + 1)), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        if (ep < first) continue; /* done before the checkpoint: only its shuffle is replayed */
        st = epoch(ts, &a, &tr, names, n_in, true, order, ep, &step, total, &ts_stats);
        if (st == ANVIL_OK && a.checkpoint) st = anvil_train_save(ts, a.checkpoint);
        if (st == ANVIL_OK && a.val) {
            st = epoch(ts, &a, &va, names, n_in, false, val_order, ep, &step, total, &vs);
            if (st == ANVIL_OK && !a.quiet) {
                fprintf(stderr, "| val loss %.4f", vs.loss);
                if (classifies(&a.cfg))
                    fprintf(stderr, " acc %5.1f%%", 100.0 * (double)vs.hits / (double)vs.seen);
            }
        }
        if (!a.quiet) fputc('\n', stderr);
    }
    if (st == ANVIL_OK) st = anvil_train_export(ts, a.out);
    if (st == ANVIL_OK && a.profile) st = anvil_train_write_profile(ts, a.profile);
    anvil_train_memory mem = {0};
    if (st == ANVIL_OK) st = anvil_train_memory_get(ts, &mem);
    if (st == ANVIL_OK)
        summary(&a, &ts_stats, &vs, a.val != NULL, now_s() - t0, anvil_train_updates(ts), &mem);
    free(names);
    free(order);
    free(val_order);
    anvil_train_session_free(ts);
    cli_dataset_free(&tr);
    cli_dataset_free(&va);
    anvil_model_free(m);
    if (st != ANVIL_OK) return cli_fail_status(st);
    return CLI_EXIT_OK;
}
