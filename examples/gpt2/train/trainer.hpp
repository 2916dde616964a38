// trainer.hpp: the sharded (FSDP FULL_SHARD) GPT-2 training step on one rank, written
// once over an execution space and a tagc communicator:
//   Trainer<tagc::exec::host, tagc::mpi_communicator>   tagc-gpt2 (trainer_host.cpp), and
//                                                       the tests (HostTrainer)
//   Trainer<tagc::exec::cuda, tagc::nccl_communicator>  tagc-gpt2-cuda, one rank per GPU
//                                                       (trainer_cuda.cu)
// Definitions in trainer_impl.hpp (and trainer_auto_impl.hpp), instantiated once per
// (Exec, Comm) in those two files. Every buffer lives in Exec memory.
//
// The model is gpt2::DeviceModel<Exec> (gpt2/device_model.hpp), one source for both
// spaces; gpt2::Model<float> is the tests' reference only.
//
// Per micro-batch, on the compute thread:
//   forward:  for each unit u: wait for its all-gather (enqueued one unit ahead), run it
//   head:     loss, dlogits (the LM head is tied to wte: unit 0 stays gathered)
//   backward: for each unit u from last to first: wait for its all-gather (enqueued one
//             unit ahead; skipped with --zero2, which keeps the forward's copies), run its
//             backward into the unit's gradient buffer, then - on the last micro-batch -
//             enqueue its reduce-scatter, which overlaps the backward of the next unit.
// After the last unit: wait for the worker, global grad norm (one all-reduce of a
// double), clip, sharded AdamW over the owned shards only.
//
// On one rank nothing is exchanged (local_): the "gathered" parameters are the owned
// buffer itself, and a segment whose reduce-scatter would be a plain fp32 copy is not
// run (its gradient is written straight into the owned shard). Segments with a lossy
// format (tagc compression, the bf16 baseline) still go through their reducer, so a
// 1-rank run trains on what the flags say; --compress none --baseline-dtype fp32 runs
// no collective on the gradient path at all.
//
// --gather-dtype bf16 (FSDP's MixedPrecision(param_dtype=bf16)): each all-gather task
// rounds this rank's fp32 shard to bf16 (tagc::bfloat16, round-to-nearest-even), gathers
// the 16-bit shards (half the bytes) and widens them into the fp32 slot the model reads.
// The master shard, AdamW's m and v and the gradients stay fp32; the update is applied
// to the fp32 master, which is rounded afresh at each gather. On one rank the same
// rounding is done in place of the gather (into a copy), so the numerics do not depend on
// the world size. --save-model gathers the fp32 master, not the rounded copy.
//
// --ranks-per-node K > 1 (issue 33): the gradients reduce in two levels (plain inside the
// node, then across nodes: unit_reducer.hpp) and the parameters gather in two levels, the
// reverse (across nodes first, then inside the node: tagc::TwoLevelAllGather, bit for bit
// a flat gather's result), so per rank (M - 1) / (W - 1) of a flat gather's bytes cross
// nodes (M nodes, W ranks). The step log counts both: grad_bytes(_internode) and
// param_bytes(_internode).
//
// Every collective is a task of a CommQueue (comm_queue.hpp): one worker thread issues
// them in enqueue order, so all ranks see the same sequence; on a GPU they run on a side
// stream ordered against the model stream by events, so the host never waits for a
// collective inside the step. Gathered parameters live in two rotating slots (units of
// equal parity share one; unit 0 has its own, as it is needed again by the head):
// that is the "free after use" of FULL_SHARD.
//
// A step whose loss or reduced gradient is not finite stops before the update
// (step_checks.hpp), with the same message on every rank (train::AgreedError).
//
// Errors: std::runtime_error (with tagc's status text where it comes from tagc);
// train::CollectiveTimeout when a collective passed --collective-timeout (watchdog.hpp).
#pragma once

#include "args.hpp"
#include "auto_select.hpp"
#include "checkpoint.hpp"
#include "checkpoint_store.hpp"
#include "comm_queue.hpp"
#include "fault_injection.hpp"
#include "model_config.hpp"
#include "param_gathers.hpp"
#include "sharding.hpp"
#include "unit_reducer.hpp"

