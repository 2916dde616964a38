// The builder's run-time side: descriptions (description_text / parse / normalize), refusals
// that name what is missing and what the catalogue has, and the erased reducer's
// contract where it differs by kind (plain reducers have no theta, no residual).
// The per-entry equality with the directly-typed reducers: test_builder_{paper,beyond}.cpp.
#include <doctest/doctest.h>

#include <string>
#include <vector>
#include <type_traits>

#include <tagc/builder.hpp>
#include <tagc/builder/default_catalogue.hpp>
#include <tagc/builder/description_of.hpp>

#include "builder/catalogues.hpp"
#include "support/harness.hpp"

using namespace tagc;

namespace {
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
using any_local = AnyReducer<exec::host, local_communicator>;
}  // namespace

TEST_CASE("packed reducers need no decode policy") {
  using P = Reducer<SparsifyPolicy, ExactIndexPolicy, PackedBf16Policy>;
  static_assert(std::is_same_v<P, PackedReducer<SparsifyPolicy, ExactIndexPolicy, PackedBf16Policy>>);
  static_assert(description_of<P>().values == values_kind::packed_bf16);
  static_assert(description_of<P>().index_bits == index_auto);
  CHECK(description_text(description_of<P>()) == "values=packed-bf16 index=exact exchange=all-reduce residual=float");
}

TEST_CASE("index=shared: the shared-index reducer's description, parsed back; only packed fp32/bf16 values") {
  using S = Reducer<SparsifyPolicy, SharedIndexPolicy, PackedBf16Policy>;
  static_assert(description_of<S>().index_bits == index_shared);
  CHECK(description_text(description_of<S>()) == "values=packed-bf16 index=shared exchange=all-reduce residual=float");
  reducer_description back;
  REQUIRE(parse_reducer_description("values=packed index=shared theta=0.99", back).ok());
  CHECK(back.index_bits == index_shared);
  CHECK(back.values == values_kind::packed);
  CHECK(check_description(back).ok());
  for (values_kind v : {values_kind::sketch, values_kind::packed_fp16}) {
    back.values = v;
    const status s = check_description(back);
    CHECK_FALSE(s.ok());
    CHECK(contains(s.message(), "index=shared sends packed fp32 or bf16 values"));
  }
  // Both are in the default catalogue.
  const auto catalogue = tagc_test::default_local_catalogue();
  back.values = values_kind::packed_bf16;
  CHECK(catalogue.contains(back));
  back.values = values_kind::packed;
  CHECK(catalogue.contains(back));
}

TEST_CASE("index=gathered: every rank's own top-k, all-gathered, described and parsed back; only packed fp32/bf16 values") {
  using P = Reducer<SparsifyPolicy, GatheredIndexPolicy, PackedBf16Policy>;
  static_assert(description_of<P>().index_bits == index_gathered);
  CHECK(description_text(description_of<P>()) == "values=packed-bf16 index=gathered exchange=all-reduce residual=float");
  reducer_description back;
  REQUIRE(parse_reducer_description("values=packed-bf16 index=gathered theta=0.95", back).ok());
  CHECK(back.index_bits == index_gathered);
  CHECK(check_description(back).ok());
  CHECK(tagc_test::default_local_catalogue().contains(back));
  back.values = values_kind::sketch;
  CHECK(contains(check_description(back).message(), "index=gathered sends packed fp32 or bf16 values"));
}

TEST_CASE("index=pooled: the pooled-index reducer's description, parsed back; only packed fp32/bf16 values") {
  using P = Reducer<SparsifyPolicy, PooledIndexPolicy, PackedPolicy>;
  static_assert(description_of<P>().index_bits == index_pooled);
  CHECK(description_text(description_of<P>()) == "values=packed index=pooled exchange=all-reduce residual=float");
  reducer_description back;
  REQUIRE(parse_reducer_description("values=packed-bf16 index=pooled theta=0.95", back).ok());
  CHECK(back.index_bits == index_pooled);
  CHECK(check_description(back).ok());
  const auto catalogue = tagc_test::default_local_catalogue();
  CHECK(catalogue.contains(back));
  back.values = values_kind::packed;
  CHECK(catalogue.contains(back));
  back.values = values_kind::sketch;
  const status s = check_description(back);
  CHECK(contains(s.message(), "index=pooled sends packed fp32 or bf16 values"));
}

