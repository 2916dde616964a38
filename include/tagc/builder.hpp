#pragma once
// defines: nothing of its own — the reducer builder's light half, for every file
//          that picks a reducer at run time:
//   builder/description.hpp  tagc::reducer_description, description_text(), parse_reducer_description()
//   builder/any_reducer.hpp  tagc::AnyReducer<Exec, Comm>, tagc::reducer_catalogue, tagc::build_reducer()
// Light means: no Reducer, stage/, detail/ (kernels) or intrinsics header in its
// include closure (core/, shard/layout.hpp, stats.hpp, reducer_arguments.hpp,
// policy/choices.hpp and policy/sparsity_schedule.hpp only), so a file that includes it
// compiles in a fraction of a second.
// The heavy half (instantiating reducers) is included by one translation unit per
// catalogue part only:
//   builder/catalogue.hpp          TAGC_REDUCER_CATALOGUE(name, EXEC, COMM, tagc::reducer_list<...>)
//   builder/description_of.hpp     tagc::description_of<R>() (a reducer type's description)
//   builder/default_catalogue.hpp  tagc::default_catalogue<Exec> (37 reducers), TAGC_DEFAULT_REDUCER_CATALOGUE

#include "builder/any_reducer.hpp"
#include "builder/description.hpp"
