/* main.c -- the `fabricscript` command: option parsing and the pipeline
 * source -> tokens -> AST -> check -> run. Exit status: 0 success, 1 the
 * script has errors, 2 bad invocation, 3 system failure. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <signal.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "ast.h"
#include "atomicfile.h"
#include "check.h"
#include "diag.h"
#include "eval.h"
#include "explain.h"
#include "fabric.h"
#include "launch.h"
#include "plan.h"
#include "lex.h"
#include "lsp.h"
#include "progress.h"
#include "repl.h"
#include "testrun.h"

enum { EXIT_SCRIPT = 1, EXIT_USAGE = 2, EXIT_SYSTEM = 3 };

typedef struct fs_cli {
  fs_render_opts render;
  const char **defines; size_t ndefines; /* -D name=value, in order */
  int write; /* fix --write */
  fsF_overrides overrides; /* --strategy ... as `fabric run`'s */
  fsF_machine machine;     /* this machine, or the target given by --gpus/--assume */
  int gpus_given;          /* --gpus was passed */
  int machine_given;       /* --gpus, --assume or --here: check for the machine said */
  int here;                /* --here: this machine's files too (fsC_options.files_here) */
  int preflight;           /* check for the machine the script declares (fsC_options) */
  int emulate_cuda;        /* --emulate-cuda */
  double progress_interval; /* FABRICSCRIPT_PROGRESS_INTERVAL */
  int no_progress;          /* --no-progress or FABRICSCRIPT_PROGRESS=0 */
  fsPL_options plan;        /* plan's --format, --batch-size, --context, --gpu-memory */
  int plan_given;           /* one of them was passed: only `plan` takes them */
  fsC_options budget;       /* --check-budget: its budget_seconds, budget_bytes */
  fs_diag_limit limit;      /* --error-limit and what it hid */
  int planning;             /* the command is `plan` (not fsC_options.will_run) */
} fs_cli;

static const char usage_text[] =
  "Usage: fabricscript FILE [OPTIONS]        check, then run\n"
  "       fabricscript check FILE... [OPTIONS] static checks only; nothing is executed\n"
  "       fabricscript plan FILE [OPTIONS]    per-rank memory plan: parameters, gradients,\n"
  "                                          optimizer states, gathered unit, activations;\n"
  "                                          with --gpu-memory, whether it fits\n"
  "       fabricscript fix FILE [--write]     apply the fix-its of the diagnostics\n"
  "       fabricscript test PATH...           run annotated regression scripts\n"
  "       fabricscript explain [ID]           a rule in words, why, before and after;\n"
  "                                          without ID, every rule id in a line\n"
  "       fabricscript lsp                    a language server on stdin/stdout (docs/editors.md)\n"
  "\n"
  "Options:\n"
  "  -D NAME=VALUE                 set the script parameter NAME (see param())\n"
  "  --accelerator=A --strategy=S --devices=D --num-nodes=N --precision=P\n"
  "                                as `fabric run`'s: fill in what the script leaves\n"
  "                                at its default; a conflicting value is an error\n"
  "  --here                        check for this machine; without it check, plan and\n"
  "                                the REPL check for the machine the script declares\n"
  "                                (GPUs, DeepSpeed, XLA) and say so in a note\n"
  "  --gpus=N                      check as if the machine had N visible CUDA GPUs\n"
  "  --assume=LIST                 check as if the machine had these (comma-separated):\n"
  "                                deepspeed, xla, mps, transformer-engine, bitsandbytes,\n"
  "                                cli, no-fork\n"
  "  --emulate-cuda                run accelerator cuda on the CPU backend, one process\n"
  "                                per rank (GPU scripts on a machine without GPUs);\n"
  "                                implies --gpus=N for the check (N: --devices, else\n"
  "                                the number of CPUs) when --gpus is not given\n"
  "  --no-progress                 no progress line while a script trains (also\n"
  "                                FABRICSCRIPT_PROGRESS=0 in the environment)\n"
  "  --diagnostics-format=text|json|sarif\n"
  "                                how diagnostics are written to stderr: text, JSON\n"
  "                                lines, or one SARIF 2.1.0 log at the end\n"
  "  --color=auto|always|never     colour in text diagnostics (default auto)\n"
  "  --error-limit=N               show the first N errors in text (default 20, 0: all),\n"
  "                                then one line saying how many more\n"
  "  --check-budget=SECONDS[,BYTES]\n"
  "                                what the check may spend (default 10 s of processor\n"
  "                                time, 1 GiB);\n"
  "                                where it runs out it stops and says so\n"
  "  --write                       with fix: rewrite FILE instead of printing a diff\n"
  "  --gpu-memory=SIZE|GPU         with plan: say whether a rank fits in SIZE (80GiB,\n"
  "                                40GB, ...) or a GPU's memory (H100, H200, A100-40GB,\n"
  "                                L4, ...), and the smallest change that fits if not\n"
  "  --batch-size=N --context=T    with plan: the per-rank batch and sequence length\n"
  "                                for the activations (default: the script's)\n"
  "  --format=text|json            with plan: how the plan is printed\n"
  "  --format=text|tap|junit       with test: plain lines, TAP 13 or JUnit XML\n"
  "  -h, --help                    show this help and exit\n"
  "  --version                     show the version and the backends compiled in\n"
  "\n"
  "Exit status: 0 success, 1 the script has errors, 2 bad invocation, 130 Ctrl-C,\n"
  "3 system failure (I/O, out of memory).\n";

