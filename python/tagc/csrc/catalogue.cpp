// defines: tagc_torch::python_catalogue() (catalogue.hpp): every Reducer the Python
//          package instantiates.
//
// The paper's configuration and its 4-bit index and 4x variants, the bf16 sketch
// cells, and packed union values in fp32 (exact: at theta = 0 it equals a dense
// all-reduce, the tests' anchor), bf16 (best measured on the GPT-2 trainer,
// docs/results.md "Time to quality") and fp16; and the plain fp32 reduction that
// units below TagcState's min_compress_numel take. Adding one: a line in the list.

#include "catalogue.hpp"

#include <tagc/builder/catalogue.hpp>
#include <tagc/plain_reducer.hpp>
#include <tagc/policy/decode.hpp>
#include <tagc/policy/index.hpp>
#include <tagc/policy/packed.hpp>
#include <tagc/policy/sketch.hpp>
#include <tagc/policy/sparsify.hpp>

namespace tagc_torch {

using python_reducers = tagc::reducer_list<
    tagc::Reducer<tagc::SparsifyPolicy, tagc::IndexPolicy<1>, tagc::SketchPolicy<10>>,
    tagc::Reducer<tagc::SparsifyPolicy, tagc::IndexPolicy<4>, tagc::SketchPolicy<10>>,
    tagc::Reducer<tagc::SparsifyPolicy, tagc::IndexPolicy<1>, tagc::SketchPolicy<4>>,
    tagc::Reducer<tagc::SparsifyPolicy, tagc::IndexPolicy<1>, tagc::SketchBf16Policy<10>>,
    tagc::PackedReducer<tagc::SparsifyPolicy, tagc::ExactIndexPolicy, tagc::PackedPolicy>,
    tagc::PackedReducer<tagc::SparsifyPolicy, tagc::ExactIndexPolicy, tagc::PackedBf16Policy>,
    tagc::PackedReducer<tagc::SparsifyPolicy, tagc::ExactIndexPolicy, tagc::PackedFp16Policy>,
    tagc::PlainReducer<float>>;

TAGC_REDUCER_CATALOGUE(python_catalogue, tagc::exec::host, counted_comm, python_reducers)

}  // namespace tagc_torch
