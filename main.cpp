// Entry point. Subcommands:
//   ./train [train] --config FILE [--section.key=value ...]   train (default)
//   ./train prepare --input PATH... --out DIR [--vocab-size N] ...   text -> shards
//   ./train bench --config FILE [--bench-steps N] [--modes | --profile] [--section.key=value ...]
//   ./train export --checkpoint DIR --out DIR [--force]   checkpoint -> Hugging Face Llama
//   ./train generate --checkpoint DIR [--prompt TEXT] ...   sample text from a model
//   ./train plan --config FILE --world N [--hardware FILE] [--top K]   what to run, by speed
//   ./train scale [--validate | --calibrate] ...   throughput model, scaling curves
//   ./train scale --offload --config FILE [--hardware FILE] [--world N]   offload step time
//   ./train config [--config FILE [--counts] ...]   every key, the resolved config, or its counts
//   ./train supervise [--max-restarts N ...] -- LAUNCHER ...   rerun a job after a failure
// Only main decides to exit: every failure below it is an llm::Error, printed
// as one line on stderr (naming the rank) with a non-zero exit status; under
// mpirun a failing rank aborts the whole job. Errors of the command line and
// the config, alike on every rank, are printed once, by rank 0. The source
// location of a failed check is shown only with LLM_DEBUG=1.
#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "commands/attention_bench.h"
#include "commands/benchmark.h"
#include "commands/export.h"
#include "commands/generate_text.h"
#include "commands/model_counts.h"
#include "commands/plan.h"
#include "base/cli_values.h"
#include "schema/config.h"
#include "base/error.h"
#include "base/exit_status.h"
#include "base/log.h"
#include "cost_models/hardware_profile.h"
#include "cost_models/offload_report.h"
#include "cost_models/planner.h"
#include "commands/scaling.h"
#include "commands/supervise.h"
#include "collectives/signal_thread.h"
#include "base/system.h"
#include "trainer/trainer.h"
#include "data/prepare.h"
#include "interop/hf_llama.h"
#include "parallel/comm.h"

