/* test_fabric.c -- every message fsF_ produces, pinned byte for byte against
 * Fabric's own text (SPEC_* are the messages of Lightning's source, copied verbatim),
 * and the resolution and state rules behind them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "fabric.h"

/* Fabric's messages, verbatim: SPEC_<rule>_<n> is the n-th message of <rule> (docs/rules.md). */
#define SPEC_R1_1 "You selected an invalid strategy name: `strategy='cocofruit'`. It must be either a string or an instance of `lightning.fabric.strategies.Strategy`. Example choices: auto, ddp, ddp_spawn, deepspeed, dp, ... Find a complete list of options in our documentation at https://lightning.ai"
#define SPEC_R2_1 "You selected an invalid accelerator name: `accelerator='cocofruit'`. Available names are: auto, cpu, cuda, mps, tpu."
#define SPEC_R3_1 "Precision 'invalid' is invalid. Allowed precision values: ('transformer-engine', 'transformer-engine-float16', '16-true', '16-mixed', 'bf16-true', 'bf16-mixed', '32-true', '64-true', 64, 32, 16, '64', '32', '16', 'bf16')"
#define SPEC_R4_1 "`num_nodes` must be a positive integer, but got 0."
#define SPEC_R5_1 "`Fabric(devices=0)` value is not a valid input using auto accelerator."
#define SPEC_R6_1 "No supported gpu backend found!"
#define SPEC_R7_1 "`MPSAccelerator` can not run on your system since the accelerator is not available. The following accelerator(s) is available and can be passed into `accelerator` argument of `Fabric`: ['cpu', 'cuda']."
#define SPEC_R8_1 "`devices` selected with `CPUAccelerator` should be an int > 0."
#define SPEC_R9_1 "You requested gpu: [0, 1, 2]\n But your machine only has: [0]"
#define SPEC_R9_2 "GPUs requested but none are available."
#define SPEC_R9_3 "Device ID's (GPU) must be unique."
#define SPEC_R9_4 "Device IDs (GPU/TPU) must be an int, a string, a sequence of ints, but you passed 1.5."
#define SPEC_R9_5 "Device IDs (GPU/TPU) must be an int, a string, a sequence of ints, but you passed a sequence of str."
#define SPEC_R10_1 "You selected the FSDP strategy but FSDP is only available on GPU. Set `Fabric(accelerator='gpu', ...)` to continue or select a different strategy."
#define SPEC_R11_1 "`precision='64-true')` is not supported in FSDP. `precision` must be one of: ('32-true', '16-true', 'bf16-true', '16-mixed', 'bf16-mixed')."
#define SPEC_R12_1 "The `ModelParallelStrategy` does not support `Fabric(..., precision='16-mixed')`. Choose a different precision among: 32-true, bf16-mixed, bf16-true, 16-true."
#define SPEC_R13_1 "To use the `DeepSpeedStrategy`, you must have DeepSpeed installed. Install it by running `pip install -U deepspeed`."
#define SPEC_R14_1 "Requirement 'torch_xla>=1.13' not met. HINT: Try running `pip install -U 'torch_xla>=1.13'`"
#define SPEC_R15_1 "You selected `Fabric(strategy='ddp_fork')` but process forking is not supported on this platform. We recommend `Fabric(strategy='ddp_spawn')` instead."
#define SPEC_R16_1 "To use Fabric with more than one device, you must call `.launch()` or use the CLI: `fabric run --help`."
#define SPEC_R17_1 "To spawn processes with the `DDPStrategy` strategy, `.launch()` needs to be called with a function that contains the code to launch in processes."
#define SPEC_R18_1 "`Fabric.launch(...)` needs to be a callable, but got None. HINT: do `.launch(your_fn)` instead of `.launch(your_fn())`"
#define SPEC_R19_1 "`Fabric.launch(function=<function train at 0x7f0000000000>)` needs to take at least one argument. The launcher will pass in the `Fabric` object so you can use it inside the function."
#define SPEC_R20_1 "This script was launched through the CLI, and processes have already been created. Calling  `.launch()` again is not allowed."
#define SPEC_R21_1 "The DeepSpeed strategy is only supported on CUDA GPUs but `CPUAccelerator` is used."
#define SPEC_R22_1 "A model should be passed only once to the `setup` method."
#define SPEC_R23_1 "An optimizer should be passed only once to the `setup` method."
#define SPEC_R24_1 "A model should be passed only once to the `setup_module` method."
#define SPEC_R25_1 "The `DeepSpeedStrategy` requires the model and optimizer(s) to be set up jointly through `.setup(model, optimizer, ...)`."
#define SPEC_R26_1 "`setup_optimizers` requires at least one optimizer as input."
#define SPEC_R27_1 "An optimizer should be passed only once to the `setup_optimizers` method."
#define SPEC_R28_1 "`setup_dataloaders` requires at least one dataloader as input."
#define SPEC_R29_1 "A dataloader should be passed only once to the `setup_dataloaders` method."
#define SPEC_R30_1 "Only PyTorch DataLoader are currently supported in `setup_dataloaders`."
#define SPEC_R31_1 "Currently only one optimizer is supported with DeepSpeed. Got 2 optimizers instead."
#define SPEC_R32_1 "You set `FSDPStrategy(use_orig_params=False)` but this is not supported when setting the model and optimizer up jointly. Either set it to `True` or set the objects up in this order: Create the model, call `setup_module`, create the optimizer, call `setup_optimizer`."
#define SPEC_R33_1 "The optimizer does not seem to reference any FSDP parameters. HINT: Make sure to create the optimizer after setting up the model."
#define SPEC_R36_1 "The optimizer has references to the model's meta-device parameters. Materializing them is is currently not supported unless you to set up the model and optimizer(s) separately. Create and set up the model first through `model = fabric.setup_module(model)`. Then create the optimizer and set it up: `optimizer = fabric.setup_optimizers(optimizer)`."
#define SPEC_R37_1 "The optimizer has references to the model's meta-device parameters. Materializing them is is currently not supported. Create the optimizer after setting up the model, then call `fabric.setup_optimizers(optimizer)`."
#define SPEC_R38_1 "`empty_init=False` is not a valid choice with `DeepSpeedStrategy` when ZeRO stage 3 is enabled."
#define SPEC_R39_1 "No models were set up for backward. Did you forget to call `fabric.setup()`?"
#define SPEC_R40_1 "When using multiple models + deepspeed, please provide the model used to perform the optimization: `self.backward(loss, model=model)`"
#define SPEC_R41_1 "'Linear' object has no attribute '_forward_module'"
#define SPEC_R42_1 "The current strategy and precision selection requires you to call `fabric.backward(loss)` instead of `loss.backward()`."
#define SPEC_R43_1 "Only one of `clip_val` or `max_norm` can be set as this specifies the underlying clipping algorithm!"
#define SPEC_R44_1 "You have to specify either `clip_val` or `max_norm` to do gradient clipping!"
#define SPEC_R45_1 "DeepSpeed handles gradient clipping automatically within the optimizer. Make sure to set the `gradient_clipping` value in your Config."
#define SPEC_R47_1 "Gradient clipping with FSDP is only possible if the module passed to `FSDPStrategy.clip_gradients_norm` is wrapped in `FullyShardedDataParallel`. Got: Linear."
#define SPEC_R48_1 "You need to set up the model first before you can call `fabric.no_backward_sync()`: `model = fabric.setup(model, ...)`"
#define SPEC_R51_1 "Expected a method or a string, but got: function"
#define SPEC_R52_1 "You cannot mark the forward method itself as a forward method."
#define SPEC_R53_1 "You marked 'generate' as a forward method, but `GPT.generate` does not exist or is not a method."
#define SPEC_R55_1 "Filter should be a dictionary, given 'foo'"
#define SPEC_R56_1 "The filter keys {'asd'} are not present in the state keys {'model'}."
#define SPEC_R57_1 "Expected `fabric.save(filter=...)` for key 'model' to be a callable, given 'foo'"
#define SPEC_R58_1 "`DeepSpeedStrategy.save_checkpoint(..., filter=...)` is not supported because `DeepSpeedStrategy` manages the state serialization internally."
#define SPEC_R59_1 "FSDP doesn't support loading sharded filtered checkpoints, so saving them is disabled."
#define SPEC_R61_1 "Could not find a FSDP model in the provided checkpoint state. Please provide the model as part of the state like so: `save_checkpoint(..., state={'model': model, ...})`. Make sure you set up the model (and optimizers if any) through the strategy before saving the checkpoint."
#define SPEC_R61_2 "Could not find a FSDP model in the provided checkpoint state. Please provide the model as part of the state like so: `load_checkpoint(..., state={'model': model, ...})`. Make sure you set up the model (and optimizers if any) through the strategy before loading the checkpoint."
#define SPEC_R62_1 "Could not find a DeepSpeed model in the provided checkpoint state. Please provide the model as part of the state like so: `save_checkpoint(..., state={'model': model, ...})`. Make sure you set up the model (and optimizers if any) through the strategy before saving the checkpoint."
#define SPEC_R62_2 "Could not find a DeepSpeed model in the provided checkpoint state. Please provide the model as part of the state like so: `load_checkpoint(..., state={'model': model, ...})`. Make sure you set up the model (and optimizers if any) through the strategy before loading the checkpoint."
#define SPEC_R63_1 "Got FSDPStrategy.load_checkpoint(..., state=None) but a state with at least  a model instance to reload is required. Pass it in like so: FSDPStrategy.load_checkpoint(..., state={'model': model, ...})"
#define SPEC_R64_1 "Loading a single optimizer object from a checkpoint is not supported yet with the FSDP strategy."
#define SPEC_R65_1 "Found multiple FSDP models in the given state. Saving checkpoints with FSDP is currently limited to a single model per checkpoint. To save multiple models, call the save method for each model separately with a different path."
#define SPEC_R65_2 "Found multiple FSDP models in the given state. Loading checkpoints with FSDP is currently limited to a single model per checkpoint. To load multiple models, call the load method for each model separately with a different path."
#define SPEC_R65_3 "Found multiple DeepSpeed engine modules in the given state. Saving checkpoints with DeepSpeed is currently limited to a single model per checkpoint. To save multiple models, call the save method for each model separately with a different path."
#define SPEC_R65_4 "Found multiple DeepSpeed engine modules in the given state. Saving and loading checkpoints with DeepSpeed is currently limited to a single model per checkpoint. To load multiple model states, call the load method for each model checkpoint separately."
#define SPEC_R66_1 "Accessing the XLA device before processes have spawned is not allowed."
#define SPEC_R68_1 "Your code has `Fabric(strategy='ddp', ...)` but it conflicts with the value `--strategy=fsdp` set through the CLI.  Remove it either from the CLI or from the Lightning Fabric object."
#define SPEC_W1_1 "The model is already wrapped in `FSDP` but there are still parameters on the meta device."
#define SPEC_W3_1 "Parameter initialization incomplete. The following modules have parameters or buffers with uninitialized memory because they don't define a `reset_parameters()` method for re-initialization: MyBlock"
#define SPEC_W5_1 "The `DeepSpeedStrategy` does not support skipping the gradient synchronization. Remove `.no_backward_sync()` from your code or choose a different strategy."
#define SPEC_W7_1 "'dp' is not supported on CPUs, hence setting `strategy='ddp'`."
#define SPEC_W8_1 "You passed `Fabric(accelerator='cpu', precision='16-mixed')` but AMP with fp16 is not supported on CPU. Using `precision='bf16-mixed'` instead."
#define SPEC_W9_1 "`precision=16` is supported for historical reasons but its usage is discouraged. Please set your precision to 16-mixed instead!"
#define SPEC_W10_1 "FSDP with `bf16-true` enables computation in lower precision. FSDP will always retain a full-precision copy of the model parameters for sharding."
#define SPEC_W13_1 "Your state has keys that collide with DeepSpeed's internal engine state. This could result in your values being overwritten by DeepSpeed. Consider changing the name of these keys to something else: optimizer"
/* raisesA: connector.py's flag checks, seed.py, init.py, data.py (Fabric's f-strings filled in) */
#define SPEC_R71_1 "You set `strategy=ddp_spawn` but strategies from the DDP family are not supported on the MPS accelerator. Either explicitly set `accelerator='cpu'` or change the strategy."
#define SPEC_R72_1 "Found invalid type for plugin 3. Expected one of: Precision, CheckpointIO, ClusterEnvironment."
#define SPEC_R73_1 "accelerator set through both strategy class and accelerator flag, choose one"
#define SPEC_R74_1 "The `XLAAccelerator` can only be used with a `SingleDeviceXLAStrategy`, `XLAStrategy`, or `XLAFSDPStrategy`. Found DDPStrategy."
#define SPEC_R75_1 "-1 is not in bounds, numpy accepts from 0 to 4294967295"
#define SPEC_R76_1 "Expected `torch.nn.Module` or `torch.optim.Optimizer`, got: str"
/* raisesF: Python's refusals inside _FabricOptimizer (wrappers.py:67) */
#define SPEC_R129_1 "__class__ assignment: 'Fabricint' object layout differs from '_FabricOptimizer'"
#define SPEC_R129_2 "type 'NoneType' is not an acceptable base type"
#define SPEC_W4_1 "The model passed to `Fabric.setup()` has 1 parameters on different devices (for example 'head.weight' on cuda:0 and 'body.weight' on cpu). Since `move_to_device=True`, all parameters will be moved to the new device. If this is not desired, set `Fabric.setup(..., move_to_device=False)`."
#define SPEC_R77_1 " Lightning can't inject a (distributed) sampler into your batch sampler, because it doesn't subclass PyTorch's `BatchSampler`. To mitigate this, either follow the API of `BatchSampler` or set`.setup_dataloaders(..., use_distributed_sampler=False)`. If you choose the latter, you will be responsible for handling the distributed sampling within your batch sampler."
/* raisesD: connector.py's plugin checks (Fabric prints the plugin's address; ours is fixed) */
#define SPEC_R78_1 "Received multiple values for Precision flags in `plugins`. Expected one value for each type at most."
#define SPEC_R79_1 "Received both `precision=16-mixed` and `plugins=<lightning.fabric.plugins.precision.half.HalfPrecision object at 0x7f0000000000>`. Choose one."
#define SPEC_R80_1 "Bitsandbytes is only supported on CUDA GPUs."
#define SPEC_R81_1 "precision set through both strategy class and plugins, choose one"
#define SPEC_R82_1 "CPU parallel_devices set through DDPStrategy class, but accelerator set to cuda, please choose one device type"
#define SPEC_R83_1 "GPU parallel_devices set through FSDPStrategy class, but accelerator set to cpu, please choose one device type"
#define SPEC_R84_1 "The FSDP strategy can only work with the `FSDPPrecision` plugin, found <lightning.fabric.plugins.precision.amp.MixedPrecision object at 0x7f0000000000>"
#define SPEC_W6_1 "`Fabric.sharded_model()` is deprecated in favor of `Fabric.init_module()`."
#define SPEC_R89_1 "`local_world_size` should be >= 1, got 0."
#define SPEC_R78_2 "Received multiple values for CheckpointIO, Precision flags in `plugins`. Expected one value for each type at most."
#define SPEC_R85_1 "checkpoint_io set through both strategy class and plugins, choose one"
#define SPEC_R86_1 "cluster_environment set through both strategy class and plugins, choose one"
#define SPEC_R87_1 "The XLA strategy can only work with the `XLACheckpointIO` plugin, found <lightning.fabric.plugins.io.torch_io.TorchCheckpointIO object at 0x7f0000000000>"
#define SPEC_R88_1 "The XLA strategy can only work with the `XLAPrecision` plugin, found <lightning.fabric.plugins.precision.half.HalfPrecision object at 0x7f0000000000>"
/* strategies/ (R90-R104, W20) */
#define SPEC_R90_1 "Unknown state_dict_type: foo"
#define SPEC_R91_1 "You cannot set both `activation_checkpointing` and `activation_checkpointing_policy`. Use the latter."
#define SPEC_R92_1 "The arguments `FSDPStrategy(process_group=..., device_mesh=...)` are mutually exclusive.Pass only one of them."
#define SPEC_R93_1 "The hybrid sharding strategy requires you to pass at least one of the parameters: `auto_wrap_policy`, `process_group` tuple, or `device_mesh`."
#define SPEC_R94_1 "The selected device indices [1, 2] don't match the local rank values of processes. If you need to select GPUs at a specific index, set the `CUDA_VISIBLE_DEVICES` environment variable instead. For example: `CUDA_VISIBLE_DEVICES=1,2`."
#define SPEC_R95_1 "You passed in a path to a DeepSpeed config but the path does not exist: ds.json"
#define SPEC_R96_1 "Could not find a distributed model in the provided checkpoint state. Please provide the model as part of the state like so: `save_checkpoint(..., state={'model': model, ...})`. Make sure you set up the model (and optimizers if any) through the strategy before saving the checkpoint."
#define SPEC_R96_2 "Could not find a distributed model in the provided checkpoint state. Please provide the model as part of the state like so: `load_checkpoint(..., state={'model': model, ...})`. Make sure you set up the model (and optimizers if any) through the strategy before loading the checkpoint."
#define SPEC_R97_1 "Loading a single optimizer object from a checkpoint is not supported yet with ModelParallelStrategy."
#define SPEC_R98_1 "The sizes `data_parallel_size=2` and `tensor_parallel_size=4` multiplied should equal the world size (4)."
#define SPEC_R100_1 "Currently, the XLAStrategy only supports `sum`, `mean`, `avg` for the reduce operation, got: max"
#define SPEC_R101_1 "The start method 'fork' is not available on this platform. Available methods are: spawn"
#define SPEC_R102_1 "The `parallelize_fn` must return a `nn.Module` instance, but got: NoneType"
#define SPEC_R104_1 "Found multiple distributed models in the given state. Saving distributed checkpoints is currently limited to a single model per checkpoint. To save multiple models, call the save method for each model separately with a different path."
#define SPEC_R104_2 "Found multiple distributed models in the given state. Loading distributed checkpoints is currently limited to a single model per checkpoint. To load multiple models, call the load method for each model separately with a different path."
#define SPEC_W20_1 "`FSDPStrategy(activation_checkpointing=[<class '__main__.Block'>])` is deprecated, use `FSDPStrategy(activation_checkpointing_policy={<class '__main__.Block'>})` instead."
/* strategies/ (raisesE: R107-R109, W21) */
#define SPEC_R107_1 "The `FSDPStrategy` does not use the `CheckpointIO` plugin interface."
#define SPEC_R107_2 "The `ModelParallelStrategy` does not use the `CheckpointIO` plugin interface."
#define SPEC_R108_1 "Accessing the device mesh before processes have initialized is not allowed."
#define SPEC_R109_1 "The `FSDPStrategy` does not support setting a `CheckpointIO` plugin."
#define SPEC_R87_2 "The XLA strategy can only work with the `XLACheckpointIO` plugin, found io.ckpt"
#define SPEC_W21_1 "The model has shared parameters (`emb.wte.weight`, `head.weight`) that will be placed in separate FSDP units (`emb`, `<root>`) by the `auto_wrap_policy`. This will lead to errors during forward/backward due to tensor size mismatches (e.g., tied embeddings in transformer models). Consider removing the module type that wraps the shared parameter from your `auto_wrap_policy`."

