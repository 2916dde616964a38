// device_trainer.hpp: the sharded (FSDP FULL_SHARD) GPT-2 training step on one rank,
// written once over an execution space and a tagc communicator:
//   DeviceTrainer<tagc::exec::cuda, tagc::nccl_communicator>  one rank per GPU (tagc-gpt2-cuda)
//   DeviceTrainer<tagc::exec::host, tagc::mpi_communicator>   the same orchestration on the
//       CPU, which is how it is tested without a GPU (tests/test_device_trainer.cpp).
//
// The step is train::Trainer's (train/trainer.hpp), with every buffer in Exec memory:
//   forward:  for each unit u: wait for its all-gather (enqueued one unit ahead), run it
//   head:     loss, dlogits (the LM head is tied to wte: unit 0 stays gathered)
//   backward: for each unit u from last to first: wait for its all-gather (skipped with
//             --zero2), backward into the unit's gradient buffer, then - on the last
//             micro-batch - enqueue its reduce-scatter, which overlaps the backward of
//             the next unit
//   update:   wait for every reduce-scatter, global grad norm (one all-reduce), clip,
//             sharded AdamW over the owned shards, lr from warmup + cosine.
// Collectives are tasks of a CommQueue (comm_queue.hpp): one worker thread issues them
// in enqueue order, on a GPU on a side stream ordered against the model stream by
// events, so the host never waits for a collective inside the step (it does wait for
// the loss, the norm, and inside tagc::Reducer's small read-backs, on the worker).
//
// --gather-dtype bf16: as the CPU trainer (train/trainer.hpp), on the side stream: the
// fp32 shard rounded to bf16, a 16-bit all-gather, widened into the fp32 slot the model
// reads; master, AdamW state and gradients stay fp32.
//
// Same flags, shard plan (train/sharding.hpp), segment paths, reducer policies and
// checkpoint files (train/checkpoint.hpp) as the CPU trainer, so a checkpoint moves
// between tagc-gpt2, tagc-gpt2-cuda and this class's host instantiation (same world
// size). Not here: --compress auto (rejected with a message), TAGC_GPT2_VERIFY.
//
// Errors: std::runtime_error (with tagc's status text where it comes from tagc).
#pragma once

#include "comm_queue.hpp"
#include "device_reducer.hpp"

// defines: train::Args, train::StepMetrics, train::model_config, train::path_*
#include "args.hpp"
#include "trainer.hpp"
#include "checkpoint.hpp"
#include "checkpoint_store.hpp"
#include "fault_injection.hpp"
#include "sharding.hpp"

#include "data_loader.hpp"
#include "gpt2/config.hpp"
#include "gpt2/device_model.hpp"

#include "tagc/comm/counting.hpp"

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace train_device {

template <class Exec, class Comm>
class DeviceTrainer {
 public:
  template <class T>
  using vector = typename Exec::template vector<T>;
  using Counted = tagc::counting_communicator<Comm>;

  // model: the space of the model's compute; side: the space of the collectives and the
  // reducers' kernels (two distinct streams on a GPU; {} and {} on the host). A
  // communicator with a compute stream (NCCL) is pointed at the side stream. Every rank
  // constructs together (the data check agrees across ranks).
  DeviceTrainer(const train::Args& args, Comm& comm, Exec model = {}, Exec side = {});
  ~DeviceTrainer();
  DeviceTrainer(const DeviceTrainer&) = delete;
  DeviceTrainer& operator=(const DeviceTrainer&) = delete;

  int rank() const { return plan_.rank(); }
  int world() const { return plan_.world(); }
  int step() const { return step_; }
  const gpt2::Config& config() const { return cfg_; }
  size_t num_parameters() const;
  const std::vector<uint8_t>& segment_paths() const { return paths_; }

  // --- setup (every rank calls these together; a failure on any rank throws on all) ---
  void init_from_seed();
  void init_from_llmc(const std::string& path);
  void save_checkpoint(const std::string& dir);   // train/checkpoint_store.hpp
  void load_checkpoint(const std::string& dir);
  const std::vector<std::string>& resume_notes() const { return resume_notes_; }

  // --- training -----------------------------------------------------------------------
  train::StepMetrics train_step();
  double evaluate(int batches);  // mean val loss over `batches` global batches
  // All units gathered into the flat (llm.c-convertible) layout, on the host of every rank.
  std::vector<float> gather_model();

  // Run `fn` on every rank; if it throws on any, throw on all (no rank is left in a
  // collective). The message is the local one, or that of "another rank".
  template <class F>
  void agree(const char* what, F&& fn);

 private:
  float lr_at(int step) const;
  float* gathered(int u);
  // master: the fp32 master values even with --gather-dtype bf16 (gather_model)
  typename CommQueue<Exec>::Ticket enqueue_gather(int u, bool master = false);
  void enqueue_reduce(int u);
  double forward(const int32_t* inputs, const int32_t* targets);
  void check(const tagc::status& s, const char* what) const;
  void agree_flag(bool failed, const std::string& message, const char* what);
  // Sums `values` (host) over ranks in place, through Exec memory.
  void all_reduce_sum(std::span<double> values);
  double all_reduce_sum(double x);
  train::RankGroup rank_group();
  std::string segment_name(size_t i) const;
  template <class T>
  static T* raw(vector<T>& v);

  train::Args args_;
  gpt2::Config cfg_;
  Counted comm_;
  train::ShardPlan plan_;
  Exec model_exec_;
  std::unique_ptr<gpt2::DeviceModel<Exec>> model_;
  std::unique_ptr<gpt2::DataLoader> train_loader_, val_loader_;

  // owned flat buffers (ShardPlan::owned_size each)
  vector<float> params_, grad_shard_, m_, v_;
  // full-unit gradients (accumulated over micro-batches), and gathered parameters
  std::vector<vector<float>> grads_;
  std::vector<vector<float>> gather_bufs_;  // see gathered()
  // --gather-dtype bf16: one segment's rounded shard and its gathered 16-bit copy (the
  // worker's, one task at a time), sized once
  bool gather_bf16_ = false;
  vector<tagc::bfloat16> gather_send16_, gather_recv16_;
  std::vector<std::array<ReducerPtr<Exec, Comm>, 2>> reducers_;
  std::vector<std::array<tagc::reduce_stats, 2>> stats_;
  std::vector<uint8_t> paths_;              // per segment: train::path_none / path_plain / path_tagc
  std::vector<int32_t> inputs_, targets_;   // host: the loader fills these
  vector<int> dev_inputs_, dev_targets_;    // ... copied in here
  vector<double> scratch_;                  // small all-reduces (NCCL needs device memory)
  double grad_bytes_ = 0.0;                 // written by the worker, read after wait_all
  int step_ = 0;
  uint64_t rng_state_ = 0;
  double last_loss_ = 0.0, last_norm_ = 0.0;       // of the last step (a save refuses non-finite)
  std::optional<train::fault::NanAt> inject_nan_;  // TAGC_GPT2_INJECT_NAN (tests)
  std::vector<std::string> resume_notes_;

  CommQueue<Exec> queue_;  // last: its worker is joined first, before the buffers it uses
};

template <class Exec, class Comm>
template <class F>
void DeviceTrainer<Exec, Comm>::agree(const char* what, F&& fn) {
  std::string msg;
  bool failed = false;
  try {
    fn();
  } catch (const std::exception& e) {
    failed = true;
    msg = e.what();
  }
  agree_flag(failed, msg, what);
}

}  // namespace train_device