namespace {

constexpr const char* kUsage = R"(usage:
  ./train config [--config FILE [--counts] [--section.key=value ...]]
      Without --config: every config key with its type, default and meaning.
      With it: the resolved config (file, then overrides) as TOML; with
      --counts, its parameters and FLOPs per step as JSON instead.
  ./train [train] --config FILE [--section.key=value ...]
      Train. FILE is a path, or a name looked up in configs/ (e.g. tiny).
      Any config key can be overridden, e.g. --training.steps=20 or
      --training.steps 20. Set LLM_DEBUG=1 for source locations in errors.
  ./train prepare --input PATH [--input PATH ...] --out DIR [--tokenizer PATH | --vocab-size N]
                  [--text-field NAME] [--skip-missing-text] [--jobs N]
                  [--val-fraction F] [--shard-tokens N] [--seed N] [--quiet]
                  [--chat [--chat-format llama3|chatml]]
      Encode documents into train_*.bin and val_*.bin in DIR, each as BOS +
      text + EOS. Inputs: files or directories of text, .jsonl or .json
      records (the document in --text-field, default text), each possibly
      .gz. --tokenizer: a SentencePiece .model, a tiktoken file (Llama 3's
      tokenizer.model), a tokenizer.json or a model directory; without it a
      SentencePiece BPE of --vocab-size pieces is trained on the train split
      and written to DIR. --jobs: parallel encoders (default: all cores); the
      shards are the same for any number. --chat: each record's messages
      (--text-field, default messages: role system/user/assistant, content)
      in the tokenizer's chat format (Llama 3's headers, or ChatML; or the
      one --chat-format names), with a loss mask beside each shard
      (<shard>.mask) that keeps the assistant's tokens only.
  ./train plan --config FILE [--world N] [--hardware FILE] [--gpu-memory 80GiB] [--reserved 3GiB]
               [--shard-group G] [--top K] [--measure [--repeats R]]
      What to run on N ranks: every mesh x parallel mode x activation
      recompute x precision x offload with its memory per rank, the rows
      that fit ranked by the throughput model's predicted step on the
      hardware profile (default: cost_models/hardware/h100_sxm.toml for a CUDA
      config, cpu_dev_vm.toml for a CPU one), fastest first; the rows it
      could not rank and why; and the fastest that fits with 10% to spare,
      as a command line with its predicted step, the step's parts and the
      memory headroom. Memory per rank is the profile's unless --gpu-memory
      (less --reserved) says otherwise; hybrid rows use groups of G (default
      a node's devices). --top K prints the first K rows; --measure also
      runs them here (3 without --top) and prints the measured order.
  ./train scale [--hardware FILE] [--configs A,B] [--strategies S,T] [--gpus 8,16]
                [--batch-per-gpu 8,16] [--precision bf16,fp32]
                [--out DIR] [--measure] [--measure-max-ranks N] [--hybrid-group G]
                [--rate-dispersion D]
      Scaling curves: by default the FSDP paper's two figures (T5 611M / 2.28B
      / 11.3B x ddp, full_replication, hybrid, full_shard; 11.3B full_shard at
      batch 8 and 16 per GPU), else the grid the options name; per GPU count,
      memory from the planner and step time (compute, contention, exposed
      communication, optimizer) and TFLOPS per GPU from the throughput model,
      into DIR/scaling.csv and DIR/scaling.png. --measure also runs the points
      this machine can run (mpirun) and overlays them. --section.key=value
      applies to every config (predicted and measured). --rate-dispersion
      replaces the profile's device.rate_dispersion (0: no slowest-GPU wait).
  ./train scale --validate [--configs A,B] [--ranks 1,2,4] [--modes ddp,zero3] [--repeats R]
      Every mode at each rank count on this machine: predicted (cost_models/hardware/
      cpu_dev_vm.toml) against measured step time, with the error; --repeats
      (also with --measure) runs each point R times and keeps the fastest.
  ./train scale --calibrate [--out cost_models/hardware/cpu_dev_vm.toml] [--config FILE]
      Measure this machine (sgemm, memory, MPI, host AdamW, copies) into a hardware profile.
  ./train scale --offload --config FILE [--hardware FILE] [--world N] [--section.key=value ...]
      Predicted step time of FILE without offload, with ZeRO-Offload (with and
      without offload.delayed_update) and with ZenFlow (its [zenflow] settings),
      and the parts: host AdamW, PCIe each way, exposed host time, GPU idle.
      Defaults: cost_models/hardware/a100_80gb_pcie4x4.toml, one node of it.
  ./train export --checkpoint DIR --out DIR [--dtype float32|bfloat16] [--force]
                 [--chat-format llama3|chatml]
      Write a checkpoint (a step_N directory, or a run directory: its latest)
      as a Hugging Face Llama directory: model.safetensors, config.json,
      generation_config.json and, when the run had one, the tokenizer
      (tokenizer.model or tokenizer.json, and tokenizer_config.json with
      its special tokens and, where the tokenizer has one, the chat format
      of prepare --chat as its chat template; --chat-format names another). The
      run directory's own copy of its tokenizer is used, so this works from
      any directory. A non-empty --out is refused
      unless --force. The reverse: [model] init_from = "DIR" starts training
      from such weights.
  ./train generate --checkpoint DIR [--prompt TEXT] [--samples N] [--max-new-tokens N]
                   [--temperature T] [--top-k K] [--top-p P] [--seed N] [--device cpu|cuda]
                   [--chat [--chat-format llama3|chatml]]
      Sample text from a model: DIR is a checkpoint (step_N, or a run directory:
      its latest) or a Hugging Face directory with tokenizer.model or
      tokenizer.json (as export writes). The prompt is encoded after BOS; each of N samples (default 1)
      ends at EOS, after --max-new-tokens (128) or when the context is full.
      --temperature 0 is greedy; defaults 0.8, top-k 40 (0: off), top-p 0.95
      (1: off), seed 0. Prints each sample and the tokens per second. Runs on
      the run's training.device unless --device says otherwise. --chat: the
      prompt is a user's turn in the chat format (as prepare --chat), followed
      by the assistant's header; each reply ends at the end-of-turn token and
      is printed in the format, special tokens included.
  ./train supervise [--max-restarts N] [--backoff DURATION] [--run-dir DIR]
                    [--set-aside-after N] [--retry-after N] -- LAUNCHER ...
      Run LAUNCHER (e.g. mpirun -np 4 ./train --config FILE ..., or ./train
      --config FILE alone) and, after a failure a restart can fix (a rank
      killed, stopped or lost: the watchdog's exit status 75, a signal, a
      launcher's failure), run it again: it resumes from the run directory's
      latest checkpoint. Exit status 1 (bad input, a failed agreement check)
      is never retried. At most --max-restarts (3) restarts, the first after
      --backoff (10s), each next after twice as long (at most 5 min). Each
      restart is a line of DIR/restarts.jsonl (DIR: --run-dir, else the
      config's checkpoint.dir) and TensorBoard scalars restart/... at the step
      resumed from. With --hostfile FILE and -np N in LAUNCHER, a host named
      in --set-aside-after (2) failures in a row is set aside for the next
      --retry-after (3) launches: the job restarts on the hosts left
      (DIR/hostfile) at the largest world size the config fits, keeping
      training.batch_size by more gradient accumulation.
  ./train bench --config FILE [--bench-steps N]
                [--modes | --memory | --offload | --profile | --attention]
                [--peak-tflops P] [--section.key=value ...]
      Time training steps on synthetic tokens; report tokens/s and GFLOP/s
      against this machine's sgemm rate, or on a GPU (training.device = cuda)
      as MFU against P TFLOP/s (default 989, H100 SXM dense bf16). With
      --profile, then time N more steps op by op (a CUDA event on the compute
      stream after each op; on the CPU the host clock) and print a table:
      each op's calls and ms per step, its share of the step, the matmuls'
      FLOP/s, and the ops' sum against the measured step. With --modes (under
      mpirun), run the config in every parallel mode and print a table of
      step time, memory per rank and bytes communicated per step. With
      --memory, a table of precision x activation recomputation: tokens/s and
      activation bytes. With --offload, the optimizer on the device,
      offloaded (with and without delayed_update) and ZenFlow: step time,
      device and host bytes, bytes moved host <-> device and host time per
      step. With --attention, causal attention alone on the config's shape
      (micro-batch x seq_len, its heads): the median of N forwards, then
      backwards (on cuDNN both backward algorithms), in ms and TFLOP/s in our
      FLOP convention and in the published one (backward 2.5 forwards), then
      cuDNN's version, plans and fallbacks.
)";

