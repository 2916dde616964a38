// test_train_values.cpp: the beyond-paper reducer policies in the trainer, under mpiexec
// with 2 ranks, on the tiny model (train_test_harness.hpp).
//
// Every configuration starts from the same seed and batch, so their first steps reduce
// the same gradient: the first step's byte counters must differ exactly by what the
// policy changes (the index exchange, or the width of the packed values), and each run
// must learn. A checkpoint records the policies: a resume with other ones is refused.
#define DOCTEST_CONFIG_IMPLEMENT
#include "train_test_harness.hpp"

#include "trainer.hpp"

#include <string>
#include <vector>

using train::Args;
using train::CompressMode;
using Trainer = train::HostTrainer;  // the one trainer on exec::host + MPI
using train_test::scratch;

namespace {

Args compressed(tagc::values_kind values, int index_bits, tagc::index_exchange exchange, int steps) {
  Args a = train_test::tiny(2, steps);
  a.lr = 3e-3f;
  a.compress = CompressMode::non_attention;
  a.ratio = 10;
  a.values = values;
  a.index_bits = index_bits;
  a.index_exchange = exchange;
  return a;
}

struct Trace {
  std::vector<double> loss;
  train::StepMetrics first;  // step 1: the same gradient in every configuration
};

Trace train_run(const Args& a) {
  tagc::mpi_communicator mpi(MPI_COMM_WORLD);
  Trainer t(a, mpi);
  t.init_from_seed();
  Trace r;
  for (int i = 0; i < a.steps; ++i) {
    const train::StepMetrics m = t.train_step();
    if (i == 0) r.first = m;
    r.loss.push_back(m.loss);
  }
  return r;
}

// The paper's configuration (10x sketch, 1-bit all-reduced index), run once, compared
// with in every case.
const Trace& paper_run() {
  static const Trace t = train_run(compressed(tagc::values_kind::sketch, 1, tagc::index_exchange::all_reduce, 8));
  return t;
}

void check_learns(const Trace& r, const char* what) {
  INFO(what << ": first loss " << r.loss.front() << ", last " << r.loss.back());
  CHECK(r.loss.back() < r.loss.front() - 0.5);
}

// Sum over this rank's compressed segments of one reduce_stats field.
template <class F>
double sum_segments(const train::StepMetrics& m, F field) {
  double s = 0;
  for (const auto& seg : m.compression) s += double(field(seg.stats));
  return s;
}

}  // namespace

TEST_CASE("gpt2_train values: exact index, reduce-scattered, sends half the index bytes of the paper's") {
  const int steps = 8;
  const Trace& paper = paper_run();
  const Trace scattered =
      train_run(compressed(tagc::values_kind::sketch, tagc::index_auto, tagc::index_exchange::reduce_scatter, steps));
  check_learns(paper, "paper (10x, 1-bit all-reduce)");
  check_learns(scattered, "exact index, reduce-scatter");
  REQUIRE(paper.first.compression.size() == scattered.first.compression.size());
  REQUIRE(!paper.first.compression.empty());
  for (size_t i = 0; i < paper.first.compression.size(); ++i) {
    const auto& p = paper.first.compression[i].stats;
    const auto& s = scattered.first.compression[i].stats;
    INFO("segment " << paper.first.compression[i].unit << "/" << paper.first.compression[i].segment);
    CHECK(s.index_bits == 1);  // exact at 2 ranks is the repaired 1-bit index
    CHECK(s.exact_index);
    CHECK(s.index_bytes == doctest::Approx(p.index_bytes / 2));  // ring: reduce-scatter = half an all-reduce
    CHECK(s.value_bytes == doctest::Approx(p.value_bytes));
  }
  // the trainer's byte counter (the communicator's) sees exactly that saving
  const double saved = sum_segments(scattered.first, [](const auto& s) { return s.index_bytes; });
  CHECK(saved > 0);
  CHECK(paper.first.grad_bytes - scattered.first.grad_bytes == doctest::Approx(saved));
}

TEST_CASE("gpt2_train values: packed values send the union, bf16 half of it, and both learn") {
  const int steps = 8;
  const Trace& paper = paper_run();
  const Trace packed = train_run(compressed(tagc::values_kind::packed, tagc::index_auto, tagc::index_exchange::all_reduce, steps));
  const Trace bf16 =
      train_run(compressed(tagc::values_kind::packed_bf16, tagc::index_auto, tagc::index_exchange::all_reduce, steps));
  check_learns(packed, "packed");
  check_learns(bf16, "packed-bf16");
  REQUIRE(packed.first.compression.size() == paper.first.compression.size());
  REQUIRE(bf16.first.compression.size() == paper.first.compression.size());
  const double world = 2;
  for (size_t i = 0; i < packed.first.compression.size(); ++i) {
    const auto& p = paper.first.compression[i].stats;
    const auto& f = packed.first.compression[i].stats;
    const auto& h = bf16.first.compression[i].stats;
    INFO("segment " << packed.first.compression[i].unit << "/" << packed.first.compression[i].segment);
    CHECK(f.index_bytes == doctest::Approx(p.index_bytes));  // the same 1-bit index at 2 ranks
    CHECK(f.packed_slots > 0);
    CHECK(h.packed_slots == f.packed_slots);  // the same union
    // one value per slot and shard, reduce-scattered: (N-1) x slots values per rank
    CHECK(f.value_bytes == doctest::Approx((world - 1) * double(f.packed_slots) * 4));
    CHECK(h.value_bytes == doctest::Approx((world - 1) * double(h.packed_slots) * 2));
  }
  // at theta = 98.75 % the union (<= 2.5 % of the entries) is far below the sketch's n/10 cells
  const auto values = [](const auto& s) { return s.value_bytes; };
  CHECK(sum_segments(packed.first, values) < 0.5 * sum_segments(paper.first, values));
  CHECK(packed.first.grad_bytes < paper.first.grad_bytes);
  CHECK(packed.first.grad_bytes - bf16.first.grad_bytes ==
        doctest::Approx(sum_segments(packed.first, values) / 2));
}