static int usage_error(const char *fmt, const char *arg) {
  fputs("fabricscript: ", stderr);
  fprintf(stderr, fmt, arg);
  fputs("\nTry 'fabricscript --help' for more information.\n", stderr);
  return EXIT_USAGE;
}

static const char *const subcommands[] = {"check", "plan", "fix", "test", "explain", "lsp"};

/* Every long option, ours and `fabric run`'s (fsF_parse_arg), for "did you mean". */
static const char *const long_options[] = {
  "--help", "--version", "--diagnostics-format", "--color", "--write", "--emulate-cuda", "--here",
  "--accelerator", "--strategy", "--devices", "--num-nodes", "--precision", "--gpus", "--assume",
  "--gpu-memory", "--batch-size", "--context", "--format", "--no-progress", "--error-limit", "--check-budget",
};

/* An option getopt does not know: say which, and the nearest one. */
static int unknown_option(const char *arg) {
  char name[64];
  snprintf(name, sizeof name, "%.*s", (int)strcspn(arg, "="), arg);
  const char *near = fsD_closest(name, long_options, sizeof long_options / sizeof long_options[0]);
  fprintf(stderr, "fabricscript: unrecognized option '%s'\n", name);
  if (near) fprintf(stderr, "help: did you mean '%s'?\n", near);
  fputs("Try 'fabricscript --help' for more information.\n", stderr);
  return EXIT_USAGE;
}

/* A script that does not exist but is spelt like a command (`chek`). */
static int misspelt_command(const char *arg) {
  if (access(arg, F_OK) == 0 || strchr(arg, '/') || strchr(arg, '.')) return 0;
  const char *near = fsD_closest(arg, subcommands, sizeof subcommands / sizeof subcommands[0]);
  if (!near) return 0;
  fprintf(stderr, "fabricscript: '%s' is neither a script nor a command\nhelp: did you mean '%s'?\n"
          "Try 'fabricscript --help' for more information.\n", arg, near);
  return 1;
}

static const char *backends(void) {
#ifdef FS_HAVE_CUDA
  return "cpu cuda";
#else
  return "cpu";
#endif
}

/* Loads and parses one script; syntax errors land in diags. NULL on I/O error.
 * may_map: see fsA_source_from_file. */
static fs_source *load(const char *path, int may_map, fs_node **ast, fs_diags *diags, int *nerrors) {
  fs_source *src = fsA_source_from_file(path, may_map);
  if (!src) {
    fsD_add(diags, FS_SEV_ERROR, "io", NULL, (fs_loc){0, 0}, "%s: %s", path, strerror(errno));
    return NULL;
  }
  *ast = fsP_parse(src, diags, nerrors);
  return src;
}

/* The machine was detected once, at start-up (then --gpus/--assume). */
static void checker_options(const fs_cli *cli, fsC_options *o) {
  *o = (fsC_options){.machine = cli->machine, .overrides = cli->overrides,
                     .defines = cli->defines, .ndefines = cli->ndefines, .preflight = cli->preflight,
                     .budget_seconds = cli->budget.budget_seconds, .budget_bytes = cli->budget.budget_bytes,
                     .will_run = !cli->planning, .files_here = cli->here};
}