TEST_CASE("one name table per choice: every name parses back; a policy's kind is found by family and wire type") {
  for (const values_row& row : values_kinds) {
    values_kind back{};
    CHECK(parse_name(row.name, back));
    CHECK(back == row.value);
    CHECK(to_string(row.value) == row.name);
    CHECK(is_sketch(row.value) + is_packed(row.value) + is_plain(row.value) == 1);
    reducer_description d;
    d.values = row.value;
    d.index_bits = is_packed(row.value) ? index_auto : d.index_bits;
    reducer_description parsed;
    REQUIRE(parse_reducer_description(description_text(d), parsed).ok());
    CHECK(parsed.values == row.value);
  }
  static_assert(description_of<Reducer<SparsifyPolicy, IndexPolicy<1>, SketchFp16Policy<10>>>().values ==
                values_kind::sketch_fp16);
  static_assert(description_of<Reducer<SparsifyPolicy, ExactIndexPolicy, PackedFp16Policy>>().values ==
                values_kind::packed_fp16);
  static_assert(description_of<PlainReducer<bfloat16>>().values == values_kind::plain_bf16);
  static_assert(wire_of(values_kind::packed_fp16) == wire_type::fp16 && family_of(values_kind::plain_fp32) == values_family::plain);
  CHECK(name_choices<decode_mode>() == "peel|estimate|peel-estimate");
  CHECK(name_choices<values_kind>([](values_kind v) { return is_packed(v); }) == "packed|packed-bf16|packed-fp16");
  decode_mode m{};
  CHECK_FALSE(parse_name("peel_then_estimate", m));  // the enum's spelling is not a name
  CHECK(to_string(static_cast<residual_kind>(7)) == "?");
}

namespace {
constexpr bool packed_only(const reducer_description& d) { return is_packed(d.values); }
template <class... R>
constexpr std::size_t count_of(reducer_list<R...>) {
  return sizeof...(R);
}
}  // namespace

TEST_CASE("reducer_list_where: a catalogue's subset by a rule on the descriptions, in the list's order") {
  using packed = reducer_list_where<default_catalogue<exec::host>, packed_only>;
  // fp32, bf16, fp16 with the exact index; fp32, bf16 with the shared one, the pooled one and
  // the pooled one with own values (gathered) and the routed one
  static_assert(count_of(packed{}) == 11);
  const std::vector<reducer_description> d = descriptions_of(packed{});
  REQUIRE(d.size() == 11);
  for (const reducer_description& x : d) CHECK(is_packed(x.values));
  CHECK(d.front().values == values_kind::packed);
  CHECK(d[4].index_bits == index_shared);
  CHECK(d[6].index_bits == index_pooled);
  CHECK(d[8].index_bits == index_gathered);
  CHECK(d.back().index_bits == index_routed);
}

TEST_CASE("description_text prints only the fields that apply; parse reads it back") {
  reducer_description d;
  CHECK(description_text(d) == "values=sketch ratio=10 index=4 exchange=all-reduce decoder=peel-estimate residual=float");
  d.values = values_kind::plain_bf16;
  d.ratio = 4;
  d.index_bits = 1;
  CHECK(description_text(d) == "values=plain-bf16");
  reducer_description back;
  REQUIRE(parse_reducer_description(description_text(d), back).ok());
  CHECK(back == normalized(d));
  CHECK(back != d);  // the fields a plain reducer does not have were reset

  REQUIRE(parse_reducer_description("index=exact,values=sketch-fp16  exchange=reduce-scatter lanes=512", back).ok());
  CHECK(back.values == values_kind::sketch_fp16);
  CHECK(back.index_bits == index_auto);
  CHECK(back.lanes == 512);
  CHECK(description_text(back) ==
        "values=sketch-fp16 ratio=10 lanes=512 index=exact exchange=reduce-scatter decoder=peel-estimate residual=float");
}

