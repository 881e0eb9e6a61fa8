/* explain.c -- `fabricscript explain ID`: each rule id a diagnostic can
 * carry, in words, with why Fabric (or the language) has it, and for the
 * Fabric rules a before/after pair: the rule's trigger script and its
 * near-miss from tests/scripts/rules/, compiled in from
 * explain_examples.h (scripts/gen-explain). Invariant: every id the
 * checker, the runtime or fabric/ reports has a row here
 * (tests/cli-test.sh asks for each id the sources report, and for the
 * before/after of each id of docs/rules.md's table). */
#include "explain.h"

#include <stdio.h>
#include <string.h>

#include "diag.h"

typedef struct explain_example {
  const char *rule, *before_name, *before, *after_name, *after;
} explain_example;

#include "explain_examples.h"

typedef struct explain_row {
  const char *id;
  const char *words; /* the rule, one sentence */
  const char *why;   /* why it exists */
} explain_row;

static const explain_row rows[] = {
  {"R1", "`strategy=` must name a registered strategy (case-insensitive) or be a Strategy object.",
   "Fabric looks the name up in its STRATEGY_REGISTRY; an unknown name has no class to instantiate."},
  {"R2", "`accelerator=` must be one of auto, cpu, cuda, gpu, mps, tpu, in that exact case.",
   "The accelerator registry is keyed by these names and is not case-folded."},
  {"R3", "`precision=` must be one of Fabric's precision names or the legacy numbers 16, 32, 64.",
   "Each precision selects a plugin (autocast, true half, Transformer Engine); any other value has none."},
  {"R4", "`num_nodes=` must convert to a positive integer.",
   "The world size is num_nodes x devices; Fabric calls int() on it and refuses values below 1."},
  {"R5", "`devices=0` (or an empty list) is not a valid device selection.",
   "Zero devices leaves no process to run on; use `accelerator=\"cpu\"` with devices=1 instead."},
  {"R6", "`accelerator=\"gpu\"` needs CUDA or MPS on the machine.",
   "\"gpu\" is resolved to whichever GPU backend exists; with none there is nothing to resolve to."},
  {"R7", "The accelerator asked for is not available on the machine checked for.",
   "Fabric instantiates the accelerator and asks it whether it can run; CUDA without a GPU cannot. "
   "`check` checks for the machine the script declares unless given --here."},
  {"R8", "On CPU, `devices=` must be a positive number of processes.",
   "The CPU accelerator runs one process per device; only an int > 0 (or its digit string) says how many."},
  {"R9", "`devices=` must name GPUs that exist, each once.",
   "Fabric parses devices into CUDA ids and checks them against the visible devices; a duplicate or "
   "missing id would put two ranks on one GPU or none."},
  {"R10", "The FSDP strategy runs on CUDA GPUs only.",
   "FSDP shards parameters across GPUs with NCCL collectives; Fabric refuses it on other accelerators."},
  {"R11", "FSDP and DeepSpeed accept only the 32/16/bf16 true and mixed precisions.",
   "Their sharded precision plugins implement those; 64-bit and Transformer Engine are not among them."},
  {"R12", "ModelParallelStrategy accepts 32-true, bf16-mixed, bf16-true and 16-true.",
   "Its precision plugin supports only these."},
  {"R13", "The DeepSpeed strategy needs the deepspeed package.",
   "Fabric imports deepspeed when the strategy is created. `check` assumes it where the script declares it."},
  {"R14", "XLA strategies and the TPU accelerator need torch_xla.",
   "They run through torch_xla; without it Fabric raises before anything starts."},
  {"R15", "Fork-based strategies need a platform that can fork.",
   "ddp_fork and ddp_notebook start ranks with fork(), which some platforms lack; ddp_spawn works everywhere."},
  {"R16", "With more than one device, call `fabric.launch()` before setting up, initialising or communicating.",
   "The other processes do not exist until launch() starts them; a setup before it would run on one rank."},
  {"R17", "Spawn, fork and XLA launchers need `fabric.launch(function)`.",
   "These launchers start new processes that run the function, not the rest of the script."},
  {"R18", "What `fabric.launch()` gets must be callable.",
   "Each process calls it with the Fabric object as its first argument."},
  {"R19", "The function given to `fabric.launch()` must take the Fabric object as its first parameter.",
   "Fabric calls fn(fabric, *args); a function without a parameter fails in every process."},
  {"R20", "Under `fabric run` (LT_CLI_USED=1), do not call `fabric.launch()`.",
   "The CLI has already created the processes; launching again would nest them."},
  {"R21", "The DeepSpeed strategy runs on CUDA GPUs only.",
   "DeepSpeed's engine needs CUDA."},
  {"R22", "A model is set up once: `setup` refuses an already set-up model.",
   "Setting it up again would wrap the wrapper (DDP in DDP, FSDP in FSDP)."},
  {"R23", "An optimizer is set up once.",
   "Wrapping a _FabricOptimizer again would step the wrapped optimizer twice through two strategies."},
  {"R24", "`setup_module` refuses an already set-up model.", "As R22: the model would be wrapped twice."},
  {"R25", "DeepSpeed (and XLA) set up the model and its optimizers together: `setup(model, optimizer)`.",
   "The DeepSpeed engine is built from the model and the optimizer at once; `setup_optimizers` alone cannot build it."},
  {"R26", "`setup_optimizers` needs at least one optimizer.", "There is nothing to set up otherwise."},
  {"R27", "`setup_optimizers` refuses an already set-up optimizer.", "As R23."},
  {"R28", "`setup_dataloaders` needs at least one data loader.", "There is nothing to set up otherwise."},
  {"R29", "A data loader is set up once.", "Its sampler would be replaced by a distributed one twice."},
  {"R30", "`setup_dataloaders` takes DataLoader objects only.",
   "Fabric replaces the loader's sampler with a DistributedSampler; only a DataLoader has one."},
  {"R31", "DeepSpeed takes exactly one optimizer per setup.", "The DeepSpeed engine drives a single optimizer."},
  {"R32", "`FSDPStrategy(use_orig_params=False)` cannot set up model and optimizer jointly.",
   "Without the original parameters, an optimizer made before setup cannot be re-pointed at FSDP's flat parameters."},
  {"R33", "Under FSDP, the optimizer must be created from the set-up model's parameters.",
   "FSDP replaces the parameters when it wraps the model; an optimizer over the old ones would update nothing."},
  {"R34", "XLAFSDPStrategy cannot set up model and optimizer jointly.",
   "As R33, for XLA's FSDP: set up the model, then create and set up the optimizer."},
  {"R35", "Under XLAFSDPStrategy, the optimizer must be created from the set-up model's parameters.", "As R33."},
  {"R36", "An optimizer over meta-device parameters cannot be set up jointly with its model.",
   "`init_module(empty_init=True)` under FSDP puts parameters on the meta device; setup materializes "
   "new parameters, so an optimizer created before it points at parameters that no longer exist."},
  {"R37", "`setup_optimizers` refuses an optimizer over meta-device parameters.",
   "As R36: the optimizer must be created after the model is set up and materialized."},
  {"R38", "DeepSpeed ZeRO stage 3 needs `init_module(empty_init=True)` (or the default).",
   "Stage 3 partitions parameters as they are created; empty_init=False would create them whole on every rank."},
  {"R39", "Under DeepSpeed, `fabric.backward` needs a set-up model.",
   "DeepSpeed's engine performs the backward pass; without setup there is no engine."},
  {"R40", "Under DeepSpeed with several models, `fabric.backward(loss, model=...)` must name the model.",
   "Each model has its own engine; Fabric needs to know whose backward to run."},
  {"R41", "`fabric.backward(loss, model=m)` needs m to be a set-up model.", "Only a set-up model has an engine to run it."},
  {"R42", "With this strategy and precision, call `fabric.backward(loss)`, not `loss.backward()`.",
   "FSDP, DeepSpeed and mixed precision scale or shard gradients in the backward; `loss.backward()` bypasses that."},
  {"R43", "`clip_gradients` takes `clip_val` or `max_norm`, not both.", "They are two different clipping methods."},
  {"R44", "`clip_gradients` needs `clip_val` or `max_norm`.", "Without either there is nothing to clip to."},
  {"R45", "Under DeepSpeed, clip with the strategy's config, not `fabric.clip_gradients`.",
   "DeepSpeed clips inside its engine."},
  {"R46", "XLAFSDPStrategy clips by norm only.", "Its sharded gradients support norm clipping, not value clipping."},
  {"R47", "Under FSDP, clip the set-up model's gradients.",
   "FSDP's clip_grad_norm_ lives on the wrapped module; the raw one has no sharded gradients."},
  {"R48", "`no_backward_sync` needs a set-up model.", "Only the wrapped model has a gradient synchronization to skip."},
  {"R50", "Under a strategy that wraps the model (DP, DDP, FSDP, DeepSpeed, XLAFSDP), a method of the set-up model other than forward must not call the model's modules unless it is marked with `mark_forward_method`.",
   "Such a call bypasses the wrapper's forward (DDP's gradient synchronization, FSDP's gathering of the shards); Fabric hooks every module while the method runs and raises if one was called."},
  {"R51", "`mark_forward_method` takes a method or its name.", "Fabric marks methods by name on the wrapped module."},
  {"R52", "`forward` cannot be marked as a forward method.", "It always is one: the wrapper routes it through the strategy."},
  {"R53", "`mark_forward_method` needs a set-up model and one of its methods.",
   "Only the _FabricModule has the method, and only an existing method can be routed through it."},
  {"R55", "`fabric.save(filter=...)` takes a dict.", "The filter maps state keys to functions."},
  {"R56", "Every filter key must be a key of the state being saved.", "A filter for a missing key filters nothing: a typo."},
  {"R57", "Each filter value must be a callable `(key, value) -> bool`.", "Fabric calls it for every entry."},
  {"R58", "DeepSpeed checkpoints cannot be filtered.", "DeepSpeed serializes its state itself."},
  {"R59", "Sharded FSDP checkpoints cannot be filtered.", "FSDP cannot load a filtered sharded checkpoint back."},
  {"R60", "Distributed ModelParallelStrategy checkpoints cannot be filtered.",
   "A filtered distributed checkpoint could not be loaded back."},
  {"R61", "A sharded FSDP save or load needs the FSDP model in the state.",
   "The sharded state is written per rank through the FSDP model."},
  {"R62", "A DeepSpeed save needs the DeepSpeed engine (the set-up model) in the state.",
   "DeepSpeed writes its checkpoint through the engine."},
  {"R63", "Loading a sharded or DeepSpeed checkpoint needs a state with the model to restore into.",
   "These checkpoints are loaded in place into the objects; there is nothing to return."},
  {"R64", "FSDP cannot load a single raw optimizer from a checkpoint.",
   "Its optimizer state is sharded with the model; load them together."},
  {"R65", "One FSDP model per sharded checkpoint.", "The checkpoint layout holds a single sharded model."},
  {"R66", "Under XLA, the device is known only inside the launched function.",
   "XLA processes are spawned; the parent has no device."},
  {"R67", "XLAStrategy with PjRT needs all devices (or SingleDeviceXLAStrategy).", "PjRT runs one process per device."},
  {"R68", "A `fabric run` option conflicts with a different value in `Fabric(...)`.",
   "Fabric refuses to guess which of the two the user meant."},
  {"R69", "In an interactive session a strategy whose launcher starts the script again cannot run.",
   "A subprocess launcher would re-run the script, and spawn pickles what a REPL cannot; only forking the session works."},
  {"R70", "This runtime cannot run the precision (64-true other than on one device or under DDP; 16-mixed under DeepSpeed or off CUDA; Transformer Engine).",
   "Its float64 ops run on the CPU and CUDA, one device or DDP (gradients all-reduced in double), but have no DataParallel, sharded or model-parallel path; it scales 16-mixed's gradients as torch does (FSDP's sharded scaler too), not as DeepSpeed's engine; `check` says so where a run would refuse."},
  /* raisesA: connector.py's flag checks and seed_everything's bounds */
  {"R71", "On a machine with MPS, a DDP-family strategy cannot use the MPS accelerator (also when it is chosen by auto or gpu).",
   "The MPS backend runs one process on one device; Fabric refuses the DDP family there before anything starts."},
  {"R72", "`plugins=` takes Precision, CheckpointIO or ClusterEnvironment objects only.",
   "Fabric sorts each plugin by its type; a value that is not a plugin object is refused (a string is iterated: its first character is the plugin)."},
  {"R73", "An accelerator given to a strategy object excludes `Fabric(accelerator=...)`.",
   "Fabric takes the strategy's accelerator as the flag and refuses to pick one of two."},
  {"R74", "The TPU (XLA) accelerator runs only XLA strategies: xla, xla_fsdp, single XLA device.",
   "XLA devices are driven by torch_xla's own process launcher and collectives, which the other strategies do not use."},
  {"R75", "`seed_everything` takes a seed from 0 to 4294967295.",
   "The seed is passed to numpy, which accepts unsigned 32-bit seeds only."},
  {"R76", "What `setup_optimizers` (or FSDP's joint `setup`) receives as optimizers must be optimizers.",
   "Fabric asks each one whether it references meta-device parameters, which only a Module or an Optimizer can answer."},
  {"R77", "Under a distributed strategy, a loader's batch sampler must be a BatchSampler (or have batch_size and drop_last, and take the sampler first) unless `use_distributed_sampler=False`.",
   "Fabric rebuilds the loader with a DistributedSampler inside the batch sampler, calling a batch sampler of another class as `Cls(sampler, batch_size=..., drop_last=...)`; other batch samplers have no sampler to replace, and an `__init__` that takes `batch_size` first gets it twice."},
  /* raisesD: connector.py's plugin checks */
  {"R78", "`plugins=` takes at most one plugin of each type: Precision, CheckpointIO, ClusterEnvironment.",
   "Fabric keeps one plugin per type; of two it would silently drop one."},
  {"R79", "A precision given by name excludes a Precision plugin in `plugins=`.",
   "The plugin is the precision; Fabric refuses to pick one of two."},
  {"R80", "BitsandbytesPrecision runs on the CUDA accelerator only.",
   "bitsandbytes' quantized layers have CUDA kernels only; Fabric refuses the plugin on any other accelerator."},
  {"R81", "A precision plugin given to the strategy object excludes one in `plugins=`.",
   "The strategy's plugin would replace the other; Fabric refuses to pick one of two."},
  {"R82", "A strategy's CPU `parallel_devices` exclude another accelerator than cpu.",
   "The devices decide the accelerator; a CUDA accelerator with CPU devices cannot place the ranks."},
  {"R83", "A strategy's CUDA `parallel_devices` exclude another accelerator than cuda (or gpu).",
   "The devices decide the accelerator; a CPU accelerator with GPU devices cannot place the ranks."},
  {"R85", "A CheckpointIO given to the strategy object excludes one in `plugins=`.",
   "Fabric would have to drop one of the two; it refuses to pick."},
  {"R86", "A ClusterEnvironment given to the strategy object excludes one in `plugins=`.",
   "Fabric would have to drop one of the two; it refuses to pick."},
  {"R87", "The XLA strategies (xla, xla_fsdp, single XLA device) save through XLACheckpointIO only.",
   "XLA tensors must be moved to the CPU by torch_xla before torch.save; only XLACheckpointIO does that."},
  {"R88", "The XLA strategies xla and single XLA device take an XLAPrecision plugin only.",
   "XLA selects its precision through XLA_USE_BF16-style settings that only XLAPrecision makes."},
  {"R89", "`suggested_max_num_workers(local_world_size)` takes at least one process per machine.",
   "It divides the machine's CPUs among the processes on it; zero or fewer processes has no meaning."},
  {"R84", "The FSDP strategy takes an FSDPPrecision plugin only, given to `FSDPStrategy(precision=...)` or in `plugins=`.",
   "FSDP casts parameters, gradients and buffers through its own MixedPrecision config, which only FSDPPrecision builds."},
  /* strategies/ (R90-R109) */
  {"R90", "FSDP saves `state_dict_type=\"sharded\"` or `\"full\"` checkpoints; any other type is refused at save.",
   "FSDPStrategy stores the argument unchecked and picks the checkpoint format by it when saving."},
  {"R91", "`FSDPStrategy(activation_checkpointing=...)` and `activation_checkpointing_policy=` exclude each other.",
   "Both choose the layers to checkpoint; the first is the deprecated form of the second."},
  {"R92", "`FSDPStrategy(process_group=..., device_mesh=...)`: pass one of them.",
   "Both say which ranks shard and which replicate; FSDP takes one."},
  {"R93", "Hybrid sharding needs `auto_wrap_policy`, `process_group` or `device_mesh`.",
   "It shards within a group and replicates across groups: without units or groups there is nothing to split."},
  {"R96", "A ModelParallelStrategy checkpoint needs a model whose parameters parallelize_fn distributed (DTensors).",
   "Distributed checkpoints are written and read through the DTensor model; FabricScript's parallelize_fn cannot make one yet."},
  {"R97", "ModelParallelStrategy cannot load a single raw optimizer from a checkpoint.",
   "Its optimizer state is sharded with the model; load them together."},
  {"R98", "ModelParallelStrategy's data_parallel_size x tensor_parallel_size must equal the world size.",
   "The two sizes are the device mesh's shape: every process is one point of it."},
  {"R100", "Under XLAStrategy, `fabric.all_reduce` reduces with sum, mean or avg only.",
   "XLA's mesh_reduce sums; mean and avg divide the sum by the world size."},
  {"R101", "`DDPStrategy(start_method=\"fork\")` on a platform that cannot fork (Windows).",
   "Python offers only the spawn start method there."},
  {"R102", "ModelParallelStrategy's `parallelize_fn` must return the module.",
   "setup uses what it returns as the model; a def without `return model` gives None."},
  {"R103", "Under the spawn start method, `launch()` must run inside `if __name__ == \"__main__\":`.",
   "Each spawned process imports the script again (as __mp_main__); unguarded, it would launch again there."},
  {"R104", "One distributed model per ModelParallelStrategy checkpoint.",
   "The distributed checkpoint layout holds a single model's shards."},
  {"R107", "FSDPStrategy and ModelParallelStrategy have no CheckpointIO (`strategy.checkpoint_io`).",
   "They write sharded or distributed checkpoints themselves; save and load through `fabric.save`/`fabric.load`."},
  {"R108", "ModelParallelStrategy's `device_mesh` exists only after `fabric.launch()`.",
   "The mesh is built when the processes start (setup_environment); reading it before raises."},
  {"R109", "FSDPStrategy and ModelParallelStrategy take no CheckpointIO (`strategy.checkpoint_io = ...`).",
   "Their checkpoints are sharded or distributed and written by the strategy itself; the setter refuses any plugin, None included."},
  {"R94", "DeepSpeed's devices must be the first GPUs, in order (`devices=2`, not `devices=[1]`).",
   "DeepSpeed gives each process the GPU of its local rank; CUDA_VISIBLE_DEVICES selects other GPUs."},
  {"R95", "`DeepSpeedStrategy(config=\"path\")` needs the file to exist (checked with --here).",
   "The strategy reads the JSON file when it is created, on the machine the script runs on."},
  /* issue 13 point 5 (raisesC): precision plugins and XLAFSDPStrategy, R110-R129 */
  {"R110", "Under XLAFSDPStrategy, `all_reduce` takes reduce_op sum, mean or avg only.",
   "XLA's mesh_reduce sums; Fabric divides by the world size for mean and avg, and has nothing for max or min."},
  {"R111", "An XLAFSDP checkpoint (save, or load of a sharded one) needs the set-up model in its state.",
   "Each rank writes its shard of the XLAFSDP-wrapped model; a state without it has nothing sharded to save or restore."},
  {"R112", "One XLAFSDP model per checkpoint.", "The shard files hold a single wrapped model."},
  {"R113", "Loading under XLAFSDPStrategy needs a state with the model to restore into.",
   "The checkpoint is loaded in place into the objects of the state; None or {} has none."},
  {"R114", "XLAFSDPStrategy cannot load a single raw module or optimizer (`fabric.load_raw`).",
   "Its checkpoints are shards of model and optimizer together; load them through `fabric.load`."},
  {"R115", "`MixedPrecision(precision=...)` takes '16-mixed' or 'bf16-mixed' only.",
   "The plugin is autocast; the true and 32-bit precisions have plugins of their own."},
  {"R116", "A bf16 precision (and any FSDPPrecision) does not take a gradient scaler.",
   "bf16 has float32's range, so no loss scaling; FSDPPrecision makes its own ShardedGradScaler."},
  {"R117", "FSDPPrecision, DeepSpeedPrecision and XLAPrecision accept only the precisions they list.",
   "Each maps the name to the dtypes its strategy's engine implements."},
  {"R118", "BitsandbytesPrecision's int8 modes compute in float16 only.",
   "bitsandbytes' int8 matrix multiplication is implemented for float16 activations."},
  {"R119", "BitsandbytesPrecision quantizes Linear layers: a model without any is refused at setup.",
   "Nothing would be quantized; Fabric stops users who think their model was."},
  {"R120", "With `BitsandbytesPrecision(ignore_modules=...)`, the model cannot be created under `fabric.init_module()`.",
   "init_module replaces torch.nn.Linear by the quantized class for every layer created in it, so the ignored ones cannot be skipped."},
  {"R121", "XLAFSDPStrategy takes either `auto_wrapper_callable` or `activation_checkpointing_policy`, not both.",
   "The policy is implemented as an auto_wrapper_callable; given both, one would silently replace the other."},
  {"R122", "XLAFSDPStrategy's `activation_checkpointing_policy` must be a set of layer classes.",
   "Fabric builds the checkpoint wrapper from `isinstance(module, tuple(policy))`; other policies go through auto_wrapper_callable."},
  {"R123", "A full XLAFSDP checkpoint loads into the raw model, not the set-up one.",
   "The full checkpoint holds unsharded weights; an XLAFSDP-wrapped model holds shards."},
  {"R124", "A full XLAFSDP checkpoint loads into a module under the key 'model'.",
   "Fabric reads the full weights into `state[\"model\"]` and nothing else."},
  {"R125", "XLAFSDPStrategy's `state_dict_type` must be 'sharded' or 'full'.",
   "Loading has a reader for those two layouts only (saving another name writes shards)."},
  {"R126", "With 16-mixed, gradients cannot be clipped for an optimizer made with `fused=True`.",
   "The gradient scaler unscales the gradients before clipping; a fused optimizer unscales inside its own step, so the scaler refuses to do it first."},
  {"R127", "XLAFSDPStrategy(precision=...) takes an XLAPrecision plugin only.",
   "XLA computes in the dtypes XLAPrecision sets up (XLA_USE_BF16); the other plugins' autocast and scalers do not apply."},
  {"R128", "A full XLAFSDP checkpoint cannot be saved across several hosts.",
   "Each host writes its shards to its own disk (TPU VMs share no filesystem), so no host can consolidate them."},
  {"R129", "Outside FSDP and DeepSpeed, what `fabric.setup(model, ...)` receives as optimizers must be objects Fabric can wrap: no number, string, None or container.",
   "Fabric wraps each optimizer in `_FabricOptimizer`, which takes on a class derived from the optimizer's own; Python cannot derive from `NoneType` or `bool`, nor lay out a subclass of `int`, `str` or `list` like a plain object (under XLAStrategy Fabric first reads the optimizer's `param_groups`)."},
  {"W25", "Loading a full XLAFSDP checkpoint restores the model only.",
   "The full checkpoint is consolidated from the model's shards; optimizer states and other keys are not in it."},
  {"W26", "Under Transformer Engine, a Linear whose in_features is not a multiple of 8 or out_features of 16 stays unconverted.",
   "FP8 matrix multiplication needs those alignments; Fabric keeps such a layer in the fallback precision and says so."},
  {"W1", "A model already wrapped in FSDP still has parameters on the meta device.",
   "FSDP materializes only what it wraps itself; these parameters stay without data."},
  {"W2", "An FSDP `auto_wrap_policy` is set, but the model is already wrapped.", "The policy is ignored."},
  {"W3", "Modules without `reset_parameters()` keep uninitialized memory after materialization.",
   "ModelParallelStrategy re-initializes parameters through `reset_parameters()`."},
  {"W4", "The model's parameters are on different devices when setup moves it to Fabric's device.",
   "Fabric moves every parameter to its device (`move_to_device=True`), so a placement made on purpose (a submodule kept on another device) is undone; it says which parameter differs from the first."},
  {"W5", "This strategy cannot skip gradient synchronization: `no_backward_sync` does nothing.",
   "DP and DeepSpeed synchronize inside their engines."},
  {"W6", "`fabric.sharded_model()` is deprecated: use `fabric.init_module()`.",
   "init_module() creates the model on the right device with the precision's dtype, and for FSDP and DeepSpeed stage 3 sharded or empty, which covers what sharded_model() did."},
  {"W7", "`strategy=\"dp\"` on CPU becomes ddp.", "DataParallel needs GPUs."},
  {"W8", "`precision=\"16-mixed\"` on CPU becomes bf16-mixed.", "CPU autocast has no float16."},
  {"W9", "`precision=16/\"16\"/\"bf16\"` are legacy names.", "The full names say whether the precision is mixed or true."},
  {"W10", "FSDP with a true half precision computes in the lower precision.",
   "Its parameters stay float32 in the shards; say `bf16-mixed` for float32 weights with autocast."},
  {"W13", "State keys collide with DeepSpeed's engine state.", "DeepSpeed may overwrite them on load."},
  /* strategies/ (W20-W24) */
  {"W20", "`FSDPStrategy(activation_checkpointing=...)` is deprecated.",
   "`activation_checkpointing_policy=` takes the same layer classes as a set (or a policy)."},
  {"W21", "A parameter tied across FSDP units by the `auto_wrap_policy`.",
   "FSDP shards each unit on its own: the unit that does not own the tied weight sees a flat shard of it, and the forward or backward fails with a size mismatch; keep both sides of a tie (an embedding and its head) in one unit. (This runtime keeps such a parameter in the root's unit, so a run here goes on.)"},
  {"syntax", "The script does not parse.", "FabricScript is Python-shaped: the parser says where it stopped."},
  {"name", "A name is used that no statement defines and no builtin has.", "Python raises NameError at run time; the check says it first."},
  {"attr", "An object has no such attribute or method.", "Python raises AttributeError at run time; the check says it first."},
  {"call", "A call's arguments do not fit the function's parameters.", "Python raises TypeError at run time."},
  {"type", "A literal argument has a type the parameter does not take.", "torch raises TypeError at run time."},
  {"shape", "A layer's input size does not match what the layer before it gives.", "torch raises a shape error at the first forward."},
  {"layer", "A model body is not a sequence of layers.", "A `model` declaration builds an nn.Sequential-like module."},
  {"index", "A known list or tuple is indexed out of range.", "Python raises IndexError."},
  {"value", "A value is out of the range its operation accepts.", "torch or Python raises ValueError."},
  {"recursion", "A function calls itself (or a model contains itself).", "The checker analyses calls inline; the language has no recursion."},
  {"meta-forward", "A model whose parameters are on the meta device is run.", "Meta tensors hold no data; the forward cannot compute."},
  {"meta-move", "A meta-device model is moved with `.to()`.", "There is no data to move; use `to_empty()` and initialise it."},
  {"meta-optimizer", "An optimizer is created over meta-device parameters.", "Its state would refer to parameters that are replaced at materialization."},
  {"uninit", "A model runs on uninitialized parameters (after `to_empty()`).", "`to_empty()` allocates without initialising; call `reset_parameters()` first."},
  {"param", "A -D value does not fit its param(), or no param() uses it.", "Script parameters are typed by their default."},
  {"assert", "An assert statement failed.", "As Python's assert."},
  {"runtime", "The run failed.", "The message is the runtime's (torch's words where it has them)."},
  {"unsupported", "A construct or name the check understands but this runtime does not run yet.",
   "What `check` accepts, a run must do: a script that would stop at it halfway through a training run is "
   "refused before anything runs. Python scripts (.py) are checked, not run, so the rule does not apply to them."},
  {"launch", "A rank of a multi-process run failed; the launcher stopped the others.", "A run is whole or not at all."},
  {"io", "A file could not be read or written.", "The message names the file and the system's reason."},
  {"env", "A package the configuration needs is missing.", "Fabric checks its optional requirements when the plugin is created."},
  {"log", "A logger call failed, or (a note) where a logger's files went.", "Loggers write files; the message says which."},
  {"callback", "fabric.call met a callback attribute of the hook's name that is not callable.",
   "Fabric skips that callback with this warning."},
  {"checkpoint", "A note at the end of a run: how many checkpoints fabric.save wrote, and the last one's path.",
   "The run says where its files went."},
  {"output", "A line a rank wrote to standard error outside a diagnostic.", "Under JSON diagnostics every line of stderr is a JSON object."},
  {"budget", "The check spent its budget (--check-budget, default 10 s and 1 GiB) and stopped analysing.",
   "Analysing calls and loops inline multiplies: the budget makes every check end; what follows the warning is not checked."},
  {"preflight", "The check ran for the machine the script declares, not this one.",
   "People check on a laptop before they submit to a cluster; --here checks for this machine."},
  {"seed", "seed_everything() found no seed, neither given nor in PL_GLOBAL_SEED, and uses 0.",
   "Fabric's seed_everything warns so (utilities/seed.py): a run meant to be seeded is not."},
};
#define NROWS (sizeof rows / sizeof rows[0])