/* ---- helpers ----------------------------------------------------------- */

#define STR(x) ((fsF_value){.kind = FSF_STR, .s = (x)})
#define INT(x) ((fsF_value){.kind = FSF_INT, .i = (x)})
#define FLT(x) ((fsF_value){.kind = FSF_FLOAT, .f = (x)})
#define BOOL(x) ((fsF_value){.kind = FSF_BOOL, .i = (x)})
#define NONE ((fsF_value){.kind = FSF_NONE})

static fsF_machine machine(int gpus) {
  fsF_machine m = {0};
  m.cuda_gpus = gpus;
  m.has_fork = 1;
  return m;
}

/* Resolves and expects the error `rule` with exactly `msg`. */
static void expect_resolve_error(const fsF_args *a, const fsF_overrides *o, const fsF_machine *m,
                                 const char *rule, const char *msg) {
  fsF_config cfg;
  fsF_issues iss;
  fsF_issues_init(&iss);
  assert_int_equal(fsF_resolve(a, o, m, &cfg, &iss), -1);
  const fsF_issue *e = fsF_error(&iss);
  assert_non_null(e);
  assert_string_equal(e->rule, rule);
  assert_string_equal(e->message, msg);
  fsF_issues_free(&iss);
}

static void resolve_ok(const fsF_args *a, const fsF_overrides *o, const fsF_machine *m,
                       fsF_config *cfg, fsF_issues *iss) {
  fsF_issues_init(iss);
  assert_int_equal(fsF_resolve(a, o, m, cfg, iss), 0);
}

/* The one issue in iss has this rule and message. */
static void expect_issue(fsF_issues *iss, const char *rule, const char *msg) {
  assert_int_equal(iss->n, 1);
  assert_string_equal(iss->items[0].rule, rule);
  assert_string_equal(iss->items[0].message, msg);
  fsF_issues_clear(iss);
}

/* A fabric for `strategy` on accelerator cuda with `gpus` visible GPUs. */
typedef struct env { fsF_config cfg; fsF_fabric f; fsF_issues iss; } env;

static void env_open(env *e, fsF_value strategy, const char *precision, int gpus, int launched) {
  fsF_machine m = machine(gpus);
  m.deepspeed = 1;
  fsF_args a = {.strategy = strategy, .accelerator = STR(gpus ? "cuda" : "cpu")};
  if (precision) a.precision = STR(precision);
  fsF_issues_init(&e->iss);
  assert_int_equal(fsF_resolve(&a, NULL, &m, &e->cfg, &e->iss), 0);
  fsF_issues_clear(&e->iss);
  fsF_fabric_init(&e->f, &e->cfg);
  e->f.launched = launched;
}

static void env_close(env *e) { fsF_issues_free(&e->iss); }

static fsF_model raw_model(const char *cls) { return (fsF_model){.class_name = cls, .is_module = 1}; }

/* ---- Fabric(...) ------------------------------------------------------- */