TEST_CASE("parse refuses unknown keys and values, naming them and the choices") {
  reducer_description d;
  status s = parse_reducer_description("values=topk", d);
  CHECK(s.code() == errc::invalid_argument);
  CHECK(contains(s.message(), "values=topk"));
  CHECK(contains(s.message(), "sketch|sketch-bf16|sketch-fp16|packed|packed-bf16|packed-fp16|plain-fp32|plain-bf16"));
  s = parse_reducer_description("values=sketch colour=red", d);
  CHECK(contains(s.message(), "unknown key 'colour'"));
  s = parse_reducer_description("index=3", d);
  CHECK(contains(s.message(), "1|2|4|8|exact"));
  s = parse_reducer_description("ratio", d);
  CHECK(contains(s.message(), "not key=value"));
}

TEST_CASE("build_reducer refuses what no reducer can be, and what the catalogue lacks") {
  const auto catalogue = tagc_test::default_local_catalogue();
  CHECK(catalogue.entries().size() == 39);
  any_local r;
  reducer_description d;
  d.ratio = 3;
  status s = build_reducer(catalogue, d, r);
  CHECK(s.code() == errc::invalid_argument);
  CHECK_FALSE(r.built());
  // names the request, the field the closest entries differ in, and what they have
  CHECK(contains(s.message(), "no reducer 'values=sketch ratio=3 index=4 exchange=all-reduce decoder=peel-estimate"));
  CHECK(contains(s.message(), "catalogue 'default (test)'"));
  CHECK(contains(s.message(), "ratio=3 (they have 2|4|10)"));
  CHECK(contains(s.message(), "values=plain-fp32"));  // the whole list follows

  d = {};
  d.values = values_kind::packed;
  d.exchange = index_exchange::reduce_scatter;
  s = build_reducer(catalogue, d, r);
  CHECK(contains(s.message(), "packed values need the whole reduced index on every rank"));
  d = {};
  d.exchange = index_exchange::reduce_scatter;
  s = build_reducer(catalogue, d, r);
  CHECK(contains(s.message(), "needs an index exact at any world size"));

  // A catalogue of one part lacks the other's entries.
  const reducer_catalogue<exec::host, local_communicator> paper("paper only", {tagc_test::paper_part()});
  d = {};
  d.values = values_kind::plain_fp32;
  s = build_reducer(paper, d, r);
  CHECK(contains(s.message(), "no reducer 'values=plain-fp32' in catalogue 'paper only'"));
  CHECK(contains(s.message(), "values=plain-fp32 (they have sketch)"));
  REQUIRE(build_reducer(catalogue, d, r).ok());
  CHECK(r.description_text() == "values=plain-fp32");
}

TEST_CASE("fields that do not apply are ignored when building") {
  const auto catalogue = tagc_test::default_local_catalogue();
  reducer_description d;
  d.values = values_kind::packed;
  d.index_bits = index_auto;
  d.ratio = 7;                         // no sketch: no ratio
  d.decoder = decode_mode::estimate;   // nothing to decode
  any_local r;
  REQUIRE(build_reducer(catalogue, d, r).ok());
  CHECK(r.description_text() == "values=packed index=exact exchange=all-reduce residual=float");
}

TEST_CASE("AnyReducer: unbuilt is an error, not a crash; a plain reducer has no theta") {
  any_local none;
  reducer_arguments a;
  a.length = 10;
  CHECK(none.initialize(a).code() == errc::invalid_argument);
  CHECK(none.description_text() == "no reducer");
  CHECK(none.plan() == nullptr);

  const auto catalogue = tagc_test::default_local_catalogue();
  reducer_description d;
  d.values = values_kind::plain_bf16;
  any_local plain;
  REQUIRE(build_reducer(catalogue, d, plain).ok());
  REQUIRE(plain.initialize(a).ok());
  CHECK_FALSE(plain.compressed());
  CHECK(plain.output_size() == 10);
  CHECK(plain.set_sparsity(0.5).code() == errc::invalid_argument);
  CHECK(plain.save_state().empty());
  const std::byte junk[4]{};
  CHECK(plain.load_state(junk).code() == errc::io);

  any_local sketch;
  REQUIRE(build_reducer(catalogue, reducer_description{}, sketch).ok());
  a.length = 100000;
  REQUIRE(sketch.initialize(a).ok());
  CHECK(sketch.compressed());
  REQUIRE(sketch.set_sparsity(0.95).ok());
  CHECK(sketch.sparsity() == 0.95);
  REQUIRE(sketch.plan() != nullptr);
  CHECK(sketch.plan()->length == 100000);
}

