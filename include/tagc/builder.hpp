#pragma once
// defines: nothing of its own — the reducer builder's light half, for every file
//          that picks a reducer at run time:
//   builder/description.hpp  tagc::reducer_description, describe(), parse_reducer_description()
//   builder/any_reducer.hpp  tagc::AnyReducer<Exec, Comm>, tagc::reducer_catalogue, tagc::build_reducer()
// The heavy half (instantiating reducers) is included by one translation unit only:
//   builder/catalogue.hpp          TAGC_REDUCER_CATALOGUE(name, EXEC, COMM, tagc::reducer_list<...>)
//   builder/default_catalogue.hpp  tagc::default_catalogue<Exec> (31 reducers), TAGC_DEFAULT_REDUCER_CATALOGUE

#include "builder/any_reducer.hpp"
#include "builder/description.hpp"