/* The front half of the pipeline, shared by check, run and fix: load, parse,
 * check. Returns the exit status so far; *src and *ast stay for the caller. */
static int front(const fs_cli *cli, const char *path, int may_map, fs_source **src, fs_node **ast,
                 fs_diags *diags) {
  int nerrors = 0;
  *ast = NULL;
  *src = load(path, may_map, ast, diags, &nerrors);
  if (!*src) return EXIT_SYSTEM;
  if (nerrors == 0) {
    fsC_options o;
    checker_options(cli, &o);
    fsC_check(*src, *ast, &o, diags);
  }
  fsD_sort(diags);
  /* A -D value its param() cannot take is the invocation's fault. */
  for (size_t i = 0; i < diags->n; i++)
    if (diags->items[i].severity == FS_SEV_ERROR && strcmp(diags->items[i].rule, "param") == 0)
      return EXIT_USAGE;
  return fsD_has_errors(diags) ? EXIT_SCRIPT : 0;
}

static fsE_options eval_options(const fs_cli *cli) {
  return (fsE_options){
    .defines = cli->defines, .ndefines = cli->ndefines,
    .accelerator = cli->overrides.accelerator, .strategy = cli->overrides.strategy,
    .devices = cli->overrides.devices, .num_nodes = cli->overrides.num_nodes,
    .precision = cli->overrides.precision, .out = stdout,
    .machine = &cli->machine, .emulate_cuda = cli->emulate_cuda, .preflight = cli->preflight,
    /* JSON and SARIF make stderr a machine's channel: no progress there */
    .progress = cli->render.format != FS_DIAG_TEXT || cli->no_progress ? NULL : stderr,
    .progress_interval = cli->progress_interval,
  };
}

/* --emulate-cuda without --gpus: as many GPUs as --devices asks for, else
 * one per CPU (what devices="auto" then gives). */
static void emulated_gpus(fs_cli *cli) {
  const char *d = cli->overrides.devices;
  char *end = NULL;
  long n = d ? strtol(d, &end, 10) : 0;
  if (!d || end == d || *end || n < 1) n = sysconf(_SC_NPROCESSORS_ONLN);
  cli->machine.cuda_gpus = n < 1 ? 1 : n > FSF_MAX_GPUS ? FSF_MAX_GPUS : (int)n;
}

static int check_files(fs_cli *cli, char **paths, int npaths) {
  int status = 0;
  fs_diag_totals totals = {0};
  for (int i = 0; i < npaths; i++) {
    fs_diags diags;
    fsD_init(&diags);
    fs_source *src;
    fs_node *ast;
    int s = front(cli, paths[i], 1, &src, &ast, &diags);
    fsD_render_all(stderr, &diags, &cli->render);
    fsD_count(&diags, &totals);
    if (s > status) status = s;
    fsA_free(ast);
    fsD_free(&diags);
    fsA_source_free(src);
  }
  fsD_render_totals(stderr, &totals, &cli->render);
  return status;
}

static int is_python(const char *path) {
  size_t n = strlen(path);
  return n > 3 && strcmp(path + n - 3, ".py") == 0;
}

/* FILE: check, then run; plan != NULL: `plan FILE`, the run stops at the plan. */
/* Ctrl-C during a run: the first stops the script at its next loop round
 * or statement with KeyboardInterrupt (output flushed, exit 130), as Python
 * does; a second one kills the process at once. */
static void on_run_sigint(int sig) {
  if (fsE_interrupt) {
    signal(sig, SIG_DFL);
    raise(sig);
  }
  fsE_interrupt = 1;
}