using Args = llm::CommandLine;

// Options that take no value.
constexpr std::string_view kFlags[] = {
    "quiet",     "modes",      "force",   "memory",  "offload", "measure",           "validate",
    "calibrate", "comm-bench", "no-plot", "profile", "counts",  "skip-missing-text", "chat",
    "attention"};

const std::string* find_option(const Args& args, const std::string& name) {
  const std::string* found = nullptr;
  for (const auto& [key, value] : args.options) {
    if (key == name) found = &value;
  }
  return found;
}

// Runs `read`, which reads what every rank reads alike (the command line, the
// config): its errors are reported once, not once per rank.
template <class F>
auto alike_on_every_rank(F&& read) {
  try {
    return read();
  } catch (const llm::Error& e) {
    throw llm::CollectiveError(e);
  }
}

void check_options(const Args& args, std::initializer_list<const char*> allowed) {
  const std::vector<std::string> names(allowed.begin(), allowed.end());
  alike_on_every_rank([&] {
    for (const auto& [key, value] : args.options) {
      LLM_CHECK(std::find(names.begin(), names.end(), key) != names.end(),
                "./train {}: unknown option --{}{} (see ./train --help)", args.command, key,
                llm::did_you_mean(key, names));
    }
  });
}

llm::Config load_config(const Args& args) {
  return alike_on_every_rank([&] {
    const std::string* path = find_option(args, "config");
    LLM_CHECK(path, "./train {}: --config FILE is required (see ./train --help)", args.command);
    return llm::config_load(*path, args.overrides, llm::hf_import_architecture);
  });
}