#include "tagc/core/bfloat16.hpp"

#include "data_loader.hpp"
#include "gpt2/config.hpp"
#include "gpt2/device_model.hpp"
#include "tagc/comm/counting.hpp"
#include "tagc/comm/mpi.hpp"
#include "tagc/exec/host.hpp"

#include <thrust/memory.h>

#include <array>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace train {

// Compression statistics of one compressed segment for one step.
struct SegmentStats {
  std::string unit;
  int segment = 0;  // 0 prefix, 1 suffix
  tagc::reduce_stats stats;
};

struct StepMetrics {
  int step = 0;             // 1-based, after the update
  double loss = 0.0;        // mean over ranks and micro-batches
  double lr = 0.0;
  double grad_norm = 0.0;   // before clipping
  double step_ms = 0.0;
  double compute_ms = 0.0;  // step time the compute thread was not blocked on the worker
  double comm_ms = 0.0;     // time the worker spent inside collectives (overlapped or not)
  double wait_ms = 0.0;     // time the compute thread was blocked on the worker
  // ... of comm_ms, the worker's time in this step's gradient reductions (codec included) and
  // in its parameter gathers: a FIFO worker cannot say which task a wait waited for, so these
  // bound the wait for each (on a device space they time the enqueueing, not the transfer)
  double grad_comm_ms = 0.0, param_comm_ms = 0.0;
  double grad_bytes = 0.0;  // bytes this rank sent for gradient reductions (ring model)
  // ... of which to ranks of other nodes (--ranks-per-node; 1: every rank its own node, all of it)
  double grad_bytes_internode = 0.0;
  // ... over every rank: the mean and the largest (a routed index's hot-shard owner sends
  // less and receives more than the others)
  double grad_bytes_internode_mean = 0.0, grad_bytes_internode_max = 0.0;
  // bytes this rank sent for parameter all-gathers this step (forward, and backward's
  // re-gathers without --zero2), and of those to ranks of other nodes (as above)
  double param_bytes = 0.0, param_bytes_internode = 0.0;
  tagc::traffic traffic;    // bytes/calls/seconds by collective kind, this step
  std::vector<SegmentStats> compression;  // this rank's shards
  // Over every rank's shards of the compressed segments: support, support / sketch
  // cells (peeling is exact below ~0.81), entries peeling left unresolved, carried.
  double all_support = 0, all_load = 0, all_unresolved = 0, all_pending = 0;
  long tokens = 0;          // tokens processed by all ranks this step
  bool stop_requested = false;  // SIGTERM/SIGINT reached some rank (stop_signal.hpp), agreed
};

template <class Exec, class Comm>
class Trainer {
 public:
  template <class T>
  using vector = typename Exec::template vector<T>;
  // Every collective goes through the byte-counting decorator (the step's traffic).
  using Counted = tagc::counting_communicator<Comm>;

  // model: the space of the model's compute; side: the space of the collectives and the
  // reducers' kernels (two distinct streams on a GPU; {} and {} on the host). A
  // communicator with a compute stream (NCCL) is pointed at the side stream. Every rank
  // constructs together (the data check agrees across ranks). `comm` outlives the trainer.
  Trainer(const Args& args, Comm& comm, Exec model = {}, Exec side = {});
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  int rank() const { return plan_.rank(); }
  int world() const { return plan_.world(); }
  int step() const { return step_; }
  // Nodes the gradients are compressed across (--ranks-per-node; flat: every rank its own).
  int nodes() const { return shape_.nodes; }
  const gpt2::Config& config() const { return cfg_; }
  size_t num_parameters() const;
  // --compress auto: the per-segment decision (measured, or from --resume's checkpoint);
  // null for the other modes.
  const AutoPlan* auto_plan() const { return auto_ ? &*auto_ : nullptr; }
  // Per segment (unit by unit, prefix then suffix): path_none / path_plain / path_tagc.
  std::vector<uint8_t> segment_paths() const;