static const explain_row *find_row(const char *id) {
  for (size_t i = 0; i < NROWS; i++)
    if (!strcmp(rows[i].id, id)) return &rows[i];
  return NULL;
}

const char *fsW_rule_words(const char *id) {
  const explain_row *r = find_row(id);
  return r ? r->words : NULL;
}

static void put_script(FILE *out, const char *text) {
  for (const char *p = text; *p;) {
    size_t n = strcspn(p, "\n");
    fprintf(out, "    %.*s\n", (int)n, p);
    p += n + (p[n] == '\n');
  }
}

void fsW_list(FILE *out) {
  for (size_t i = 0; i < NROWS; i++) fprintf(out, "%-7s %s\n", rows[i].id, rows[i].words);
}

int fsW_explain(FILE *out, FILE *err, const char *id) {
  char up[16]; /* r36 is R36 */
  snprintf(up, sizeof up, "%s", id);
  if ((up[0] == 'r' || up[0] == 'w') && up[1] >= '0' && up[1] <= '9') up[0] = (char)(up[0] - 'a' + 'A');
  const explain_row *r = find_row(up);
  if (!r) {
    const char *ids[NROWS];
    for (size_t i = 0; i < NROWS; i++) ids[i] = rows[i].id;
    const char *near = fsD_closest(id, ids, NROWS);
    fprintf(err, "fabricscript: explain: no rule '%s'", id);
    if (near) fprintf(err, "; did you mean '%s'?", near);
    fputs("\n(the ids are those in brackets in `error[R36]:`; docs/rules.md lists them)\n", err);
    return 2;
  }
  fprintf(out, "%s: %s\n\n%s\n", r->id, r->words, r->why);
  for (size_t i = 0; i < sizeof explain_examples / sizeof explain_examples[0]; i++) {
    const explain_example *e = &explain_examples[i];
    if (strcmp(e->rule, r->id)) continue;
    fprintf(out, "\nBefore (tests/scripts/rules/%s):\n\n", e->before_name);
    put_script(out, e->before);
    fprintf(out, "\nAfter (tests/scripts/rules/%s):\n\n", e->after_name);
    put_script(out, e->after);
  }
  return 0;
}