int run_prepare(const Args& args) {
  check_options(args,
                {"input", "out", "vocab-size", "val-fraction", "shard-tokens", "seed", "quiet",
                 "tokenizer", "text-field", "skip-missing-text", "jobs", "chat", "chat-format"});
  LLM_CHECK(args.overrides.empty(), "./train prepare takes no config overrides");
  llm::PrepareOptions options;
  options.jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (const auto& [key, value] : args.options) {
    if (key == "tokenizer") options.tokenizer = value;
    if (key == "text-field") options.text_field = value;
    if (key == "skip-missing-text") options.skip_missing_text = true;
    if (key == "jobs") options.jobs = static_cast<int>(llm::parse_integer(value, key));
    if (key == "input") options.inputs.push_back(value);
    if (key == "out") options.out_dir = value;
    if (key == "vocab-size") options.vocab_size = static_cast<int>(llm::parse_integer(value, key));
    if (key == "shard-tokens") options.shard_tokens = llm::parse_integer(value, key);
    if (key == "seed") options.seed = static_cast<uint64_t>(llm::parse_integer(value, key));
    if (key == "quiet") options.quiet = true;
    if (key == "val-fraction") options.val_fraction = llm::parse_number(value, key, 0, 1);
    if (key == "chat") options.chat = true;
    if (key == "chat-format") options.chat_format = value;
  }
  LLM_CHECK(!options.inputs.empty(), "./train prepare: --input PATH is required");
  LLM_CHECK(!options.out_dir.empty(), "./train prepare: --out DIR is required");
  LLM_CHECK(options.tokenizer.empty() || !find_option(args, "vocab-size"),
            "./train prepare: --vocab-size is for training a tokenizer; --tokenizer gives one");
  llm::prepare_dataset(options);
  return 0;
}

// Joins the MPI world (a world of one without mpirun), quiets ranks other
// than 0 and shares the node's cores among its ranks.
llm::Group& join_world() {
  llm::Group& world = llm::comm_world();
  llm::log_setup(world.rank());
  llm::configure_threads(llm::comm_local_size());
  return world;
}

int run_export(const Args& args) {
  check_options(args, {"checkpoint", "out", "dtype", "force", "chat-format"});
  LLM_CHECK(args.overrides.empty(), "./train export takes no config overrides");
  const std::string* checkpoint = find_option(args, "checkpoint");
  const std::string* out = find_option(args, "out");
  LLM_CHECK(checkpoint && out, "./train export: --checkpoint DIR and --out DIR are required");
  llm::ExportRequest request{*checkpoint, *out};
  if (const std::string* dtype = find_option(args, "dtype")) request.dtype = *dtype;
  request.force = find_option(args, "force") != nullptr;
  if (const std::string* format = find_option(args, "chat-format")) request.chat_format = *format;
  const llm::ExportResult result = llm::export_checkpoint(request);
  const std::string chat =
      result.chat_format.empty() ? "" : " (chat template: " + result.chat_format + ")";
  std::printf(
      "exported %s (%zu parameters, %s) to %s: model.safetensors, config.json, "
      "generation_config.json%s%s\n",
      result.checkpoint.c_str(), result.parameters, request.dtype.c_str(), out->c_str(),
      result.tokenizer ? ", the tokenizer, tokenizer_config.json" : " (no tokenizer in the run)",
      chat.c_str());
  return 0;
}

int run_generate(const Args& args) {
  check_options(args, {"checkpoint", "prompt", "samples", "max-new-tokens", "temperature", "top-k",
                       "top-p", "seed", "device", "chat", "chat-format"});
  LLM_CHECK(args.overrides.empty(), "./train generate takes no config overrides");
  LLM_CHECK(llm::comm_world().size() == 1,
            "./train generate runs in one process; start it without mpirun");
  llm::GenerateRequest request;
  request.sampling.max_new_tokens = 128;
  request.sampling.top_p = 0.95f;
  for (const auto& [key, value] : args.options) {
    if (key == "checkpoint") request.model = value;
    if (key == "prompt") request.prompt = value;
    if (key == "samples")
      request.samples = static_cast<int>(llm::parse_number(value, key, 1, 4096));
    if (key == "max-new-tokens") {
      request.sampling.max_new_tokens = static_cast<int>(llm::parse_number(value, key, 1, 1 << 20));
    }
    if (key == "temperature")
      request.sampling.temperature = static_cast<float>(llm::parse_number(value, key, 0, 100));
    if (key == "top-k")
      request.sampling.top_k = static_cast<int>(llm::parse_number(value, key, 0, 1 << 30));
    if (key == "top-p")
      request.sampling.top_p = static_cast<float>(llm::parse_number(value, key, 0, 1));
    if (key == "seed")
      request.sampling.seed = static_cast<uint64_t>(llm::parse_integer(value, key));
    if (key == "device") {
      LLM_CHECK(value == "cpu" || value == "cuda", "--device: expected cpu or cuda, got '{}'",
                value);
      request.device = value == "cuda" ? llm::Device::cuda : llm::Device::cpu;
    }
    if (key == "chat") request.chat = true;
    if (key == "chat-format") request.chat_format = value;
  }
  LLM_CHECK(!request.model.empty(), "./train generate: --checkpoint DIR is required");
  const llm::GeneratedText out = llm::generate_text(request);
  for (size_t i = 0; i < out.texts.size(); ++i) {
    if (out.texts.size() > 1) std::printf("--- sample %zu\n", i + 1);
    std::printf("%s\n", out.texts[i].c_str());
  }
  const std::string full =
      out.context_full ? "; stopped at the context of " + std::to_string(out.context) + " tokens"
                       : "";
  std::printf("%s: %d new tokens in %.2f s, %.1f tokens/s (%zu sample(s), prompt %d tokens%s)\n",
              out.source.c_str(), out.new_tokens, out.seconds, out.new_tokens / out.seconds,
              out.texts.size(), out.prompt_tokens, full.c_str());
  return 0;
}

