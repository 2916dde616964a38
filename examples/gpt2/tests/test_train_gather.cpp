// test_train_gather.cpp: --gather-dtype bf16 (the parameter all-gather in 16 bits, FSDP's
// MixedPrecision(param_dtype=bf16)), under mpiexec with 2 ranks on the tiny model.
//
// What must hold: the model computes with exactly the bf16-rounded fp32 master weights
// (a fp32 run started from those rounded weights gives the same losses and gradient norm
// bit for bit at step 1), the master stays fp32 (--save-model's gather returns it
// unrounded), the gather sends half the bytes, the run learns, 1 rank rounds as 2 ranks
// do, a checkpoint resumes bit-identically and a resume with another --gather-dtype is
// refused. --gather-dtype int8 (the weights in int8 blocks, tagc/int8_blocks.hpp): the
// master stays fp32, the gather sends ~0.51x bf16's bytes, it learns as fp32 does, and a
// checkpoint resumes bit-identically.
#define DOCTEST_CONFIG_IMPLEMENT
#include "train_test_harness.hpp"
#include "trainer_runs.hpp"

#include "trainer.hpp"

#include "gpt2/checkpoint.hpp"
#include "tagc/core/bfloat16.hpp"

#include <cmath>
#include <string>
#include <vector>

using train::Args;
using Trainer = train::HostTrainer;  // the one trainer on exec::host + MPI
// Run, run, check_resume_continues (trainer_runs.hpp); scratch, tiny, world_rank (train_test_harness.hpp)
using namespace train_test;
using tagc::collective;

namespace {

Args g16(Args a) {
  a.gather_dtype = "bf16";
  return a;
}

Args g8(Args a) {
  a.gather_dtype = "int8";
  return a;
}

// A TAGC run gathering in `saved` resumes bit-identically from its checkpoint, and a resume
// gathering in `other` is refused, naming both.
void check_resume_and_refusal(const char* saved, const char* other) {
  Args a = tiny(2, 6);
  a.gather_dtype = saved;
  a.compress = train::CompressMode::non_attention;
  a.values = tagc::values_kind::packed_bf16;
  a.index_bits = tagc::index_auto;
  const std::string dir = (scratch() / ("ckpt_gather_" + std::string(saved))).string();
  check_resume_continues(a, MPI_COMM_WORLD, 6, 3, dir);
  Args b = a;
  b.gather_dtype = other;
  const std::string refusal = std::string("--gather-dtype: ") + saved + " in the checkpoint, " + other + " in this run";
  CHECK_THROWS_WITH(run(b, MPI_COMM_WORLD, 1, "", dir), doctest::Contains(refusal.c_str()));
}

}  // namespace

TEST_CASE("gather bf16: the model computes with the rounded master weights; the master stays fp32") {
  const Args fp = tiny(2, 4);
  tagc::mpi_communicator mpi(MPI_COMM_WORLD);
  Trainer full(fp, mpi);
  full.init_from_seed();
  const std::vector<float> master = full.gather_model();

  // the initial weights rounded to bf16 (round-to-nearest-even), as an llm.c checkpoint
  std::vector<float> rounded(master.size());
  size_t changed = 0;
  for (size_t i = 0; i < master.size(); ++i) {
    rounded[i] = float(tagc::bfloat16(master[i]));
    changed += rounded[i] != master[i];
  }
  REQUIRE(changed > master.size() / 2);  // the rounding is not a no-op on these weights
  const std::string path = (scratch() / "rounded_init.bin").string();
  if (world_rank() == 0) gpt2::save_checkpoint(path, full.config(), rounded);
  MPI_Barrier(MPI_COMM_WORLD);

  Trainer from_rounded(fp, mpi);  // fp32 gather of the rounded weights
  from_rounded.init_from_llmc(path);
  Trainer half(g16(fp), mpi);  // bf16 gather of the fp32 master weights
  half.init_from_seed();

  CHECK(half.gather_model() == master);  // --save-model: the fp32 master, not the rounded copy
  const std::vector<double> v16 = half.evaluate_batches(2), vr = from_rounded.evaluate_batches(2),
                            v32 = full.evaluate_batches(2);
  CHECK(v16 == vr);  // bit for bit: the same weights reach the model
  CHECK(v16 != v32);

  const train::StepMetrics m16 = half.train_step(), mr = from_rounded.train_step(), m32 = full.train_step();
  CHECK(m16.loss == mr.loss);
  CHECK(m16.grad_norm == mr.grad_norm);
  CHECK(m16.loss != m32.loss);
  // the same all-gathers, each half the bytes (the ring model counts the gathered buffer)
  const auto& a16 = m16.traffic[collective::all_gather];
  const auto& a32 = m32.traffic[collective::all_gather];
  CHECK(a16.calls == a32.calls);
  CHECK(a16.calls > 0);
  CHECK(a16.bytes_sent * 2 == a32.bytes_sent);
  CHECK(m16.grad_bytes == m32.grad_bytes);  // the gradient path is untouched

  // after the update the master moves in fp32: the bf16 run's master is not a bf16 grid
  const std::vector<float> after = half.gather_model();
  size_t off_grid = 0;
  for (float x : after) off_grid += float(tagc::bfloat16(x)) != x;
  CHECK(off_grid > after.size() / 2);
}