TEST_CASE("the run-time knobs (theta, adaptive theta, the warm-up schedule) print, parse back and normalize") {
  reducer_description d;
  d.index_bits = 1;
  d.sparsity = 0.95;
  d.adapt.enabled = true;
  d.adapt.target_load = 0.5;
  d.schedule.warmup_steps = 200;
  d.schedule.shape = schedule_shape::linear;
  d.schedule.start = 0.0;
  const std::string text = description_text(d);
  CHECK(text ==
        "values=sketch ratio=10 index=1 exchange=all-reduce decoder=peel-estimate residual=float theta=0.95 "
        "adaptive-load=0.5 warmup=200 warmup-shape=linear warmup-start=0");
  reducer_description back;
  REQUIRE(parse_reducer_description(text, back).ok());
  CHECK(back == d);
  // A number that does not print in few digits still round-trips exactly.
  d.sparsity = 1.0 - 1.0 / 3.0;
  REQUIRE(parse_reducer_description(description_text(d), back).ok());
  CHECK(back.sparsity == d.sparsity);

  // Knobs do not select a type: the catalogue entry is the same.
  CHECK(type_of(d) == type_of(reducer_description{.index_bits = 1}));
  // An adaptive or schedule setting that is off carries nothing; a plain reducer has no knobs.
  reducer_description off;
  off.schedule.start = 0.3;     // warmup_steps = 0: off
  off.adapt.target_load = 0.4;  // not enabled
  CHECK(normalized(off) == reducer_description{});
  CHECK(description_text(off) == description_text(reducer_description{}));
  d.values = values_kind::plain_fp32;
  CHECK(description_text(d) == "values=plain-fp32");

  CHECK(contains(parse_reducer_description("warmup-shape=cosine", back).message(), "expected warmup-shape=exp|linear"));
  CHECK(contains(parse_reducer_description("theta=0.9x", back).message(), "expected theta=a number"));
  CHECK(contains(parse_reducer_description("warmup=-3", back).message(), "warmup=-3"));
}

