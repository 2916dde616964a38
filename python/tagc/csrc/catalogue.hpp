#pragma once
// defines: tagc_torch::counted_comm, tagc_torch::any_reducer,
//          tagc_torch::python_catalogue() — the reducers the Python package offers,
//          through the library's runtime builder (tagc/builder/).
//
// TagcState's configuration is turned into a tagc::reducer_description (module.cpp)
// and built from this catalogue; a configuration it lacks is refused by the builder
// with a message naming the closest entries and every entry. The instantiations live
// in catalogue.cpp, which does not include torch: it is the slow translation unit
// (each Reducer costs several seconds), and torch's headers would make it slower.

#include <tagc/builder/any_reducer.hpp>
#include <tagc/comm/counting.hpp>
#include <tagc/exec/host.hpp>

#include "pg_communicator.hpp"

namespace tagc_torch {

using counted_comm = tagc::counting_communicator<pg_communicator>;
using any_reducer = tagc::AnyReducer<tagc::exec::host, counted_comm>;

tagc::reducer_catalogue<tagc::exec::host, counted_comm> python_catalogue();

}  // namespace tagc_torch