static void test_r1_r2_r3(void **state) {
  fsF_machine m = machine(0);
  expect_resolve_error(&(fsF_args){.strategy = STR("cocofruit")}, NULL, &m, "R1", SPEC_R1_1);
  /* lower-cased before the lookup and in the message */
  expect_resolve_error(&(fsF_args){.strategy = STR("CocoFruit")}, NULL, &m, "R1", SPEC_R1_1);
  expect_resolve_error(&(fsF_args){.accelerator = STR("cocofruit")}, NULL, &m, "R2", SPEC_R2_1);
  expect_resolve_error(&(fsF_args){.accelerator = STR("CPU")}, NULL, &m, "R2",
                       "You selected an invalid accelerator name: `accelerator='CPU'`. Available names are: auto, cpu, cuda, mps, tpu.");
  expect_resolve_error(&(fsF_args){.precision = STR("invalid")}, NULL, &m, "R3", SPEC_R3_1);
  expect_resolve_error(&(fsF_args){.precision = BOOL(1)}, NULL, &m, "R3",
                       "Precision True is invalid. Allowed precision values: ('transformer-engine', 'transformer-engine-float16', '16-true', '16-mixed', 'bf16-true', 'bf16-mixed', '32-true', '64-true', 64, 32, 16, '64', '32', '16', 'bf16')");
  /* 16.0 == 16 passes R3, then names no precision */
  expect_resolve_error(&(fsF_args){.precision = FLT(16.0)}, NULL, &m, "R3", "No precision set");
  /* order: R1 before R2 */
  expect_resolve_error(&(fsF_args){.strategy = STR("cocofruit"), .accelerator = STR("x")}, NULL, &m, "R1", SPEC_R1_1);
  (void)state;
}

static void test_r4_r5_r6_r7_r8(void **state) {
  fsF_machine m = machine(0);
  expect_resolve_error(&(fsF_args){.num_nodes = INT(0)}, NULL, &m, "R4", SPEC_R4_1);
  expect_resolve_error(&(fsF_args){.num_nodes = FLT(0.5)}, NULL, &m, "R4", SPEC_R4_1);
  expect_resolve_error(&(fsF_args){.num_nodes = STR("x")}, NULL, &m, "R4",
                       "invalid literal for int() with base 10: 'x'");
  expect_resolve_error(&(fsF_args){.devices = INT(0)}, NULL, &m, "R5", SPEC_R5_1);
  expect_resolve_error(&(fsF_args){.accelerator = STR("cuda"), .devices = STR("0")}, NULL, &m, "R5",
                       "`Fabric(devices='0')` value is not a valid input using cuda accelerator.");
  expect_resolve_error(&(fsF_args){.accelerator = STR("gpu")}, NULL, &m, "R6", SPEC_R6_1);
  fsF_machine m1 = machine(1);
  expect_resolve_error(&(fsF_args){.accelerator = STR("mps")}, NULL, &m1, "R7", SPEC_R7_1);
  expect_resolve_error(&(fsF_args){.accelerator = STR("cuda")}, NULL, &m, "R7",
                       "`CUDAAccelerator` can not run on your system since the accelerator is not available. The following accelerator(s) is available and can be passed into `accelerator` argument of `Fabric`: ['cpu'].");
  expect_resolve_error(&(fsF_args){.accelerator = STR("cpu"), .devices = INT(-1)}, NULL, &m, "R8", SPEC_R8_1);
  expect_resolve_error(&(fsF_args){.accelerator = STR("cpu"), .devices = STR("0,1")}, NULL, &m, "R8", SPEC_R8_1);
  (void)state;
}

static void test_r9(void **state) {
  fsF_machine m = machine(1);
  fsF_args a = {.accelerator = STR("cuda"), .devices = INT(3)};
  expect_resolve_error(&a, NULL, &m, "R9", SPEC_R9_1);
  a.devices = INT(-2);
  expect_resolve_error(&a, NULL, &m, "R9", SPEC_R9_2);
  int64_t dup[] = {0, 0};
  a.devices = (fsF_value){.kind = FSF_INTLIST, .ints = dup, .nints = 2};
  expect_resolve_error(&a, NULL, &m, "R9", SPEC_R9_3);
  a.devices = FLT(1.5);
  expect_resolve_error(&a, NULL, &m, "R9", SPEC_R9_4);
  a.devices = (fsF_value){.kind = FSF_LIST, .s = "[0, '1']", .tname = "str"};
  expect_resolve_error(&a, NULL, &m, "R9", SPEC_R9_5);
  fsF_machine m4 = machine(4);
  a.devices = STR("1,3");
  fsF_config cfg;
  fsF_issues iss;
  resolve_ok(&a, NULL, &m4, &cfg, &iss);
  assert_int_equal(cfg.devices, 2);
  assert_int_equal(cfg.device_ids[1], 3);
  assert_int_equal(cfg.cls, FSF_DDP);
  fsF_issues_free(&iss);
  (void)state;
}

static void test_r10_r11_r12_r13_r14_r15(void **state) {
  fsF_machine m = machine(0), m1 = machine(1);
  expect_resolve_error(&(fsF_args){.accelerator = STR("cpu"), .strategy = STR("fsdp")}, NULL, &m, "R10", SPEC_R10_1);
  /* auto resolving to cpu is not a GPU either */
  expect_resolve_error(&(fsF_args){.strategy = STR("fsdp")}, NULL, &m, "R10", SPEC_R10_1);
  expect_resolve_error(&(fsF_args){.strategy = STR("fsdp"), .precision = STR("64-true")}, NULL, &m1, "R11", SPEC_R11_1);
  expect_resolve_error(&(fsF_args){.strategy = STR("fsdp"), .precision = INT(64)}, NULL, &m1, "R11", SPEC_R11_1);
  fsF_value mp = {.kind = FSF_STRATEGY, .strategy = {.cls = FSF_MP, .save_distributed = -1}};
  expect_resolve_error(&(fsF_args){.strategy = mp, .precision = STR("16-mixed")}, NULL, &m1, "R12", SPEC_R12_1);
  expect_resolve_error(&(fsF_args){.strategy = STR("deepspeed")}, NULL, &m1, "R13", SPEC_R13_1);
  expect_resolve_error(&(fsF_args){.strategy = STR("xla")}, NULL, &m1, "R14", SPEC_R14_1);
  expect_resolve_error(&(fsF_args){.accelerator = STR("tpu")}, NULL, &m1, "R14", SPEC_R14_1);
  fsF_machine win = machine(0);
  win.has_fork = 0;
  expect_resolve_error(&(fsF_args){.strategy = STR("ddp_fork")}, NULL, &win, "R15", SPEC_R15_1);
  fsF_machine ds = machine(1);
  ds.deepspeed = 1;
  expect_resolve_error(&(fsF_args){.strategy = STR("deepspeed"), .precision = STR("64-true")}, NULL, &ds, "R11",
                       "`precision='64-true')` is not supported in DeepSpeed. `precision` must be one of: ('32-true', '16-true', 'bf16-true', '16-mixed', 'bf16-mixed').");
  (void)state;
}

static void test_r68_cli(void **state) {
  fsF_machine m = machine(1);
  fsF_overrides o = {.strategy = "fsdp"};
  expect_resolve_error(&(fsF_args){.strategy = STR("ddp")}, &o, &m, "R68", SPEC_R68_1);
  /* the default takes the CLI value silently */
  fsF_config cfg;
  fsF_issues iss;
  resolve_ok(&(fsF_args){.accelerator = STR("cuda")}, &o, &m, &cfg, &iss);
  assert_int_equal(cfg.cls, FSF_FSDP);
  fsF_issues_free(&iss);
  /* the same explicit value is no conflict; num_nodes is named as Fabric names it */
  fsF_overrides n = {.num_nodes = "2"};
  resolve_ok(&(fsF_args){.num_nodes = INT(2)}, &n, &m, &cfg, &iss);
  assert_int_equal(cfg.world_size, 2);
  assert_int_equal(cfg.cls, FSF_DDP);
  fsF_issues_free(&iss);
  expect_resolve_error(&(fsF_args){.num_nodes = INT(3)}, &n, &m, "R68",
                       "Your code has `Fabric(num_nodes=3, ...)` but it conflicts with the value `--num_nodes=2` set through the CLI.  Remove it either from the CLI or from the Lightning Fabric object.");
  (void)state;
}

static void test_resolution_and_traits(void **state) {
  fsF_config cfg;
  fsF_issues iss;
  /* Fabric() on a GPU-less machine: one CPU device */
  fsF_machine m0 = machine(0), m1 = machine(1), m4 = machine(4);
  resolve_ok(&(fsF_args){0}, NULL, &m0, &cfg, &iss);
  assert_int_equal(cfg.cls, FSF_SINGLE);
  assert_int_equal(cfg.accel, FSF_CPU);
  assert_false(cfg.launch_required);
  assert_int_equal(cfg.precision, FSF_P32);
  fsF_issues_free(&iss);
  /* devices="auto" on 4 GPUs: DDP, launch required */
  resolve_ok(&(fsF_args){0}, NULL, &m4, &cfg, &iss);
  assert_int_equal(cfg.cls, FSF_DDP);
  assert_int_equal(cfg.world_size, 4);
  assert_true(cfg.launch_required);
  assert_false(cfg.launch_needs_fn);
  fsF_issues_free(&iss);
  /* W7: dp on CPU becomes ddp */
  resolve_ok(&(fsF_args){.strategy = STR("dp")}, NULL, &m0, &cfg, &iss);
  assert_int_equal(cfg.cls, FSF_DDP);
  expect_issue(&iss, "W7", SPEC_W7_1);
  fsF_issues_free(&iss);
  /* W8 and W9 on CPU: 16 -> 16-mixed -> bf16-mixed */
  resolve_ok(&(fsF_args){.precision = INT(16)}, NULL, &m0, &cfg, &iss);
  assert_int_equal(iss.n, 2);
  assert_string_equal(iss.items[0].message, SPEC_W9_1);
  assert_string_equal(iss.items[1].rule, "W8");
  assert_string_equal(iss.items[1].message, SPEC_W8_1);
  assert_int_equal(cfg.precision, FSF_PBF16_MIXED);
  assert_true(cfg.fabric_backward_required);
  fsF_issues_free(&iss);
  /* fsdp: every trait of the table */
  resolve_ok(&(fsF_args){.strategy = STR("FSDP"), .accelerator = STR("cuda")}, NULL, &m1, &cfg, &iss);
  assert_int_equal(iss.n, 0);
  assert_string_equal(fsF_cls_name(cfg.cls), "FSDPStrategy");
  assert_true(cfg.launch_required);
  assert_true(cfg.setup_optimizers_allowed);
  assert_true(cfg.fabric_backward_required);
  assert_true(cfg.use_orig_params);
  assert_true(cfg.state_dict_sharded);
  assert_int_equal(cfg.no_backward_sync, FSF_NBS_SKIP);
  fsF_issues_free(&iss);
  fsF_value obj = {.kind = FSF_STRATEGY, .strategy = {.cls = FSF_FSDP, .use_orig_params = 0, .state_dict_full = 1}};
  resolve_ok(&(fsF_args){.strategy = obj, .accelerator = STR("gpu")}, NULL, &m1, &cfg, &iss);
  assert_false(cfg.use_orig_params);
  assert_false(cfg.state_dict_sharded);
  fsF_issues_free(&iss);
  /* spawn: launch needs a function */
  resolve_ok(&(fsF_args){.strategy = STR("ddp_spawn"), .accelerator = STR("cpu"), .devices = INT(2)}, NULL, &m0, &cfg, &iss);
  assert_true(cfg.launch_needs_fn);
  assert_int_equal(cfg.launcher, FSF_LAUNCH_SPAWN);
  fsF_issues_free(&iss);
  /* deepspeed stage 3 from the name; setup_optimizers forbidden */
  fsF_machine ds = machine(2);
  ds.deepspeed = 1;
  resolve_ok(&(fsF_args){.strategy = STR("deepspeed_stage_3_offload")}, NULL, &ds, &cfg, &iss);
  assert_int_equal(cfg.zero_stage, 3);
  assert_false(cfg.setup_optimizers_allowed);
  assert_int_equal(cfg.no_backward_sync, FSF_NBS_WARN);
  fsF_issues_free(&iss);
  (void)state;
}