  // --- setup (every rank calls these together; a failure on any rank throws on all) ---
  void init_from_seed();
  void init_from_llmc(const std::string& path);
  // checkpoint_store.hpp: a step directory, kept --keep-checkpoints deep. Returns "" when
  // saved, or why the divergence guard (--guard-param-max) did not save it.
  std::string save_checkpoint(const std::string& dir);
  // Before the first save into dir (after init or resume): refuses a directory holding
  // another run's steps, records this run as its owner (checkpoint_store.hpp).
  void claim_checkpoint_dir(const std::string& dir);
  // The run's identity: drawn at a fresh start (the first save or claim), taken from the
  // checkpoint on --resume.
  uint64_t run_id();
  // The newest complete step of dir (or dir itself if it is a step directory).
  void load_checkpoint(const std::string& dir);
  // What load_checkpoint skipped or found changed (damaged steps, changed flags).
  const std::vector<std::string>& resume_notes() const { return resume_notes_; }

  // --- training -----------------------------------------------------------------------
  StepMetrics train_step();
  double evaluate(int batches);  // mean val loss over `batches` global batches
  // Global batches in one pass over the validation data (more would repeat some).
  uint64_t val_batches_available() const { return val_loader_ ? val_loader_->total_batches() : 0; }
  // The loss of each of the `batches` x world() validation batches (rank-major), on every rank.
  std::vector<double> evaluate_batches(int batches);
  // All units gathered into the flat (llm.c-convertible) layout, on the host of every rank.
  std::vector<float> gather_model();

  // Run `fn` on every rank; if it throws on any, throw AgreedError on all (so no rank is
  // left in a collective). The message is the local one, or names the ranks that failed.
  template <class F>
  void agree(const char* what, F&& fn);

 private:
  using Ticket = typename CommQueue<Exec>::Ticket;

  // One row of the segment table: a unit's prefix or suffix, and what the step does with it.
  struct SegmentState {
    const Segment* layout = nullptr;  // where it lies in the unit and in the owned buffers
    std::string name;                 // "<unit>/prefix" or "<unit>/suffix", for messages
    uint8_t path = path_none;         // path_none / path_plain / path_tagc
    // 1 rank, plain fp32: its reduce-scatter would be a copy, so it has no reducer and the
    // gradient is copied into the owned shard (see above)
    bool local = false;
    std::unique_ptr<UnitReducer<Exec, Counted>> reducer;  // null: no collective (none or local)
    tagc::reduce_stats stats;                             // of its last reduce (the worker writes it)
    bool compressed() const { return reducer && reducer->compressed(); }
    bool carries_state() const { return reducer || local; }  // one reducer state in a checkpoint
  };
  // A unit's gradient and its two segments.
  struct UnitState {
    // the full-unit gradient, accumulated over micro-batches: in grad_store, or (1 rank, no
    // reducer on the unit) straight in grad_shard_, where the owned shard is the unit
    std::span<float> grad;
    vector<float> grad_store;
    bool reduced = false;  // the gradient goes through a task of the worker
    std::array<SegmentState, 2> seg;  // [0] compressible prefix, [1] plain suffix
  };

  // The constructor's steps, in order.
  void allocate_batches();
  void open_data();
  void allocate_shards();
  void choose_paths();
  void refuse_index_carries(const CompressOptions& co) const;
  void allocate_gradients(const CompressOptions& co);
  void build_reducers(const CompressOptions& co);

  // This rank's checkpoint header for this run (checkpoint.hpp): where its file belongs;
  // the run's identity for a resume is config_json(args_), which the manifest records.
  CheckpointHeader file_header() const { return run_header(cfg_, args_, world(), rank(), plan_.owned_size()); }
  float lr_at(int step) const;
  float* gathered(int u);
  // master: gather the fp32 master values even with --gather-dtype bf16|int8 (--save-model)
  Ticket enqueue_gather(int u, bool master = false);
  // What a gather moves: the fp32 values, bf16-rounded ones or int8 blocks (--gather-dtype).
  enum class GatherCode { fp32, bf16, int8 };
  // One segment of a unit into dst (the worker's side of enqueue_gather): flat or in two levels.
  tagc::status gather_segment(const Segment& g, float* dst, GatherCode code);
  void enqueue_reduce(int u);
  double forward(const int32_t* inputs, const int32_t* targets);
  void check(const tagc::status& s, const char* what) const;
  // Sums `values` (host) over ranks in place, through Exec memory (NCCL needs device memory).
  void all_reduce_sum(std::span<double> values);
  double all_reduce_sum(double x);
  RankGroup rank_group();
  void decide_auto();  // trainer_auto_impl.hpp: measure, fill auto_ and the segments' paths
  void split_levels();  // --ranks-per-node: levels_ and shape_
  void plan_gathers();  // --ranks-per-node: gathers_
  // Bytes sent so far: on comm_, or on the two levels (internode_only: the cross level).
  // A task's gradient or parameter bytes are the difference across it (the worker runs
  // one task at a time).
  double bytes_sent(bool internode_only) const;
  // comm_'s counters plus the two levels' (what this rank sent in all)
  tagc::traffic all_counters() const;
  double sum_of_squares(const float* x, size_t n) const;
  template <class T>
  static T* raw(vector<T>& v) {
    return thrust::raw_pointer_cast(v.data());
  }

