// host_reducers_paper.cpp: the paper part of the trainers' catalogue on exec::host over
// MPI (18 tagc::Reducer types: sketch values, index 1|4, ratio 2|4|10, every decoder).
// Apart from host_reducers_beyond.cpp so the two slow translation units build at once.
// defines: train::host_reducers_paper
#include "reducer_catalogue.hpp"

#include "tagc/builder/default_catalogue.hpp"

namespace train {
TAGC_REDUCER_CATALOGUE(host_reducers_paper, tagc::exec::host, Comm, tagc::default_paper_catalogue<tagc::exec::host>)
}  // namespace train