TEST_CASE("the description's knobs reach the reducer; set twice to different values is refused") {
  const auto catalogue = tagc_test::default_local_catalogue();
  reducer_arguments a;
  a.length = 1 << 16;
  a.world_size = 1;
  a.name = "mlp.fc";

  // Warm-up from theta = 0.5 over 4 calls: the first call keeps half the entries where the
  // target (the paper's 98.75 % for ratio 10) keeps 1.25 %.
  reducer_description warm;
  warm.schedule.warmup_steps = 4;
  warm.schedule.start = 0.5;
  any_local ramped, at_target;
  REQUIRE(build_reducer(catalogue, warm, ramped).ok());
  REQUIRE(build_reducer(catalogue, reducer_description{}, at_target).ok());
  CHECK(contains(ramped.description_text(), "warmup=4 warmup-shape=exp warmup-start=0.5"));
  REQUIRE(ramped.initialize(a).ok());
  REQUIRE(at_target.initialize(a).ok());
  CHECK(ramped.arguments().schedule == warm.schedule);
  CHECK(at_target.arguments().schedule == sparsity_schedule{});
  std::vector<std::size_t> kept(2);
  status calls[2];
  tagc_test::on_ranks(1, [&](local_communicator& comm) {
    const std::vector<float> g = tagc_test::gradient(a.length, 7, 0, 0);
    std::vector<float> out(ramped.output_size());
    reduce_stats s;
    calls[0] = ramped.reduce_scatter(comm, g, out, &s);
    kept[0] = s.kept;
    calls[1] = at_target.reduce_scatter(comm, g, out, &s);
    kept[1] = s.kept;
  });
  REQUIRE(calls[0].ok());
  REQUIRE(calls[1].ok());
  CHECK(kept[0] >= a.length / 2 - 1);
  CHECK(kept[0] <= a.length / 2 + 1);
  CHECK(kept[1] <= a.length / 50);

  // theta in the description, none in the arguments: the description's.
  reducer_description theta;
  theta.sparsity = 0.9;
  any_local r;
  REQUIRE(build_reducer(catalogue, theta, r).ok());
  REQUIRE(r.initialize(a).ok());
  CHECK(r.sparsity() == 0.9);
  CHECK(r.arguments().sparsity == 0.9);
  // ... the same value in both: fine; different values: refused, naming both.
  a.sparsity = 0.9;
  CHECK(r.initialize(a).ok());
  a.sparsity = 0.8;
  status s = r.initialize(a);
  CHECK(s.code() == errc::invalid_argument);
  CHECK(contains(s.message(), "theta set twice: 0.8 in the reducer arguments, 0.9 in the description"));
  // A knob only in the arguments still applies (the description leaves it at its default).
  any_local from_args;
  REQUIRE(build_reducer(catalogue, reducer_description{}, from_args).ok());
  REQUIRE(from_args.initialize(a).ok());
  CHECK(from_args.sparsity() == 0.8);
  // The reducer judges a knob's value: a warm-up start above the target is refused at initialize.
  a.sparsity = -1.0;
  warm.schedule.start = 0.999;
  REQUIRE(build_reducer(catalogue, warm, r).ok());
  s = r.initialize(a);
  CHECK(s.code() == errc::invalid_argument);
  CHECK(contains(s.message(), "unit 'mlp.fc'"));
  CHECK(contains(s.message(), "above the target"));

  // Adaptive theta steers a sketch's load: refused for packed values when building.
  reducer_description packed_adaptive;
  packed_adaptive.values = values_kind::packed;
  packed_adaptive.index_bits = index_auto;
  packed_adaptive.adapt.enabled = true;
  s = build_reducer(catalogue, packed_adaptive, r);
  CHECK(contains(s.message(), "adaptive theta steers the sketch load"));
}

TEST_CASE("union-bound: a routed index's knob prints, parses back, reaches the reducer; refused on another index") {
  reducer_description d{.values = values_kind::packed_bf16, .index_bits = index_routed};
  d.union_bound = 1.5;
  const std::string text = description_text(d);
  CHECK(contains(text, "index=routed"));
  CHECK(contains(text, " union-bound=1.5"));
  reducer_description back;
  REQUIRE(parse_reducer_description(text, back).ok());
  CHECK(back == d);
  CHECK(type_of(d) == type_of(reducer_description{.values = values_kind::packed_bf16, .index_bits = index_routed}));
  CHECK(contains(parse_reducer_description("union-bound=-1", back).message(), "expected union-bound=a multiple of k"));

  const auto catalogue = tagc_test::default_local_catalogue();
  any_local r;
  REQUIRE(build_reducer(catalogue, d, r).ok());
  reducer_arguments a{.length = 1 << 16, .world_size = 2, .rank = 0, .topo = topology::replicated};
  REQUIRE(r.initialize(a).ok());
  CHECK(r.arguments().union_bound == 1.5);
  a.union_bound = 2.0;  // set twice, differently
  CHECK(contains(r.initialize(a).message(), "union bound set twice: 2 in the reducer arguments, 1.5 in the description"));
  a.union_bound = 0.0;
  a.topo = topology::sharded;  // a reduce-scatter's owners keep their sums: nothing to bound
  CHECK(contains(r.initialize(a).message(), "union_bound"));

  reducer_description exact{.values = values_kind::packed_bf16, .index_bits = index_auto};
  exact.union_bound = 1.0;
  any_local e;
  CHECK(contains(build_reducer(catalogue, exact, e).message(), "union-bound bounds what the owners of a routed index"));
}