TEST_CASE("gpt2_train values: 16-bit sketch cells send half the value bytes of the paper's, and learn") {
  const int steps = 8;
  const Trace& paper = paper_run();
  for (const tagc::values_kind v : {tagc::values_kind::sketch_bf16, tagc::values_kind::sketch_fp16}) {
    const Trace half = train_run(compressed(v, 1, tagc::index_exchange::all_reduce, steps));
    INFO("--values " << std::string(tagc::to_string(v)));
    check_learns(half, std::string(tagc::to_string(v)).c_str());
    REQUIRE(half.first.compression.size() == paper.first.compression.size());
    for (size_t i = 0; i < half.first.compression.size(); ++i) {
      const auto& p = paper.first.compression[i].stats;
      const auto& h = half.first.compression[i].stats;
      INFO("segment " << half.first.compression[i].unit << "/" << half.first.compression[i].segment);
      CHECK(h.index_bytes == doctest::Approx(p.index_bytes));
      CHECK(h.value_bytes == doctest::Approx(p.value_bytes / 2));  // the same cells, 2 bytes each
    }
    // the trainer's counter sees what the reducers account for: half the value bytes
    // (fp16 adds a few bytes per call to agree on its range scale)
    const auto total = [](const auto& s) { return s.total_bytes(); };
    const double saved = sum_segments(paper.first, total) - sum_segments(half.first, total);
    CHECK(paper.first.grad_bytes - half.first.grad_bytes == doctest::Approx(saved));
    const auto values = [](const auto& s) { return s.value_bytes; };
    CHECK(saved == doctest::Approx(sum_segments(paper.first, values) / 2).epsilon(0.01));
  }
}

TEST_CASE("gpt2_train values: the checkpoint records the policies; a resume with others is refused") {
  const std::string dir = (scratch() / "ckpt_values").string();
  Args packed = compressed(tagc::values_kind::packed, tagc::index_auto, tagc::index_exchange::all_reduce, 2);
  {
    tagc::mpi_communicator mpi(MPI_COMM_WORLD);
    Trainer t(packed, mpi);
    t.init_from_seed();
    t.train_step();
    t.save_checkpoint(dir);
  }
  const auto resume = [&](const Args& a) {
    tagc::mpi_communicator mpi(MPI_COMM_WORLD);
    Trainer t(a, mpi);
    t.load_checkpoint(dir);
    return t.step();
  };
  CHECK(resume(packed) == 1);
  Args bf16 = packed;
  bf16.values = tagc::values_kind::packed_bf16;
  CHECK_THROWS_WITH(resume(bf16), doctest::Contains("--values: packed in the checkpoint, packed-bf16 in this run"));
  Args sketch = compressed(tagc::values_kind::sketch, tagc::index_auto, tagc::index_exchange::reduce_scatter, 2);
  CHECK_THROWS_WITH(resume(sketch), doctest::Contains("--values: packed in the checkpoint, sketch in this run"));

  const std::string dir2 = (scratch() / "ckpt_exchange").string();
  {
    tagc::mpi_communicator mpi(MPI_COMM_WORLD);
    Trainer t(sketch, mpi);
    t.init_from_seed();
    t.train_step();
    t.save_checkpoint(dir2);
  }
  Args all_reduce = compressed(tagc::values_kind::sketch, 1, tagc::index_exchange::all_reduce, 2);
  tagc::mpi_communicator mpi(MPI_COMM_WORLD);
  Trainer t(all_reduce, mpi);
  CHECK_THROWS_WITH(t.load_checkpoint(dir2), doctest::Contains("--index-bits: exact in the checkpoint, 1 in this run"));
}

// The command line refuses a ratio outside the catalogue at parse time (test_train_cli.sh);
// a program that fills Args itself gets the builder's refusal from the trainer, on every
// rank (the reducer setup agrees), naming the flag.
TEST_CASE("trainer: a reducer the catalogue does not hold is refused with a message") {
  Args b = compressed(tagc::values_kind::sketch, 1, tagc::index_exchange::all_reduce, 1);
  b.ratio = 3;
  tagc::mpi_communicator mpi(MPI_COMM_WORLD);
  CHECK_THROWS_WITH_AS(Trainer(b, mpi), doctest::Contains("--ratio 3"), std::runtime_error);
}

int main(int argc, char** argv) { return train_test::mpi_doctest_main(argc, argv); }