TEST_CASE("gather bf16: learns, differs from fp32, the same on 1 rank and with zero2") {
  const int steps = 12;
  const Run r32 = run(tiny(2, steps), MPI_COMM_WORLD, steps);
  const Run r16 = run(g16(tiny(2, steps)), MPI_COMM_WORLD, steps);
  INFO("fp32 " << r32.loss.front() << " -> " << r32.loss.back() << ", bf16 gather " << r16.loss.front() << " -> "
               << r16.loss.back());
  CHECK(r16.loss.back() < r16.loss.front() - 0.5);  // fp32 gather: 10.844 -> 9.949
  size_t differ = 0;
  for (size_t i = 0; i < r16.loss.size(); ++i) {
    differ += r16.loss[i] != r32.loss[i];
    CHECK(r16.loss[i] == doctest::Approx(r32.loss[i]).epsilon(2e-2));  // close: 8 mantissa bits of weight
  }
  CHECK(differ == r16.loss.size());

  // one rank rounds in place of the gather: the 2-rank run's numerics, no all-gather
  const Run self = run(g16(tiny(4, steps)), MPI_COMM_SELF, steps);
  for (size_t i = 0; i < self.loss.size(); ++i) {
    INFO("step " << i + 1);
    CHECK(self.loss[i] == doctest::Approx(r16.loss[i]).epsilon(1e-5));
  }
  {
    tagc::mpi_communicator one(MPI_COMM_SELF);
    Trainer t(g16(tiny(4, 1)), one);
    t.init_from_seed();
    CHECK(t.train_step().traffic[collective::all_gather].calls == 0);
  }
  Args z2 = g16(tiny(2, steps));  // the same lr schedule, 4 of its steps
  z2.zero2 = true;
  const Run rz = run(z2, MPI_COMM_WORLD, 4);
  for (size_t i = 0; i < rz.loss.size(); ++i) CHECK(rz.loss[i] == doctest::Approx(r16.loss[i]).epsilon(1e-6));
}

TEST_CASE("gather bf16: a checkpoint resumes bit-identically; another --gather-dtype is refused") {
  check_resume_and_refusal("bf16", "fp32");
}

TEST_CASE("gather int8: ~0.51x bf16's bytes, the master stays fp32, learns as fp32 does; resumes bit-identically") {
  const Args fp = tiny(2, 4);
  tagc::mpi_communicator mpi(MPI_COMM_WORLD);
  Trainer full(fp, mpi), coded(g8(fp), mpi);
  full.init_from_seed();
  coded.init_from_seed();
  CHECK(coded.gather_model() == full.gather_model());  // --save-model: the fp32 master
  const std::vector<double> v8 = coded.evaluate_batches(2), v32 = full.evaluate_batches(2);
  for (size_t i = 0; i < v8.size(); ++i) {
    CHECK(v8[i] != v32[i]);
    CHECK(v8[i] == doctest::Approx(v32[i]).epsilon(1e-2));
  }
  const train::StepMetrics m8 = coded.train_step(), m32 = full.train_step();
  const auto& a8 = m8.traffic[collective::all_gather];
  const auto& a32 = m32.traffic[collective::all_gather];
  CHECK(a8.calls == a32.calls);
  // 260 bytes a block of 256 values against 1024: 0.254x fp32, more where a short shard pads its last block
  INFO("int8 gather " << a8.bytes_sent << " B, fp32 " << a32.bytes_sent << " B");
  CHECK(a8.bytes_sent >= 0.2539 * a32.bytes_sent);
  CHECK(a8.bytes_sent < 0.3 * a32.bytes_sent);
  CHECK(m8.grad_bytes == m32.grad_bytes);

  const int steps = 12;
  const Run r32 = run(tiny(2, steps), MPI_COMM_WORLD, steps);
  const Run r8 = run(g8(tiny(2, steps)), MPI_COMM_WORLD, steps);
  INFO("fp32 " << r32.loss.front() << " -> " << r32.loss.back() << ", int8 gather " << r8.loss.front() << " -> "
               << r8.loss.back());
  CHECK(r8.loss.back() < r8.loss.front() - 0.5);
  for (size_t i = 0; i < r8.loss.size(); ++i) CHECK(r8.loss[i] == doctest::Approx(r32.loss[i]).epsilon(2e-2));
  {  // one rank codes in place of the gather
    tagc::mpi_communicator one(MPI_COMM_SELF);
    Trainer t(g8(tiny(4, 1)), one);
    t.init_from_seed();
    const train::StepMetrics m = t.train_step();
    CHECK(m.traffic[collective::all_gather].calls == 0);
    CHECK(std::isfinite(m.loss));
  }

  check_resume_and_refusal("int8", "bf16");
}

int main(int argc, char** argv) { return train_test::mpi_doctest_main(argc, argv); }