int run_plan(const Args& args) {
  check_options(args, {"config", "world", "gpu-memory", "reserved", "shard-group", "hardware",
                       "top", "measure", "repeats"});
  llm::PlanOptions options;
  for (const auto& [key, value] : args.options) {
    if (key == "world") options.world = static_cast<int>(llm::parse_integer(value, "world"));
    if (key == "shard-group")
      options.hybrid_group = static_cast<int>(llm::parse_integer(value, "shard-group"));
    if (key == "hardware") options.hardware = value;
    if (key == "gpu-memory") options.device_memory = llm::parse_bytes(value, "--gpu-memory");
    if (key == "reserved") options.reserved_memory = llm::parse_bytes(value, "--reserved");
    if (key == "top") options.top = static_cast<int>(llm::parse_integer(value, "top"));
    if (key == "measure") options.measure = true;
    if (key == "repeats")
      options.run.repeats = static_cast<int>(llm::parse_integer(value, "repeats"));
  }
  return llm::plan_command(load_config(args), options);
}

// `./train scale --offload`: the offload model's table (cost_models/offload_model.h).
int run_scale_offload(const Args& args) {
  check_options(args, {"offload", "config", "hardware", "world"});
  const std::string* hardware_path = find_option(args, "hardware");
  const llm::HardwareProfile hardware = llm::hardware_load(
      hardware_path ? *hardware_path : "cost_models/hardware/a100_80gb_pcie4x4.toml");
  const std::string* world = find_option(args, "world");
  const int ranks = world ? static_cast<int>(llm::parse_integer(*world, "world"))
                          : hardware.node.devices_per_node;
  LLM_CHECK(ranks >= 1, "--world: expected at least 1 rank, got {}", ranks);
  llm::offload_print_table(load_config(args), ranks, hardware);
  return 0;
}

int run_train(const Args& args) {
  check_options(args, {"config"});
  llm::Group& world = join_world();
  llm::Trainer trainer(load_config(args), world);
  trainer.run();
  return 0;
}

// `./train supervise [options] -- LAUNCHER ...`: the options are parsed
// like any command's, the launcher's line is kept as given.
int run_supervise(int argc, char** argv) {
  char** const end = std::find(argv, argv + argc, std::string_view("--"));
  const Args args = llm::parse_command_line(static_cast<int>(end - argv), argv, kFlags);
  check_options(args, {"max-restarts", "backoff", "run-dir", "set-aside-after", "retry-after"});
  LLM_CHECK(args.overrides.empty(),
            "./train supervise: config overrides belong to the command after --");
  LLM_CHECK(end != argv + argc && end + 1 != argv + argc,
            "./train supervise: the command to run goes after -- (e.g. ./train supervise -- "
            "mpirun -np 4 ./train --config FILE)");
  llm::SuperviseOptions options;
  for (const auto& [key, value] : args.options) {
    if (key == "max-restarts")
      options.max_restarts = static_cast<int>(llm::parse_number(value, key, 0, 1e6));
    if (key == "backoff") options.backoff_seconds = llm::parse_duration_seconds(value, key);
    if (key == "run-dir") options.run_dir = value;
    if (key == "set-aside-after")
      options.set_aside_after = static_cast<int>(llm::parse_number(value, key, 1, 1e6));
    if (key == "retry-after")
      options.retry_after = static_cast<int>(llm::parse_number(value, key, 1, 1e6));
  }
  return llm::supervise_command(std::vector<std::string>(end + 1, argv + argc), options);
}

