#pragma once
// defines: nothing of its own — the stages' name for reducer_arguments.hpp
//          (tagc::reducer_arguments, tagc::adaptive_sparsity, tagc::reduce_op), which
//          lives above stage/ so that the builder's light header can take it.

#include "../reducer_arguments.hpp"