static void test_reprs(void **state) {
  struct { fsF_value v; const char *repr; } cases[] = {
    {FLT(1.5), "1.5"}, {FLT(16.0), "16.0"}, {FLT(1e-5), "1e-05"}, {FLT(1e16), "1e+16"},
    {FLT(0.1), "0.1"}, {FLT(123456.75), "123456.75"}, {STR("it's"), "\"it's\""},
    {STR("a\nb"), "'a\\nb'"}, {NONE, "None"}, {BOOL(0), "False"}, {INT(-3), "-3"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *r = fsF_value_repr(&cases[i].v);
    assert_string_equal(r, cases[i].repr);
    free(r);
  }
  (void)state;
}

static void test_arg_parsing(void **state) {
  fsF_overrides o = {0};
  fsF_machine m = machine(0);
  const char *err = NULL;
  assert_int_equal(fsF_parse_arg(&o, &m, "--strategy=fsdp", NULL, &err), 1);
  assert_string_equal(o.strategy, "fsdp");
  assert_int_equal(fsF_parse_arg(&o, &m, "--num-nodes", "2", &err), 2);
  assert_string_equal(o.num_nodes, "2");
  assert_int_equal(fsF_parse_arg(&o, &m, "--gpus=4", NULL, &err), 1);
  assert_int_equal(m.cuda_gpus, 4);
  assert_int_equal(fsF_parse_arg(&o, &m, "--assume=deepspeed,cli", NULL, &err), 1);
  assert_true(m.deepspeed && m.under_cli);
  assert_int_equal(fsF_parse_arg(&o, &m, "--gpus=x", NULL, &err), -1);
  assert_int_equal(fsF_parse_arg(&o, &m, "--assume=quantum", NULL, &err), -1);
  assert_int_equal(fsF_parse_arg(&o, &m, "--strategyx=1", NULL, &err), 0);
  assert_int_equal(fsF_parse_arg(&o, &m, "--devices", NULL, &err), -1);
  (void)state;
}

/* ---- launching ---------------------------------------------------------- */

static void test_launch_rules(void **state) {
  env e;
  env_open(&e, STR("ddp_spawn"), NULL, 2, 0);
  fsF_model m = raw_model("Linear");
  assert_int_equal(fsF_check_setup_module(&e.f, &m, &e.iss), -1);
  expect_issue(&e.iss, "R16", SPEC_R16_1);
  assert_int_equal(fsF_check_collective(&e.f, &e.iss), -1);
  expect_issue(&e.iss, "R16", SPEC_R16_1);
  assert_int_equal(fsF_check_launch(&e.f, FSF_FN_NONE, NULL, NULL, 0, &e.iss), -1);
  expect_issue(&e.iss, "R17", SPEC_R17_1);
  assert_false(e.f.launched);
  assert_int_equal(fsF_check_launch(&e.f, FSF_FN_NOT_CALLABLE, "None", NULL, 0, &e.iss), -1);
  expect_issue(&e.iss, "R18", SPEC_R18_1);
  assert_int_equal(fsF_check_launch(&e.f, FSF_FN_CALLABLE, NULL, "train", 0, &e.iss), -1);
  expect_issue(&e.iss, "R19", SPEC_R19_1);
  assert_int_equal(fsF_check_launch(&e.f, FSF_FN_CALLABLE, NULL, "train", 1, &e.iss), 0);
  assert_true(e.f.launched);
  assert_int_equal(fsF_check_setup_module(&e.f, &m, &e.iss), 0);
  env_close(&e);

  fsF_machine cli = machine(1);
  cli.under_cli = 1;
  fsF_config cfg;
  fsF_issues iss;
  resolve_ok(&(fsF_args){.strategy = STR("ddp")}, NULL, &cli, &cfg, &iss);
  fsF_fabric f;
  fsF_fabric_init(&f, &cfg);
  assert_true(f.launched); /* under the CLI: no R16 */
  assert_int_equal(fsF_check_launch(&f, FSF_FN_NONE, NULL, NULL, 0, &iss), -1);
  expect_issue(&iss, "R20", SPEC_R20_1);
  fsF_issues_free(&iss);

  fsF_machine xla = machine(0);
  xla.xla = 1;
  xla.tpus = 8;
  resolve_ok(&(fsF_args){.strategy = STR("xla")}, NULL, &xla, &cfg, &iss);
  fsF_fabric_init(&f, &cfg);
  assert_int_equal(fsF_check_device(&f, &iss), -1);
  expect_issue(&iss, "R66", SPEC_R66_1);
  f.launched = 1;
  assert_int_equal(fsF_check_device(&f, &iss), 0);
  fsF_issues_free(&iss);

  fsF_machine ds = machine(0);
  ds.deepspeed = 1;
  resolve_ok(&(fsF_args){.strategy = STR("deepspeed"), .accelerator = STR("cpu")}, NULL, &ds, &cfg, &iss);
  fsF_fabric_init(&f, &cfg);
  assert_int_equal(fsF_check_launch(&f, FSF_FN_NONE, NULL, NULL, 0, &iss), -1);
  expect_issue(&iss, "R21", SPEC_R21_1);
  fsF_issues_free(&iss);
  /* single device: no launch needed */
  env_open(&e, STR("auto"), NULL, 1, 0);
  assert_int_equal(fsF_check_setup_module(&e.f, &m, &e.iss), 0);
  assert_int_equal(fsF_check_launch(&e.f, FSF_FN_NONE, NULL, NULL, 0, &e.iss), 0);
  env_close(&e);
  (void)state;
}

/* ---- setup ordering ----------------------------------------------------- */

static void test_double_setup(void **state) {
  env e;
  env_open(&e, STR("ddp"), NULL, 2, 1);
  fsF_model m = raw_model("Linear");
  fsF_optim o = fsF_optim_over(&e.f, &m);
  const fsF_optim *opts[] = {&o};
  assert_int_equal(fsF_check_setup(&e.f, &m, opts, 1, &e.iss), 0);
  fsF_setup_done(&e.f, &m);
  fsF_setup_optim_done(&o);
  assert_int_equal(fsF_check_setup(&e.f, &m, opts, 1, &e.iss), -1);
  expect_issue(&e.iss, "R22", SPEC_R22_1);
  fsF_model raw2 = raw_model("Linear");
  assert_int_equal(fsF_check_setup(&e.f, &raw2, opts, 1, &e.iss), -1);
  expect_issue(&e.iss, "R23", SPEC_R23_1);
  assert_int_equal(fsF_check_setup_module(&e.f, &m, &e.iss), -1);
  expect_issue(&e.iss, "R24", SPEC_R24_1);
  assert_int_equal(fsF_check_setup_optimizers(&e.f, NULL, 0, &e.iss), -1);
  expect_issue(&e.iss, "R26", SPEC_R26_1);
  assert_int_equal(fsF_check_setup_optimizers(&e.f, opts, 1, &e.iss), -1);
  expect_issue(&e.iss, "R27", SPEC_R27_1);
  fsF_loader dl = {.is_dataloader = 1}, ds = {0}, done = {.wrapped = 1, .is_dataloader = 1};
  const fsF_loader *l0[] = {&dl}, *l1[] = {&ds, &done}, *l2[] = {&ds};
  assert_int_equal(fsF_check_setup_dataloaders(&e.f, NULL, 0, &e.iss), -1);
  expect_issue(&e.iss, "R28", SPEC_R28_1);
  assert_int_equal(fsF_check_setup_dataloaders(&e.f, l1, 2, &e.iss), -1); /* R29 before R30 */
  expect_issue(&e.iss, "R29", SPEC_R29_1);
  assert_int_equal(fsF_check_setup_dataloaders(&e.f, l2, 1, &e.iss), -1);
  expect_issue(&e.iss, "R30", SPEC_R30_1);
  assert_int_equal(fsF_check_setup_dataloaders(&e.f, l0, 1, &e.iss), 0);
  assert_int_equal(e.f.models_setup, 1);
  env_close(&e);
  (void)state;
}

static void test_deepspeed_rules(void **state) {
  env e;
  env_open(&e, STR("deepspeed_stage_3"), NULL, 1, 1);
  fsF_model m = raw_model("Linear");
  fsF_optim o1 = fsF_optim_over(&e.f, &m), o2 = o1;
  const fsF_optim *opts[] = {&o1, &o2};
  assert_int_equal(fsF_check_setup_optimizers(&e.f, opts, 1, &e.iss), -1);
  expect_issue(&e.iss, "R25", SPEC_R25_1);
  assert_int_equal(fsF_check_init_module(&e.f, 0, &e.iss), -1);
  expect_issue(&e.iss, "R38", SPEC_R38_1);
  assert_int_equal(fsF_check_init_module(&e.f, -1, &e.iss), 0);
  assert_int_equal(fsF_init_module_effect(&e.cfg, 1), FSF_INIT_PARTITIONED);
  assert_int_equal(fsF_check_backward(&e.f, NULL, &e.iss), -1);
  expect_issue(&e.iss, "R39", SPEC_R39_1);
  assert_int_equal(fsF_check_setup(&e.f, &m, opts, 2, &e.iss), -1);
  expect_issue(&e.iss, "R31", SPEC_R31_1);
  assert_int_equal(fsF_check_setup(&e.f, &m, opts, 1, &e.iss), 0);
  fsF_setup_done(&e.f, &m);
  fsF_model m2 = raw_model("Linear");
  fsF_setup_done(&e.f, &m2);
  assert_int_equal(fsF_check_backward(&e.f, NULL, &e.iss), -1);
  expect_issue(&e.iss, "R40", SPEC_R40_1);
  assert_int_equal(fsF_check_backward(&e.f, &m, &e.iss), 0);
  assert_int_equal(fsF_check_clip_gradients(&e.f, &m, 0, 1, &e.iss), -1);
  expect_issue(&e.iss, "R45", SPEC_R45_1);
  assert_int_equal(fsF_check_no_backward_sync(&e.f, &m, &e.iss), 0);
  expect_issue(&e.iss, "W5", SPEC_W5_1);
  fsF_filter flt = {.kind = FSF_LIST};
  fsF_entry two[] = {{"model", FSF_S_MODEL, &m, NULL}, {"m2", FSF_S_MODEL, &m2, NULL}};
  assert_int_equal(fsF_check_save(&e.f, two, 1, &flt, &e.iss), -1);
  expect_issue(&e.iss, "R58", SPEC_R58_1);
  fsF_entry step[] = {{"step", FSF_S_OTHER, NULL, NULL}};
  assert_int_equal(fsF_check_save(&e.f, step, 1, NULL, &e.iss), -1);
  expect_issue(&e.iss, "R62", SPEC_R62_1);
  assert_int_equal(fsF_check_load(&e.f, step, 1, 0, &e.iss), -1);
  expect_issue(&e.iss, "R62", SPEC_R62_2);
  assert_int_equal(fsF_check_save(&e.f, two, 2, NULL, &e.iss), -1);
  expect_issue(&e.iss, "R65", SPEC_R65_3);
  assert_int_equal(fsF_check_load(&e.f, two, 2, 0, &e.iss), -1);
  expect_issue(&e.iss, "R65", SPEC_R65_4);
  assert_int_equal(fsF_check_load(&e.f, NULL, 0, 1, &e.iss), -1);
  expect_issue(&e.iss, "R63", "Got DeepSpeedStrategy.load_checkpoint(..., state=None) but a state with at least  a model instance to reload is required. Pass it in like so: DeepSpeedStrategy.load_checkpoint(..., state={'model': model, ...})");
  fsF_optim other = {0};
  fsF_entry col[] = {{"model", FSF_S_MODEL, &m, NULL}, {"optimizer", FSF_S_OPTIM, NULL, &other}};
  assert_int_equal(fsF_check_save(&e.f, col, 2, NULL, &e.iss), 0);
  expect_issue(&e.iss, "W13", SPEC_W13_1);
  env_close(&e);
  (void)state;
}

/* ---- meta device ------------------------------------------------------- */

static void test_meta_rules(void **state) {
  env e;
  env_open(&e, STR("fsdp"), NULL, 1, 1);
  assert_int_equal(fsF_init_module_effect(&e.cfg, 1), FSF_INIT_META);
  assert_int_equal(fsF_init_module_effect(&e.cfg, 0), FSF_INIT_NORMAL);
  assert_int_equal(fsF_init_module_effect(&e.cfg, -1), FSF_INIT_NORMAL);
  fsF_model m = raw_model("Linear");
  m.meta = 1;
  fsF_optim o = fsF_optim_over(&e.f, &m);
  const fsF_optim *opts[] = {&o};
  assert_int_equal(fsF_check_setup(&e.f, &m, opts, 1, &e.iss), -1);
  expect_issue(&e.iss, "R36", SPEC_R36_1);
  /* separately: setup_module materializes, the old optimizer keeps meta params */
  assert_int_equal(fsF_check_setup_module(&e.f, &m, &e.iss), 0);
  fsF_setup_done(&e.f, &m);
  assert_false(m.meta);
  assert_int_equal(m.generation, 1);
  assert_int_equal(fsF_check_setup_optimizers(&e.f, opts, 1, &e.iss), -1);
  expect_issue(&e.iss, "R37", SPEC_R37_1);
  fsF_optim fresh = fsF_optim_over(&e.f, &m);
  opts[0] = &fresh;
  assert_int_equal(fsF_check_setup_optimizers(&e.f, opts, 1, &e.iss), 0);
  env_close(&e);

  /* ddp: empty_init=True is uninitialized memory, not meta */
  env_open(&e, STR("ddp"), NULL, 2, 1);
  assert_int_equal(fsF_init_module_effect(&e.cfg, 1), FSF_INIT_EMPTY);
  fsF_model mm = raw_model("Linear");
  mm.meta = 1; /* explicit device("meta"): setup would .to() it */
  assert_int_equal(fsF_check_setup_module(&e.f, &mm, &e.iss), -1);
  assert_string_equal(fsF_error(&e.iss)->rule, "meta-move");
  env_close(&e);

  /* mp: joint setup with a meta optimizer is silent in Fabric: our warning */
  fsF_value mp = {.kind = FSF_STRATEGY, .strategy = {.cls = FSF_MP, .save_distributed = -1}};
  env_open(&e, mp, NULL, 1, 1);
  fsF_model pm = raw_model("GPT");
  pm.meta = 1;
  pm.no_reset = "MyBlock";
  fsF_optim po = fsF_optim_over(&e.f, &pm);
  const fsF_optim *popts[] = {&po};
  assert_int_equal(fsF_check_setup(&e.f, &pm, popts, 1, &e.iss), 0);
  assert_int_equal(e.iss.n, 2);
  assert_string_equal(e.iss.items[0].message, SPEC_W3_1);
  assert_string_equal(e.iss.items[1].rule, "meta-optimizer");
  env_close(&e);
  (void)state;
}

static void test_fsdp_rules(void **state) {
  env e;
  fsF_value obj = {.kind = FSF_STRATEGY, .strategy = {.cls = FSF_FSDP, .use_orig_params = 0, .state_dict_full = -1}};
  env_open(&e, obj, NULL, 1, 1);
  fsF_model m = raw_model("Linear");
  fsF_optim before = fsF_optim_over(&e.f, &m);
  const fsF_optim *opts[] = {&before};
  assert_int_equal(fsF_check_setup(&e.f, &m, opts, 1, &e.iss), -1);
  expect_issue(&e.iss, "R32", SPEC_R32_1);
  assert_int_equal(fsF_check_clip_gradients(&e.f, &m, 0, 1, &e.iss), -1);
  expect_issue(&e.iss, "R47", SPEC_R47_1);
  fsF_setup_done(&e.f, &m);
  assert_int_equal(fsF_check_setup_optimizers(&e.f, opts, 1, &e.iss), -1);
  expect_issue(&e.iss, "R33", SPEC_R33_1);
  fsF_optim after = fsF_optim_over(&e.f, &m);
  opts[0] = &after;
  assert_int_equal(fsF_check_setup_optimizers(&e.f, opts, 1, &e.iss), 0);
  assert_int_equal(fsF_check_clip_gradients(&e.f, &m, 0, 1, &e.iss), 0);
  assert_int_equal(fsF_check_load_raw(&e.f, 1, &e.iss), -1);
  expect_issue(&e.iss, "R64", SPEC_R64_1);
  /* checkpoints */
  fsF_filter flt = {.kind = FSF_LIST};
  fsF_entry st[] = {{"model", FSF_S_MODEL, &m, NULL}, {"m2", FSF_S_MODEL, &m, NULL}};
  assert_int_equal(fsF_check_save(&e.f, st, 1, &flt, &e.iss), -1);
  expect_issue(&e.iss, "R59", SPEC_R59_1);
  fsF_entry step[] = {{"step", FSF_S_OTHER, NULL, NULL}};
  assert_int_equal(fsF_check_save(&e.f, step, 1, NULL, &e.iss), -1);
  expect_issue(&e.iss, "R61", SPEC_R61_1);
  assert_int_equal(fsF_check_load(&e.f, step, 1, 0, &e.iss), -1);
  expect_issue(&e.iss, "R61", SPEC_R61_2);
  assert_int_equal(fsF_check_load(&e.f, NULL, 0, 1, &e.iss), -1);
  expect_issue(&e.iss, "R63", SPEC_R63_1);
  assert_int_equal(fsF_check_save(&e.f, st, 2, NULL, &e.iss), -1);
  expect_issue(&e.iss, "R65", SPEC_R65_1);
  assert_int_equal(fsF_check_load(&e.f, st, 2, 0, &e.iss), -1);
  expect_issue(&e.iss, "R65", SPEC_R65_2);
  assert_int_equal(fsF_check_save(&e.f, st, 1, NULL, &e.iss), 0);
  env_close(&e);

  env_open(&e, STR("fsdp"), "bf16-true", 1, 1);
  assert_int_equal(fsF_check_init_module(&e.f, 1, &e.iss), 0);
  expect_issue(&e.iss, "W10", SPEC_W10_1);
  fsF_model w = raw_model("Net");
  w.has_fsdp_submodules = 1;
  w.meta = 1;
  assert_int_equal(fsF_check_setup_module(&e.f, &w, &e.iss), 0);
  assert_int_equal(e.iss.n, 2);
  assert_string_equal(e.iss.items[0].message, SPEC_W1_1);
  fsF_issues_clear(&e.iss);
  fsF_setup_done(&e.f, &w);
  assert_true(w.meta); /* W1: stays meta */
  env_close(&e);
  (void)state;
}

static void test_backward_and_clip(void **state) {
  env e;
  env_open(&e, STR("auto"), "bf16-mixed", 1, 0);
  fsF_model m = raw_model("Linear");
  assert_int_equal(fsF_check_tensor_backward(&e.f, &e.iss), -1);
  expect_issue(&e.iss, "R42", SPEC_R42_1);
  assert_int_equal(fsF_check_backward(&e.f, &m, &e.iss), -1);
  expect_issue(&e.iss, "R41", SPEC_R41_1);
  assert_int_equal(fsF_check_clip_gradients(&e.f, &m, 1, 1, &e.iss), -1);
  expect_issue(&e.iss, "R43", SPEC_R43_1);
  assert_int_equal(fsF_check_clip_gradients(&e.f, &m, 0, 0, &e.iss), -1);
  expect_issue(&e.iss, "R44", SPEC_R44_1);
  assert_int_equal(fsF_check_clip_gradients(&e.f, &m, 1, 0, &e.iss), 0);
  assert_int_equal(fsF_check_no_backward_sync(&e.f, &m, &e.iss), -1);
  expect_issue(&e.iss, "R48", SPEC_R48_1);
  env_close(&e);
  env_open(&e, STR("auto"), NULL, 1, 0);
  assert_int_equal(fsF_check_tensor_backward(&e.f, &e.iss), 0);
  env_close(&e);
  (void)state;
}

static void test_save_filter_and_marks(void **state) {
  env e;
  env_open(&e, STR("auto"), NULL, 1, 0);
  fsF_model m = raw_model("GPT");
  fsF_entry st[] = {{"model", FSF_S_MODEL, &m, NULL}};
  fsF_filter notdict = {.kind = FSF_OTHER, .repr = "'foo'"};
  assert_int_equal(fsF_check_save(&e.f, st, 1, &notdict, &e.iss), -1);
  expect_issue(&e.iss, "R55", SPEC_R55_1);
  const char *keys[] = {"asd"}, *vr[] = {"<function f>"};
  int callable[] = {1};
  fsF_filter missing = {.kind = FSF_LIST, .keys = keys, .callable = callable, .vrepr = vr, .n = 1};
  assert_int_equal(fsF_check_save(&e.f, st, 1, &missing, &e.iss), -1);
  expect_issue(&e.iss, "R56", SPEC_R56_1);
  const char *mkeys[] = {"model"}, *mvr[] = {"'foo'"};
  int notcallable[] = {0};
  fsF_filter bad = {.kind = FSF_LIST, .keys = mkeys, .callable = notcallable, .vrepr = mvr, .n = 1};
  assert_int_equal(fsF_check_save(&e.f, st, 1, &bad, &e.iss), -1);
  expect_issue(&e.iss, "R57", SPEC_R57_1);
  fsF_filter good = {.kind = FSF_LIST, .keys = mkeys, .callable = callable, .vrepr = mvr, .n = 1};
  assert_int_equal(fsF_check_save(&e.f, st, 1, &good, &e.iss), 0);
  /* mark_forward_method */
  assert_int_equal(fsF_check_mark_forward_method(&m, FSF_STR, "generate", NULL, 0, &e.iss), -1);
  expect_issue(&e.iss, "R53", "'GPT' object has no attribute 'mark_forward_method'");
  fsF_setup_done(&e.f, &m);
  assert_int_equal(fsF_check_mark_forward_method(&m, FSF_OTHER, NULL, "function", 0, &e.iss), -1);
  expect_issue(&e.iss, "R51", SPEC_R51_1);
  assert_int_equal(fsF_check_mark_forward_method(&m, FSF_STR, "forward", NULL, 1, &e.iss), -1);
  expect_issue(&e.iss, "R52", SPEC_R52_1);
  assert_int_equal(fsF_check_mark_forward_method(&m, FSF_STR, "generate", NULL, 0, &e.iss), -1);
  expect_issue(&e.iss, "R53", SPEC_R53_1);
  env_close(&e);
  (void)state;
}

/* raisesA: R71-R77 */
/* raisesD: R78-R80, the Precision plugin objects among `plugins=` */
static void test_precision_plugin_flags(void **state) {
  (void)state;
  fsF_machine m = machine(0);
  expect_resolve_error(&(fsF_args){.plugin_count = {2}, .plugin_first = {1}, .precision_plugin = FSF_PL_MIXED}, NULL, &m, "R78",
                       SPEC_R78_1);
  /* the precision as Fabric unified it: "16" is 16-mixed (W9 first) */
  expect_resolve_error(&(fsF_args){.precision = STR("16"), .plugin_count = {1}, .plugin_first = {1}, .precision_plugin = FSF_PL_HALF},
                       NULL, &m, "R79", SPEC_R79_1);
  expect_resolve_error(&(fsF_args){.plugin_count = {1}, .plugin_first = {1}, .precision_plugin = FSF_PL_BNB}, NULL, &m, "R80",
                       SPEC_R80_1);
  /* on CUDA, and any other plugin on CPU, pass; a plugin skips the strategy's precision checks */
  fsF_config cfg;
  fsF_issues iss;
  fsF_machine gpu = machine(1);
  resolve_ok(&(fsF_args){.accelerator = STR("cuda"), .plugin_count = {1}, .plugin_first = {1}, .precision_plugin = FSF_PL_BNB},
             NULL, &gpu, &cfg, &iss);
  fsF_issues_free(&iss);
  resolve_ok(&(fsF_args){.precision = NONE, .plugin_count = {1}, .plugin_first = {1}, .precision_plugin = FSF_PL_HALF}, NULL, &m,
             &cfg, &iss);
  fsF_issues_free(&iss);
  /* R81-R83: the strategy object's precision plugin and devices */
  fsF_value ddp_prec = {.kind = FSF_STRATEGY, .strategy = {.cls = FSF_DDP, .precision = 1}};
  expect_resolve_error(&(fsF_args){.strategy = ddp_prec, .plugin_count = {1}, .plugin_first = {1}, .precision_plugin = FSF_PL_HALF},
                       NULL, &m, "R81", SPEC_R81_1);
  fsF_value ddp_cpus = {.kind = FSF_STRATEGY, .strategy = {.cls = FSF_DDP, .parallel_devices = FSF_PD_CPU}};
  expect_resolve_error(&(fsF_args){.strategy = ddp_cpus, .accelerator = STR("cuda")}, NULL, &gpu, "R82", SPEC_R82_1);
  fsF_value fsdp_gpus = {.kind = FSF_STRATEGY, .strategy = {.cls = FSF_FSDP, .parallel_devices = FSF_PD_CUDA}};
  expect_resolve_error(&(fsF_args){.strategy = fsdp_gpus, .accelerator = STR("cpu")}, NULL, &gpu, "R83", SPEC_R83_1);
  /* R84: Fabric's plugin handed to the FSDP strategy; FSDPPrecision passes */
  expect_resolve_error(&(fsF_args){.strategy = STR("fsdp"), .accelerator = STR("cuda"), .plugin_count = {1}, .plugin_first = {1},
                                   .precision_plugin = FSF_PL_MIXED}, NULL, &gpu, "R84", SPEC_R84_1);
  resolve_ok(&(fsF_args){.strategy = STR("fsdp"), .accelerator = STR("cuda"), .plugin_count = {1}, .plugin_first = {1},
                         .precision_plugin = FSF_PL_FSDP}, NULL, &gpu, &cfg, &iss);
  fsF_issues_free(&iss);
  /* R78 names the duplicated types in the order their first plugins came */
  expect_resolve_error(&(fsF_args){.plugin_count = {2, 2}, .plugin_first = {2, 1}}, NULL, &m, "R78", SPEC_R78_2);
  /* R85, R86: the strategy's own checkpoint_io / cluster_environment with one in plugins= */
  fsF_value ddp_io = {.kind = FSF_STRATEGY, .strategy = {.cls = FSF_DDP, .checkpoint_io = 1}};
  expect_resolve_error(&(fsF_args){.strategy = ddp_io, .plugin_count = {0, 1}, .plugin_first = {0, 1},
                                   .checkpoint_io = FSF_PL_TORCH_IO}, NULL, &m, "R85", SPEC_R85_1);
  fsF_value ddp_env = {.kind = FSF_STRATEGY, .strategy = {.cls = FSF_DDP, .cluster_environment = 1}};
  expect_resolve_error(&(fsF_args){.strategy = ddp_env, .plugin_count = {0, 0, 1}, .plugin_first = {0, 0, 1}},
                       NULL, &m, "R86", SPEC_R86_1);
  /* R87, R88: the XLA strategies' setters; XLACheckpointIO and XLAPrecision pass */
  fsF_machine tpu = m;
  tpu.xla = 1;
  tpu.tpus = 8;
  expect_resolve_error(&(fsF_args){.strategy = STR("xla"), .plugin_count = {0, 1}, .plugin_first = {0, 1},
                                   .checkpoint_io = FSF_PL_TORCH_IO}, NULL, &tpu, "R87", SPEC_R87_1);
  expect_resolve_error(&(fsF_args){.plugin_count = {1}, .plugin_first = {1}, .precision_plugin = FSF_PL_HALF},
                       NULL, &tpu, "R88", SPEC_R88_1);
  resolve_ok(&(fsF_args){.plugin_count = {1, 1}, .plugin_first = {1, 2}, .precision_plugin = FSF_PL_XLA,
                         .checkpoint_io = FSF_PL_XLA_IO}, NULL, &tpu, &cfg, &iss);
  fsF_issues_free(&iss);
  /* W6: sharded_model() on one device: the deprecation only */
  env e;
  env_open(&e, STR("auto"), "32-true", 1, 0);
  /* R89: suggested_max_num_workers' bound */
  assert_int_equal(fsF_check_max_num_workers(1, &e.iss), 0);
  assert_int_equal(fsF_check_max_num_workers(0, &e.iss), -1);
  expect_issue(&e.iss, "R89", SPEC_R89_1);
  assert_int_equal(fsF_check_sharded_model(&e.f, &e.iss), 0);
  expect_issue(&e.iss, "W6", SPEC_W6_1);
  env_close(&e);
  /* at "auto" the devices choose the accelerator: cpu on a machine with GPUs */
  resolve_ok(&(fsF_args){.strategy = ddp_cpus}, NULL, &gpu, &cfg, &iss);
  assert_int_equal(cfg.accel, FSF_CPU);
  assert_true(cfg.parallel_devices);
  fsF_issues_free(&iss);
}

static void test_flags_seed_optimizer_sampler(void **state) {
  fsF_machine m = machine(0);
  fsF_machine mps = m;
  mps.mps = 1;
  /* R71: a DDP-family name (lower-cased) with MPS chosen by auto; cpu avoids it */
  expect_resolve_error(&(fsF_args){.strategy = STR("DDP_Spawn")}, NULL, &mps, "R71", SPEC_R71_1);
  fsF_config cfg;
  fsF_issues iss;
  resolve_ok(&(fsF_args){.strategy = STR("ddp"), .accelerator = STR("cpu")}, NULL, &mps, &cfg, &iss);
  fsF_issues_free(&iss);
  /* R72: any plugin; none (FSF_UNSET) passes */
  expect_resolve_error(&(fsF_args){.plugin = INT(3)}, NULL, &m, "R72", SPEC_R72_1);
  /* R73: the strategy's accelerator with a flag; alone, it is the flag */
  fsF_value ddp_cpu = {.kind = FSF_STRATEGY, .strategy = {.cls = FSF_DDP, .accelerator = 1 + FSF_CPU}};
  expect_resolve_error(&(fsF_args){.strategy = ddp_cpu, .accelerator = STR("cpu")}, NULL, &m, "R73", SPEC_R73_1);
  fsF_machine gpu = machine(2);
  resolve_ok(&(fsF_args){.strategy = ddp_cpu}, NULL, &gpu, &cfg, &iss);
  assert_int_equal(cfg.accel, FSF_CPU);
  fsF_issues_free(&iss);
  /* R74: the TPU accelerator with DDP */
  fsF_machine tpu = m;
  tpu.xla = 1;
  tpu.tpus = 8;
  expect_resolve_error(&(fsF_args){.strategy = STR("ddp"), .accelerator = STR("tpu")}, NULL, &tpu, "R74", SPEC_R74_1);
  /* R75: numpy's bounds, inclusive */
  fsF_issues_init(&iss);
  assert_int_equal(fsF_check_seed(4294967295LL, &iss), 0);
  assert_int_equal(fsF_check_seed(0, &iss), 0);
  assert_int_equal(fsF_check_seed(-1, &iss), -1);
  expect_issue(&iss, "R75", SPEC_R75_1);
  fsF_issues_free(&iss);
  /* R76: a value that is no optimizer, unless a meta one comes first */
  env e;
  env_open(&e, STR("auto"), NULL, 0, 0);
  fsF_optim name = {.foreign = "str"}, meta = {.meta_params = 1};
  const fsF_optim *one[] = {&name}, *meta_first[] = {&meta, &name};
  assert_int_equal(fsF_check_setup_optimizers(&e.f, one, 1, &e.iss), -1);
  expect_issue(&e.iss, "R76", SPEC_R76_1);
  assert_int_equal(fsF_check_setup_optimizers(&e.f, meta_first, 2, &e.iss), -1);
  assert_string_equal(e.iss.items[0].rule, "R37");
  fsF_issues_clear(&e.iss);
  /* R77: only where the strategy injects a distributed sampler */
  fsF_loader list_batches = {.is_dataloader = 1, .foreign_batch_sampler = 1};
  assert_int_equal(fsF_check_distributed_sampler(&e.f, &list_batches, &e.iss), 0);
  env_close(&e);
  env_open(&e, STR("ddp"), NULL, 2, 1);
  assert_int_equal(fsF_check_distributed_sampler(&e.f, &list_batches, &e.iss), -1);
  expect_issue(&e.iss, "R77", SPEC_R77_1);
  env_close(&e);
  /* R129: a joint setup outside FSDP and DeepSpeed wraps each optimizer; a
   * script's object passes there, as in Python */
  env_open(&e, STR("ddp"), NULL, 2, 1);
  fsF_model plain = raw_model("Sequential");
  fsF_optim number = {.foreign = "int"}, nothing = {.foreign = "NoneType"}, object = {.foreign = "Thing"};
  const fsF_optim *num[] = {&number}, *none_second[] = {&object, &nothing}, *obj[] = {&object};
  assert_int_equal(fsF_check_setup(&e.f, &plain, num, 1, &e.iss), -1);
  expect_issue(&e.iss, "R129", SPEC_R129_1);
  assert_int_equal(fsF_check_setup(&e.f, &plain, none_second, 2, &e.iss), -1);
  assert_int_equal(e.iss.items[0].arg_index, 1);
  expect_issue(&e.iss, "R129", SPEC_R129_2);
  assert_int_equal(fsF_check_setup(&e.f, &plain, obj, 1, &e.iss), 0);
  /* W4: parameters on different devices, warned before the move */
  fsF_model placed = raw_model("Net");
  placed.devices_apart = 1;
  placed.apart_name = "head.weight";
  placed.apart_device = "cuda:0";
  placed.first_name = "body.weight";
  placed.first_device = "cpu";
  assert_int_equal(fsF_check_setup_module(&e.f, &placed, &e.iss), 0);
  expect_issue(&e.iss, "W4", SPEC_W4_1);
  env_close(&e);
  env_open(&e, STR("fsdp"), NULL, 2, 1); /* FSDP asks about meta parameters first */
  assert_int_equal(fsF_check_setup(&e.f, &plain, num, 1, &e.iss), -1);
  assert_string_equal(e.iss.items[0].rule, "R76");
  env_close(&e);
  (void)state;
}

/* ---- strategies/ ------------------------------------------------------ */

static void test_strategy_objects(void **state) {
  fsF_issues iss;
  fsF_issues_init(&iss);
  fsF_fsdp_ctor both = {.activation_checkpointing = 1, .activation_checkpointing_policy = 1};
  assert_int_equal(fsF_check_fsdp_ctor(&both, &iss), -1);
  expect_issue(&iss, "R91", SPEC_R91_1);
  fsF_fsdp_ctor old = {.activation_checkpointing = 1, .ac_str = "[<class '__main__.Block'>]",
                       .ac_set_str = "{<class '__main__.Block'>}"};
  assert_int_equal(fsF_check_fsdp_ctor(&old, &iss), 0);
  expect_issue(&iss, "W20", SPEC_W20_1);
  fsF_fsdp_ctor pg = {.process_group = 1, .device_mesh = 1, .sharding_strategy = "HYBRID_SHARD"};
  assert_int_equal(fsF_check_fsdp_ctor(&pg, &iss), -1);
  expect_issue(&iss, "R92", SPEC_R92_1);
  fsF_fsdp_ctor hybrid = {.sharding_strategy = "_hybrid_shard_zero2"};
  assert_int_equal(fsF_check_fsdp_ctor(&hybrid, &iss), -1);
  expect_issue(&iss, "R93", SPEC_R93_1);
  hybrid.auto_wrap_policy = 1;
  assert_int_equal(fsF_check_fsdp_ctor(&hybrid, &iss), 0);
  fsF_fsdp_ctor full = {.sharding_strategy = "FULL_SHARD"};
  assert_int_equal(fsF_check_fsdp_ctor(&full, &iss), 0);
  assert_int_equal(iss.n, 0);
  assert_int_equal(fsF_check_deepspeed_config("ds.json", 0, &iss), -1);
  expect_issue(&iss, "R95", SPEC_R95_1);
  assert_int_equal(fsF_check_deepspeed_config("ds.json", 1, &iss), 0);
  assert_int_equal(fsF_check_parallelized("NoneType", &iss), -1);
  expect_issue(&iss, "R102", SPEC_R102_1);
  /* R101: a DDPStrategy(start_method="fork") object where nothing forks */
  fsF_machine m = machine(0);
  m.has_fork = 0;
  fsF_value ddp = {.kind = FSF_STRATEGY, .strategy = {.cls = FSF_DDP, .start_method = FSF_START_FORK}};
  expect_resolve_error(&(fsF_args){.strategy = ddp, .accelerator = STR("cpu"), .devices = INT(2)}, NULL, &m,
                       "R101", SPEC_R101_1);
  fsF_issues_free(&iss);
  (void)state;
}

/* R107-R109 and R87 (a checkpoint_io assigned to an XLA strategy): the strategies' attributes */
static void test_strategy_attributes(void **state) {
  fsF_issues iss;
  fsF_issues_init(&iss);
  /* R107, R108: the strategies' attributes */
  assert_int_equal(fsF_check_checkpoint_io(FSF_FSDP, &iss), -1);
  expect_issue(&iss, "R107", SPEC_R107_1);
  assert_int_equal(fsF_check_checkpoint_io(FSF_MP, &iss), -1);
  expect_issue(&iss, "R107", SPEC_R107_2);
  assert_int_equal(fsF_check_checkpoint_io(FSF_DDP, &iss), -1);
  assert_string_equal(fsF_error(&iss)->rule, "unsupported");
  fsF_issues_clear(&iss);
  assert_int_equal(fsF_check_device_mesh(FSF_MP, 0, &iss), -1);
  expect_issue(&iss, "R108", SPEC_R108_1);
  assert_int_equal(fsF_check_device_mesh(FSF_MP, 1, &iss), 0);
  assert_int_equal(fsF_check_device_mesh(FSF_MP, -1, &iss), 0);
  assert_int_equal(fsF_check_device_mesh(FSF_FSDP, 0, &iss), -1);
  assert_string_equal(fsF_error(&iss)->message, "'FSDPStrategy' object has no attribute 'device_mesh'");
  fsF_issues_clear(&iss);
  assert_int_equal(fsF_check_set_strategy_attr(FSF_FSDP, "checkpoint_io", 1, "None", &iss), -1);
  expect_issue(&iss, "R109", SPEC_R109_1);
  assert_int_equal(fsF_check_set_strategy_attr(FSF_DDP, "checkpoint_io", 0, "io", &iss), -1);
  assert_string_equal(fsF_error(&iss)->rule, "unsupported");
  fsF_issues_clear(&iss);
  assert_int_equal(fsF_check_set_strategy_attr(FSF_SINGLE_XLA, "checkpoint_io", 0, "io.ckpt", &iss), -1);
  expect_issue(&iss, "R87", SPEC_R87_2);
  assert_int_equal(fsF_check_set_strategy_attr(FSF_XLA, "checkpoint_io", 0, NULL, &iss), 0);
  assert_int_equal(iss.n, 0);
  fsF_issues_free(&iss);
  (void)state;
}

/* W21: a group of sites of one parameter judged once, its units in the order first met */
static void test_shared_params(void **state) {
  fsF_issues iss;
  fsF_issues_init(&iss);
  int wte, fc, other;
  fsF_param_site tied[] = {{&wte, "emb.wte.weight", "emb"}, {&other, "emb.wte.bias", "emb"},
                           {&wte, "head.weight", ""}};
  fsF_warn_shared_params(tied, 3, &iss);
  expect_issue(&iss, "W21", SPEC_W21_1);
  fsF_param_site one_unit[] = {{&fc, "b.a.weight", "b"}, {&fc, "b.c.weight", "b"}, {&other, "x", ""}};
  fsF_warn_shared_params(one_unit, 3, &iss);
  assert_int_equal(iss.n, 0);
  fsF_issues_free(&iss);
  (void)state;
}

static void test_strategy_checkpoints_and_launch(void **state) {
  env e;
  /* R90 after the model checks, at save only */
  env_open(&e, (fsF_value){.kind = FSF_STRATEGY, .strategy = {.cls = FSF_FSDP, .state_dict_unknown = "foo"}},
           NULL, 1, 1);
  assert_false(e.cfg.state_dict_sharded);
  fsF_model fm = raw_model("Linear");
  fsF_setup_done(&e.f, &fm);
  fsF_entry st[] = {{"model", FSF_S_MODEL, &fm, NULL}};
  assert_int_equal(fsF_check_save(&e.f, st, 1, NULL, &e.iss), -1);
  expect_issue(&e.iss, "R90", SPEC_R90_1);
  assert_int_equal(fsF_check_load(&e.f, st, 1, 0, &e.iss), 0);
  env_close(&e);
  /* R94: DeepSpeed on GPUs 1 and 2 */
  fsF_machine m = machine(3);
  m.deepspeed = 1;
  fsF_config cfg;
  fsF_issues iss;
  int64_t ids[] = {1, 2};
  resolve_ok(&(fsF_args){.strategy = STR("deepspeed"), .accelerator = STR("cuda"),
                         .devices = {.kind = FSF_INTLIST, .ints = ids, .nints = 2}}, NULL, &m, &cfg, &iss);
  fsF_fabric f;
  fsF_fabric_init(&f, &cfg);
  assert_int_equal(fsF_check_launch(&f, FSF_FN_NONE, NULL, NULL, 1, &iss), -1);
  expect_issue(&iss, "R94", SPEC_R94_1);
  fsF_issues_free(&iss);
  /* ModelParallelStrategy: the mesh at launch, checkpoints, raw optimizer */
  env_open(&e, (fsF_value){.kind = FSF_STRATEGY, .strategy = {.cls = FSF_MP, .dp_size = 2, .tp_size = 4,
                                                              .dp_given = 1, .tp_given = 1}},
           NULL, 4, 0);
  e.cfg.devices = 4; /* env_open asks for no device count: the 4 GPUs */
  e.cfg.world_size = 4;
  assert_int_equal(fsF_check_launch(&e.f, FSF_FN_NONE, NULL, NULL, 1, &e.iss), -1);
  expect_issue(&e.iss, "R98", SPEC_R98_1);
  fsF_model a = raw_model("Linear"), b = raw_model("Linear");
  fsF_setup_done(&e.f, &a);
  fsF_setup_done(&e.f, &b);
  fsF_entry one[] = {{"model", FSF_S_MODEL, &a, NULL}};
  fsF_filter none = {.kind = FSF_UNSET};
  e.cfg.save_distributed = 0;
  assert_int_equal(fsF_check_save(&e.f, one, 1, &none, &e.iss), -1);
  expect_issue(&e.iss, "R96", SPEC_R96_1);
  assert_int_equal(fsF_check_load(&e.f, one, 1, 0, &e.iss), -1);
  expect_issue(&e.iss, "R96", SPEC_R96_2);
  a.dtensor_params = b.dtensor_params = 1;
  fsF_entry two[] = {{"a", FSF_S_MODEL, &a, NULL}, {"b", FSF_S_MODEL, &b, NULL}};
  assert_int_equal(fsF_check_save(&e.f, two, 2, &none, &e.iss), -1);
  expect_issue(&e.iss, "R104", SPEC_R104_1);
  assert_int_equal(fsF_check_load(&e.f, two, 2, 0, &e.iss), -1);
  expect_issue(&e.iss, "R104", SPEC_R104_2);
  assert_int_equal(fsF_check_load(&e.f, one, 1, 0, &e.iss), 0);
  assert_int_equal(fsF_check_load_raw(&e.f, 1, &e.iss), -1);
  expect_issue(&e.iss, "R97", SPEC_R97_1);
  env_close(&e);
  (void)state;
}

static void test_xla_all_reduce(void **state) {
  fsF_machine m = machine(0);
  m.xla = 1;
  m.tpus = 8;
  fsF_config cfg;
  fsF_issues iss;
  resolve_ok(&(fsF_args){.strategy = STR("xla"), .accelerator = STR("tpu")}, NULL, &m, &cfg, &iss);
  fsF_fabric f;
  fsF_fabric_init(&f, &cfg);
  f.launched = 1;
  assert_int_equal(fsF_check_all_reduce(&f, "MAX", &iss), -1);
  expect_issue(&iss, "R100", "Currently, the XLAStrategy only supports `sum`, `mean`, `avg` for the reduce operation, got: MAX");
  assert_int_equal(fsF_check_all_reduce(&f, "max", &iss), -1);
  expect_issue(&iss, "R100", SPEC_R100_1);
  assert_int_equal(fsF_check_all_reduce(&f, "Avg", &iss), 0);
  assert_int_equal(fsF_check_all_reduce(&f, NULL, &iss), 0);
  assert_int_equal(iss.n, 0);
  fsF_issues_free(&iss);
  (void)state;
}

/* ---- precision plugins and XLAFSDPStrategy (plugins.c; Lightning's
 * plugins/precision/ and strategies/xla_fsdp.py, placeholders filled) ---- */

#define SPEC_R110_1 "Currently, the XLAFSDPStrategy only supports `sum`, `mean`, `avg` for the reduce operation, got: max"
#define SPEC_R111_1 "Could not find a XLAFSDP model in the provided checkpoint state. Please provide the model as part of the state like so: `save_checkpoint(..., state={'model': model, ...})`. Make sure you set up the model (and optimizers if any) through the strategy before saving the checkpoint."
#define SPEC_R112_1 "Found multiple XLAFSDP modules in the given state. Loading checkpoints with FSDP is currently limited to a single model per checkpoint. To load multiple models, call the load method for each model separately with a different path."
#define SPEC_R113_1 "Got `XLAFSDPStrategy.load_checkpoint(..., state=None)` but a state with at least  a model instance to reload is required. Pass it in like so: `FSDPStrategy.load_checkpoint(..., state={'model': model, ...})`"
#define SPEC_R114_1 "Loading a single module or optimizer object from a checkpoint is not supported yet with the XLAFSDP strategy."
#define SPEC_R115_1 "Passed `MixedPrecision(precision='32-true')`. Precision must be '16-mixed' or 'bf16-mixed'."
#define SPEC_R116_1 "`precision='bf16-mixed'` does not use a scaler, found True."
#define SPEC_R117_1 "`precision='bf16-mixed')` is not supported in XLA. `precision` must be one of: ('32-true', '16-true', 'bf16-true')."
#define SPEC_R118_1 "'int8' only works with `dtype=torch.float16`, but you chose `torch.bfloat16`"
#define SPEC_R119_1 "You are using the bitsandbytes precision plugin, but your model has no Linear layers. This plugin won't work for your model."
#define SPEC_R120_1 "Instantiating your model under the `init_module` context manager is not supported when used with `BitsandbytesPrecision(..., ignore_modules={'head'})` as this may initialize the layers on-device, defeating the purpose of quantization. You can remove `ignore_modules` or remove the `init_module` context manager."
#define SPEC_R126_1 "Gradient clipping is not implemented for optimizers handling the unscaling."
#define SPEC_R127_1 "The XLA FSDP strategy can only work with the `XLAPrecision` plugin, found <lightning.fabric.plugins.precision.half.HalfPrecision object at 0x7f0000000000>"
#define SPEC_W25_1 "Loading a full checkpoint will only load the full model. The optimizer and any additional metadata are not included."
#define SPEC_W26_1 "Support for FP8 in the linear layers with this plugin is currently limited to tensors with shapes where the dimensions are divisible by 8 and 16 respectively. The layer 'head' does not fit this criteria. You might want to add padding to your inputs."
#define SPEC_BNB_1 "Requirement 'bitsandbytes' not met. HINT: Try running `pip install -U 'bitsandbytes'`"

static void test_plugins_and_xla_fsdp(void **state) {
  fsF_issues iss;
  fsF_issues_init(&iss);
  fsF_machine m = machine(1);
  fsF_plugin_args p = {.kind = FSF_PL_MIXED, .precision = "'32-true'", .precision_str = "32-true"};
  assert_int_equal(fsF_check_plugin_new(&p, &m, &iss), -1);
  expect_issue(&iss, "R115", SPEC_R115_1);
  p = (fsF_plugin_args){.kind = FSF_PL_MIXED, .precision = "'bf16-mixed'", .precision_str = "bf16-mixed", .scaler = "True"};
  assert_int_equal(fsF_check_plugin_new(&p, &m, &iss), -1);
  expect_issue(&iss, "R116", SPEC_R116_1);
  p = (fsF_plugin_args){.kind = FSF_PL_XLA, .precision = "'bf16-mixed'", .precision_str = "bf16-mixed"};
  assert_int_equal(fsF_check_plugin_new(&p, &m, &iss), -1);
  expect_issue(&iss, "R14", SPEC_R14_1); /* torch_xla first */
  m.xla = 1;
  assert_int_equal(fsF_check_plugin_new(&p, &m, &iss), -1);
  expect_issue(&iss, "R117", SPEC_R117_1);
  p = (fsF_plugin_args){.kind = FSF_PL_BNB, .mode = "int8", .dtype = "torch.bfloat16"};
  assert_int_equal(fsF_check_plugin_new(&p, &m, &iss), -1);
  expect_issue(&iss, "env", SPEC_BNB_1);
  m.bitsandbytes = 1;
  assert_int_equal(fsF_check_plugin_new(&p, &m, &iss), -1);
  expect_issue(&iss, "R118", SPEC_R118_1);
  p.mode = "nf4";
  assert_int_equal(fsF_check_plugin_new(&p, &m, &iss), 0);
  char *half = fsF_plugin_str(FSF_PL_HALF);
  assert_int_equal(fsF_check_xla_fsdp_new(&m, half, &iss), -1);
  expect_issue(&iss, "R127", SPEC_R127_1);
  free(half);
  fsF_te_layer("head", 48, 10, &iss);
  expect_issue(&iss, "W26", SPEC_W26_1);
  fsF_te_layer("body", 32, 48, &iss);
  assert_int_equal(iss.n, 0);
  fsF_issues_free(&iss);

  /* under XLAFSDPStrategy: launched, one model set up */
  env e;
  fsF_machine xm = machine(0);
  xm.xla = 1;
  xm.tpus = 8;
  fsF_args a = {.strategy = STR("xla_fsdp"), .accelerator = STR("tpu")};
  fsF_issues_init(&e.iss);
  assert_int_equal(fsF_resolve(&a, NULL, &xm, &e.cfg, &e.iss), 0);
  fsF_issues_clear(&e.iss);
  fsF_fabric_init(&e.f, &e.cfg);
  e.f.launched = 1;
  assert_int_equal(fsF_check_all_reduce(&e.f, "max", &e.iss), -1);
  expect_issue(&e.iss, "R110", SPEC_R110_1);
  assert_int_equal(fsF_check_all_reduce(&e.f, "Mean", &e.iss), 0);
  fsF_model wrapped = raw_model("Linear"), raw = raw_model("Linear");
  wrapped.wrapped = 1;
  fsF_optim o = {.wrapped = 1};
  fsF_entry opt_only = {"optimizer", FSF_S_OPTIM, NULL, &o};
  assert_int_equal(fsF_check_save(&e.f, &opt_only, 1, NULL, &e.iss), -1);
  expect_issue(&e.iss, "R111", SPEC_R111_1);
  fsF_entry two[] = {{"a", FSF_S_MODEL, &wrapped, NULL}, {"b", FSF_S_MODEL, &wrapped, NULL}};
  assert_int_equal(fsF_check_load(&e.f, two, 2, 0, &e.iss), -1);
  expect_issue(&e.iss, "R112", SPEC_R112_1);
  assert_int_equal(fsF_check_load(&e.f, NULL, 0, 1, &e.iss), -1);
  expect_issue(&e.iss, "R113", SPEC_R113_1);
  assert_int_equal(fsF_check_load_raw(&e.f, 0, &e.iss), -1);
  expect_issue(&e.iss, "R114", SPEC_R114_1);
  e.cfg.xla_fsdp.state_dict = FSF_XSD_FULL;
  fsF_entry model_key = {"model", FSF_S_MODEL, &raw, NULL};
  assert_int_equal(fsF_check_load(&e.f, &model_key, 1, 0, &e.iss), 0);
  expect_issue(&e.iss, "W25", SPEC_W25_1);
  env_close(&e);

  /* 16-mixed on cuda holds a scaler: a fused optimizer cannot be clipped */
  env_open(&e, STR("auto"), "16-mixed", 1, 1);
  fsF_optim fused = {.wrapped = 1, .handles_unscaling = 1};
  assert_int_equal(fsF_check_clip_unscaling(&e.f, &fused, &e.iss), -1);
  expect_issue(&e.iss, "R126", SPEC_R126_1);
  /* bitsandbytes through plugins=: no Linear layers, init_module with ignore_modules */
  e.cfg.plugin = FSF_PL_BNB;
  fsF_model conv = raw_model("Conv2d");
  assert_int_equal(fsF_check_setup_module(&e.f, &conv, &e.iss), -1);
  expect_issue(&e.iss, "R119", SPEC_R119_1);
  e.cfg.bnb_ignore_modules = "{'head'}";
  assert_int_equal(fsF_check_init_module(&e.f, -1, &e.iss), -1);
  expect_issue(&e.iss, "R120", SPEC_R120_1);
  env_close(&e);
  (void)state;
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_r1_r2_r3),
    cmocka_unit_test(test_r4_r5_r6_r7_r8),
    cmocka_unit_test(test_r9),
    cmocka_unit_test(test_r10_r11_r12_r13_r14_r15),
    cmocka_unit_test(test_r68_cli),
    cmocka_unit_test(test_resolution_and_traits),
    cmocka_unit_test(test_reprs),
    cmocka_unit_test(test_arg_parsing),
    cmocka_unit_test(test_launch_rules),
    cmocka_unit_test(test_double_setup),
    cmocka_unit_test(test_deepspeed_rules),
    cmocka_unit_test(test_meta_rules),
    cmocka_unit_test(test_fsdp_rules),
    cmocka_unit_test(test_backward_and_clip),
    cmocka_unit_test(test_save_filter_and_marks),
    cmocka_unit_test(test_flags_seed_optimizer_sampler),
    cmocka_unit_test(test_precision_plugin_flags),
    cmocka_unit_test(test_strategy_objects),
    cmocka_unit_test(test_shared_params),
    cmocka_unit_test(test_strategy_attributes),
    cmocka_unit_test(test_strategy_checkpoints_and_launch),
    cmocka_unit_test(test_xla_all_reduce),
    cmocka_unit_test(test_plugins_and_xla_fsdp),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