static int run_file(fs_cli *cli, const char *path, FILE *plan) {
  fs_diags diags;
  fsD_init(&diags);
  fs_source *src;
  fs_node *ast;
  int status = front(cli, path, 0, &src, &ast, &diags);
  fsD_render_all(stderr, &diags, &cli->render);
  fs_diag_totals totals = {0};
  fsD_count(&diags, &totals);
  fsD_render_totals(stderr, &totals, &cli->render);
  if (status == 0) {
    fs_diags run;
    fsD_init(&run);
    fsE_options eo = eval_options(cli);
    eo.plan = plan ? tmpfile() : NULL; /* to tell whether the script reached a setup */
    eo.plan_options = &cli->plan;
    if (plan) eo.progress = NULL; /* a plan's loop stops at its first batch */
    if (plan && !eo.plan) {
      fprintf(stderr, "fabricscript: plan: cannot create a temporary file: %s\n", strerror(errno));
      status = EXIT_SYSTEM;
    } else {
      struct sigaction sa = {.sa_handler = on_run_sigint, .sa_flags = SA_RESTART}, old;
      sigemptyset(&sa.sa_mask);
      sigaction(SIGINT, NULL, &old);
      if (old.sa_handler != SIG_IGN) sigaction(SIGINT, &sa, NULL); /* ignored (nohup, a background job): kept so */
      status = fsE_run(src, ast, &eo, &run);
      sigaction(SIGINT, &old, NULL);
    }
    fflush(stdout);
    fsD_drop_repeated_warnings(&run, &diags); /* the check printed them */
    fsD_render_all(stderr, &run, &cli->render);
    if (eo.plan) {
      if (status == 0 && ftell(eo.plan) == 0) {
        fprintf(stderr, "fabricscript: plan: %s sets up no model with Fabric (setup or setup_module)\n", path);
        status = EXIT_SCRIPT;
      }
      rewind(eo.plan);
      for (int c; (c = getc(eo.plan)) != EOF;) putc(c, plan);
      fclose(eo.plan);
    }
    fsD_free(&run);
  }
  fsA_free(ast);
  fsD_free(&diags);
  fsA_source_free(src);
  return status;
}

/* fix: apply every mechanical fix; print a unified diff, or rewrite the file. */
static int fix_file(fs_cli *cli, const char *path) {
  fs_diags diags;
  fsD_init(&diags);
  fs_source *src;
  fs_node *ast;
  int status = front(cli, path, 1, &src, &ast, &diags); /* the fix is written by rename */
  if (status == EXIT_SYSTEM) {
    fsD_render_all(stderr, &diags, &cli->render);
    fsD_free(&diags);
    return status;
  }
  size_t nedits = 0;
  for (size_t i = 0; i < diags.n; i++) nedits += diags.items[i].nedits;
  size_t len = 0;
  char *fixed = nedits ? fsD_apply_fixes(src, &diags, &len) : NULL;
  if (nedits && !fixed) status = EXIT_SYSTEM;
  else if (!nedits) {
    fsD_render_all(stderr, &diags, &cli->render); /* nothing mechanical: say what is wrong */
  } else if (cli->write) {
    char *err = NULL;
    if (fsK_atomic_write(path, fixed, len, &err) != 0) {
      fprintf(stderr, "fabricscript: %s\n", err ? err : "out of memory");
      free(err);
      status = EXIT_SYSTEM;
    } else {
      fprintf(stderr, "fabricscript: %s: applied %zu fix%s\n", path, nedits, nedits == 1 ? "" : "es");
      status = 0;
    }
  } else {
    fsD_print_unified_diff(stdout, path, src->text, src->len, fixed, len);
    status = 0;
  }
  free(fixed);
  fsA_free(ast);
  fsD_free(&diags);
  fsA_source_free(src);
  return status;
}

typedef struct repl_state {
  fs_cli *cli;
  fsE_options eval_opt;
  fsE_session *session;
} repl_state;

static void repl_check(void *ud, const fs_source *src, const fs_node *ast, fs_diags *diags) {
  fsC_options o;
  checker_options(((repl_state *)ud)->cli, &o);
  fsC_check(src, ast, &o, diags);
}

static int repl_exec(void *ud, const fs_source *src, fs_node *const *stmts, size_t n, fs_diags *diags) {
  repl_state *R = ud;
  return fsE_session_exec(R->session, src, stmts, n, diags, 1);
}

/* :plan runs the session text afresh in plan mode: models stay on meta. */
static void repl_plan(void *ud, const fs_source *src, const fs_node *ast, fs_diags *diags) {
  repl_state *R = ud;
  fsE_options eo = eval_options(R->cli);
  eo.plan = stdout;
  eo.plan_options = &R->cli->plan;
  fsE_run(src, ast, &eo, diags);
}