  Args args_;
  gpt2::Config cfg_;
  Counted comm_;
  ShardPlan plan_;
  Exec model_exec_;
  bool local_ = false;        // world 1: no gathers
  std::unique_ptr<gpt2::DeviceModel<Exec>> model_;
  std::unique_ptr<gpt2::DataLoader> train_loader_, val_loader_;

  // owned flat buffers (ShardPlan::owned_size each)
  vector<float> params_, grad_shard_, m_, v_;
  std::vector<UnitState> units_;  // the segment table, unit by unit
  std::vector<vector<float>> gather_bufs_;  // gathered parameters, see gathered()
  // --gather-dtype bf16: the rounded shard of one segment and the gathered 16-bit segment
  // (used by the worker only, one task at a time); on one rank the rounded model instead
  bool gather_bf16_ = false;
  vector<tagc::bfloat16> gather_send16_, gather_recv16_;
  // --gather-dtype int8: the coded shard of one segment and the gathered pieces
  // (tagc/int8_blocks.hpp); on one rank the coded segment, decoded into the rounded model
  bool gather_int8_ = false;
  vector<std::uint8_t> gather_send8_, gather_recv8_;
  vector<float> local_rounded_;
  // --ranks-per-node K > 1: the node and cross communicators (split from comm) and their
  // byte-counting views, which the segments' two-level reducers use
  tagc::node_shape shape_{};
  std::unique_ptr<tagc::two_level_communicator<Comm>> levels_raw_;
  std::unique_ptr<tagc::two_level_communicator<Counted>> levels_;
  std::unique_ptr<ParamGathers<Exec>> gathers_;  // with levels_: the parameters' two-level gathers
  std::optional<AutoPlan> auto_;
  std::vector<int32_t> inputs_, targets_;  // host: the loader fills these
  vector<int> dev_inputs_, dev_targets_;   // ... copied here on a device space
  vector<double> scratch_;                 // all_reduce_sum's in and out halves
  // written by the worker, read after wait_all
  double grad_bytes_ = 0.0, grad_bytes_internode_ = 0.0, param_bytes_ = 0.0, param_bytes_internode_ = 0.0;
  double grad_comm_s_ = 0.0, param_comm_s_ = 0.0;  // the worker's seconds in reductions and gathers
  int step_ = 0;
  uint64_t rng_state_ = 0;
  double last_loss_ = 0.0, last_norm_ = 0.0;  // of the last step (a save refuses non-finite)
  std::optional<fault::NanAt> inject_nan_;    // TAGC_GPT2_INJECT_NAN (tests)
  std::vector<std::string> resume_notes_;
  uint64_t run_id_ = 0;  // 0 until drawn or resumed

  CommQueue<Exec> queue_;  // last: its worker is joined first, before the buffers it uses
};

// The CPU instantiation (trainer_host.cpp): tagc-gpt2 and the tests.
using HostTrainer = Trainer<tagc::exec::host, tagc::mpi_communicator>;

template <class Exec, class Comm>
template <class F>
void Trainer<Exec, Comm>::agree(const char* what, F&& fn) {
  RankGroup g = rank_group();
  agree_all(g, what, std::forward<F>(fn));  // checkpoint_store.hpp: one verdict, the failed ranks named
}

}  // namespace train