int run_bench(const Args& args) {
  check_options(args, {"config", "bench-steps", "modes", "memory", "offload", "peak-tflops",
                       "profile", "attention"});
  const bool profile = find_option(args, "profile") != nullptr;
  alike_on_every_rank([&] {
    int kinds = 0;
    for (const char* kind : {"modes", "memory", "offload", "profile", "attention"})
      kinds += find_option(args, kind) != nullptr;
    LLM_CHECK(kinds <= 1,
              "./train bench: --modes, --memory, --offload, --profile and --attention are "
              "different benchmarks; give one");
  });
  const std::string* steps_option = find_option(args, "bench-steps");
  int steps = steps_option ? static_cast<int>(llm::parse_integer(*steps_option, "bench-steps")) : 5;
  llm::Group& world = join_world();
  if (find_option(args, "attention")) {
    llm::benchmark_attention(load_config(args), find_option(args, "bench-steps") ? steps : 20);
  } else if (find_option(args, "modes")) {
    llm::benchmark_modes(load_config(args), world, steps);
  } else if (find_option(args, "memory")) {
    llm::benchmark_memory(load_config(args), world, steps);
  } else if (find_option(args, "offload")) {
    llm::benchmark_offload(load_config(args), world, steps);
  } else {
    const std::string* peak = find_option(args, "peak-tflops");
    // H100 SXM dense bf16, the MFU reference of `./train bench`.
    const double peak_tflops = peak ? llm::parse_positive_number(*peak, "peak-tflops") : 989.0;
    llm::benchmark_run(load_config(args), world, steps, peak_tflops, profile);
  }
  return 0;
}

}  // namespace

// `./train config`: the key reference, or the resolved config.
int run_config(const Args& args) {
  check_options(args, {"config", "counts"});
  if (!find_option(args, "config")) {
    alike_on_every_rank([&] {
      LLM_CHECK(args.overrides.empty() && !find_option(args, "counts"),
                "./train config: overrides and --counts need --config FILE");
    });
    std::fputs(llm::config_reference().c_str(), stdout);
    return 0;
  }
  llm::Config config = load_config(args);
  const std::string text =
      find_option(args, "counts") ? llm::model_counts_json(config) : llm::config_to_toml(config);
  std::fputs(text.c_str(), stdout);
  return 0;
}

bool asks_for_help(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "help") return true;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") return false;  // the rest is supervise's command to run
    if (arg == "-h" || arg == "--help") return true;
  }
  return false;
}

int main(int argc, char** argv) {
  // Lines appear as they are printed, also through a pipe or mpirun (a
  // benchmark's rows as each is measured), not when a block buffer fills.
  std::setvbuf(stdout, nullptr, _IOLBF, BUFSIZ);
  llm::log_setup(0);
  try {
    // Before any other thread exists: signals are then taken by a thread of
    // their own, never by one that runs oneDNN's kernels (collectives/signal_thread.h).
    llm::signal_thread_start();
    if (asks_for_help(argc, argv)) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (argc > 1 && std::string_view(argv[1]) == "supervise") return run_supervise(argc, argv);
    const Args args =
        alike_on_every_rank([&] { return llm::parse_command_line(argc, argv, kFlags); });
    if (argc == 1) {
      std::fputs(kUsage, stdout);
      return llm::kExitUsage;
    }
    const std::vector<std::string> commands = {"train", "prepare", "bench",  "export",   "generate",
                                               "plan",  "scale",   "config", "supervise"};
    alike_on_every_rank([&] {
      LLM_CHECK(std::find(commands.begin(), commands.end(), args.command) != commands.end(),
                "unknown command '{}'{} (see ./train --help)", args.command,
                llm::did_you_mean(args.command, commands));
    });
    if (args.command == "train") return run_train(args);
    if (args.command == "prepare") return run_prepare(args);
    if (args.command == "bench") return run_bench(args);
    if (args.command == "export") return run_export(args);
    if (args.command == "generate") return run_generate(args);
    if (args.command == "plan") return run_plan(args);
    if (args.command == "config") return run_config(args);
    if (find_option(args, "offload")) return run_scale_offload(args);
    return llm::scale_command(args.options, args.overrides);
  } catch (const llm::CollectiveError& e) {
    llm::comm_abort_collective(llm::error_report(e));
  } catch (const llm::RestartableError& e) {
    llm::comm_abort(llm::error_report(e), llm::kExitRestartable);
  } catch (const std::exception& e) {
    // Under mpirun this takes every rank down, so none waits on a dead peer.
    llm::comm_abort(llm::error_report(e));
  }
}