static int repl(fs_cli *cli) {
  cli->machine.interactive = 1; /* Fabric's rules for a notebook hold in the REPL (R69) */
  repl_state R = {.cli = cli, .eval_opt = eval_options(cli)};
  R.session = fsE_session_new(&R.eval_opt);
  if (!R.session) return EXIT_SYSTEM;
  fsRP_engine engine = {.ud = &R, .check = repl_check, .exec = repl_exec, .plan = repl_plan};
  fsRP_options opt = {.render = cli->render, .engine = &engine, .history_path = getenv("FABRICSCRIPT_HISTORY")};
  opt.render.limit = NULL; /* each input's diagnostics are shown whole */
  int status = fsRP_main(&opt);
  fsE_session_free(R.session);
  return status;
}

int main(int argc, char **argv) {
  enum { OPT_VERSION = 256, OPT_FORMAT, OPT_COLOR, OPT_WRITE, OPT_EMULATE, OPT_HERE,
         OPT_GPU_MEMORY, OPT_BATCH, OPT_CONTEXT, OPT_PLAN_FORMAT, OPT_NO_PROGRESS, OPT_ERROR_LIMIT,
         OPT_CHECK_BUDGET };
  static const struct option longopts[] = {
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, OPT_VERSION},
    {"diagnostics-format", required_argument, NULL, OPT_FORMAT},
    {"color", required_argument, NULL, OPT_COLOR},
    {"write", no_argument, NULL, OPT_WRITE},
    {"emulate-cuda", no_argument, NULL, OPT_EMULATE},
    {"here", no_argument, NULL, OPT_HERE},
    {"gpu-memory", required_argument, NULL, OPT_GPU_MEMORY},
    {"batch-size", required_argument, NULL, OPT_BATCH},
    {"context", required_argument, NULL, OPT_CONTEXT},
    {"format", required_argument, NULL, OPT_PLAN_FORMAT},
    {"no-progress", no_argument, NULL, OPT_NO_PROGRESS},
    {"error-limit", required_argument, NULL, OPT_ERROR_LIMIT},
    {"check-budget", required_argument, NULL, OPT_CHECK_BUDGET},
    {NULL, 0, NULL, 0},
  };
  fs_cli cli = {.limit = {.max = FS_DIAG_ERROR_LIMIT}};
  cli.render.limit = &cli.limit;
  const char *color = "auto";
  const char *format = NULL; /* --format=: plan's text|json or test's text|tap|junit */
  int status = 0;
  cli.defines = calloc((size_t)argc, sizeof *cli.defines);
  if (!cli.defines) return EXIT_SYSTEM;
  fsF_machine_detect(&cli.machine);
  /* Fabric's options first, so getopt sees only ours; `-D X` keeps its X. */
  int kept = 1;
  for (int i = 1; i < argc; i++) {
    const char *err = NULL;
    int used = strcmp(argv[i], "-D") == 0 ? 0
             : fsF_parse_arg(&cli.overrides, &cli.machine, argv[i], i + 1 < argc ? argv[i + 1] : NULL, &err);
    if (used < 0) { status = usage_error("%s", err); goto done; }
    if (used > 0 && strncmp(argv[i], "--gpus", 6) == 0) cli.gpus_given = 1;
    if (used > 0 && (strncmp(argv[i], "--gpus", 6) == 0 || strncmp(argv[i], "--assume", 8) == 0)) cli.machine_given = 1;
    if (used == 0) {
      argv[kept++] = argv[i];
      if (strcmp(argv[i], "-D") == 0 && i + 1 < argc) argv[kept++] = argv[++i];
      continue;
    }
    i += used - 1;
  }
  argc = kept;
  argv[argc] = NULL;
  int c;
  opterr = 0; /* unknown options are said here, with "did you mean" */
  while ((c = getopt_long(argc, argv, "hD:", longopts, NULL)) != -1) {
    switch (c) {
    case 'h': fputs(usage_text, stdout); goto done;
    case OPT_VERSION:
      printf("fabricscript %s\nbackends: %s\n", PACKAGE_VERSION, backends());
      goto done;
    case 'D':
      if (!strchr(optarg, '=') || optarg[0] == '=') {
        status = usage_error("-D expects NAME=VALUE, got '%s'", optarg);
        goto done;
      }
      cli.defines[cli.ndefines++] = optarg;
      break;
    case OPT_FORMAT:
      if (strcmp(optarg, "text") == 0) cli.render.format = FS_DIAG_TEXT;
      else if (strcmp(optarg, "json") == 0) cli.render.format = FS_DIAG_JSON;
      else if (strcmp(optarg, "sarif") == 0) cli.render.format = FS_DIAG_SARIF;
      else { status = usage_error("--diagnostics-format must be text, json or sarif, not '%s'", optarg); goto done; }
      break;
    case OPT_COLOR:
      if (strcmp(optarg, "auto") && strcmp(optarg, "always") && strcmp(optarg, "never")) {
        status = usage_error("--color must be auto, always or never, not '%s'", optarg);
        goto done;
      }
      color = optarg;
      break;
    case OPT_WRITE: cli.write = 1; break;
    case OPT_ERROR_LIMIT: {
      char *e = NULL;
      errno = 0;
      long long v = strtoll(optarg, &e, 10);
      if (e == optarg || *e || errno || v < 0) {
        status = usage_error("--error-limit must be a number of errors >= 0 (0: no limit), not '%s'", optarg);
        goto done;
      }
      cli.limit.max = (size_t)v;
      break;
    }
    case OPT_CHECK_BUDGET: {
      const char *err = NULL;
      if (fsC_parse_budget(&cli.budget, optarg, &err) < 0) {
        status = usage_error("%s", err);
        goto done;
      }
      break;
    }
    case OPT_EMULATE: cli.emulate_cuda = 1; break;
    case OPT_NO_PROGRESS: cli.no_progress = 1; break;
    case OPT_HERE: cli.machine_given = cli.here = 1; break;
    case OPT_GPU_MEMORY:
      cli.plan_given = 1;
      if (fsPL_parse_gpu_memory(optarg, &cli.plan) < 0) {
        status = usage_error("--gpu-memory must be a size (80GiB, 40GB, 24G) or a GPU name (H100, H200, "
                             "A100-40GB, A100-80GB, L4, ...), not '%s'", optarg);
        goto done;
      }
      break;
    case OPT_BATCH:
    case OPT_CONTEXT: {
      char *e = NULL;
      errno = 0;
      long long v = strtoll(optarg, &e, 10);
      cli.plan_given = 1;
      if (e == optarg || *e || errno || v < 1 || v > ((long long)1 << 40)) {
        status = usage_error(c == OPT_BATCH ? "--batch-size must be a positive integer, not '%s'"
                                            : "--context must be a positive integer, not '%s'", optarg);
        goto done;
      }
      *(c == OPT_BATCH ? &cli.plan.batch_size : &cli.plan.context) = v;
      break;
    }
    case OPT_PLAN_FORMAT: format = optarg; break; /* plan's or test's: read once the command is known */
    default:
      if (optopt == 0 && optind > 0 && strncmp(argv[optind - 1], "--", 2) == 0)
        status = unknown_option(argv[optind - 1]);
      else if (optopt == 'D')
        status = usage_error("%s", "-D expects NAME=VALUE");
      else
        status = usage_error("unrecognized option '%s'", optind > 0 ? argv[optind - 1] : "?");
      goto done;
    }
  }
  if (cli.emulate_cuda && !cli.gpus_given) emulated_gpus(&cli);
  const char *progress = getenv("FABRICSCRIPT_PROGRESS");
  if (progress && strcmp(progress, "0") && strcmp(progress, "1")) {
    status = usage_error("FABRICSCRIPT_PROGRESS must be 0 (no progress line) or 1, not '%s'", progress);
    goto done;
  }
  if (progress && !strcmp(progress, "0")) cli.no_progress = 1;
  const char *interval = getenv("FABRICSCRIPT_PROGRESS_INTERVAL");
  char *end = NULL;
  cli.progress_interval = interval ? strtod(interval, &end) : FSPG_PLAIN_INTERVAL;
  if (interval && (end == interval || *end || !(cli.progress_interval >= 0))) {
    status = usage_error("FABRICSCRIPT_PROGRESS_INTERVAL must be a number of seconds >= 0, not '%s'", interval);
    goto done;
  }
  cli.render.color = strcmp(color, "always") == 0 ||
                     (strcmp(color, "auto") == 0 && isatty(STDERR_FILENO) && getenv("NO_COLOR") == NULL);
  int nargs = argc - optind;
  char **args = argv + optind;
  int testing = nargs > 0 && strcmp(args[0], "test") == 0;
  fsX_format test_format = FSX_PLAIN;
  if (format && testing) {
    if (strcmp(format, "text") == 0) test_format = FSX_PLAIN;
    else if (strcmp(format, "tap") == 0) test_format = FSX_TAP;
    else if (strcmp(format, "junit") == 0) test_format = FSX_JUNIT;
    else { status = usage_error("test: --format must be text, tap or junit, not '%s'", format); goto done; }
  } else if (format) {
    cli.plan_given = 1;
    if (strcmp(format, "text") == 0) cli.plan.format = FSPL_TEXT;
    else if (strcmp(format, "json") == 0) cli.plan.format = FSPL_JSON;
    else { status = usage_error("--format must be text or json, not '%s'", format); goto done; }
  }
  /* JSON and SARIF make stderr a machine's channel, the ranks' lines too */
  fsLN_json_stderr(cli.render.format != FS_DIAG_TEXT);
  if (cli.render.format == FS_DIAG_SARIF) cli.render.sarif = fsD_sarif_new(PACKAGE_VERSION, fsW_rule_words);
  /* check, plan, fix (it applies what check shows) and the REPL's check
   * are for the machine the script declares; a run for the one it runs on */
  int checks_only = nargs == 0 ? isatty(STDIN_FILENO)
                  : strcmp(args[0], "check") == 0 || strcmp(args[0], "plan") == 0 ||
                    strcmp(args[0], "fix") == 0 || strcmp(args[0], "lsp") == 0;
  cli.preflight = checks_only && !cli.machine_given;
  if (cli.plan_given && !(nargs > 0 && strcmp(args[0], "plan") == 0)) {
    status = usage_error("%s", "--gpu-memory, --batch-size, --context and --format are options of plan");
    goto done;
  }
  if (nargs == 0) {
    status = isatty(STDIN_FILENO) ? repl(&cli) : run_file(&cli, "-", NULL);
  } else if (strcmp(args[0], "check") == 0) {
    status = nargs < 2 ? usage_error("%s", "check: no script given") : check_files(&cli, args + 1, nargs - 1);
  } else if (strcmp(args[0], "test") == 0) {
    /* the binary's own path, not /proc/self/exe: under valgrind that names
     * valgrind's tool, which its --trace-children cannot exec */
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) self[n] = '\0';
    status = nargs < 2 ? usage_error("%s", "test: no script or directory given")
                       : fsX_main(nargs - 1, args + 1, n > 0 ? self : "/proc/self/exe", test_format);
  } else if (strcmp(args[0], "fix") == 0) {
    status = nargs != 2 ? usage_error("%s", "fix: expects exactly one script") : fix_file(&cli, args[1]);
  } else if (strcmp(args[0], "explain") == 0) {
    if (nargs == 1) fsW_list(stdout); /* the ids, for a reader and for completion */
    else status = nargs != 2 ? usage_error("%s", "explain: expects one rule id, e.g. R36") : fsW_explain(stdout, stderr, args[1]);
  } else if (strcmp(args[0], "lsp") == 0) {
    fsC_options o;
    checker_options(&cli, &o);
    status = nargs != 1 ? usage_error("%s", "lsp: takes no arguments (it speaks on stdin and stdout)")
                        : fsJ_main(stdin, stdout, &o);
  } else if (strcmp(args[0], "plan") == 0) {
    cli.planning = 1;
    status = nargs != 2 ? usage_error("%s", "plan: expects exactly one script") : run_file(&cli, args[1], stdout);
  } else if (misspelt_command(args[0])) {
    status = EXIT_USAGE;
  } else if (nargs > 1) {
    status = usage_error("unexpected argument '%s' after the script", args[1]);
  } else if (is_python(args[0])) {
    /* a .py file is checked, never run: Python runs it (docs/python.md) */
    status = check_files(&cli, args, 1);
    fprintf(stderr, "fabricscript: %s: Python files are checked, not run; run it with `fabric run %s` "
            "or `python %s`\n", args[0], args[0], args[0]);
  } else {
    status = run_file(&cli, args[0], NULL);
  }
done:
  if (cli.render.sarif && fsD_rank() < 0) fsD_sarif_write(stderr, cli.render.sarif); /* a rank wrote JSON lines */
  fsD_sarif_free(cli.render.sarif);
  free(cli.defines);
  return status;
}
