// main.cpp: tagc-gpt2-cuda (and tagc-gpt2-device-host) — tagc-gpt2's command line with
// "train" run by the device trainer of this build's backend (train_loop.hpp); the other
// commands (prepare, eval, sample, tokenize, help) are tagc-gpt2's own, on the CPU.
// Exit codes as tagc-gpt2: 2 bad command line, 1 anything else.
//
//   mpirun -np 4 build/examples/gpt2/train_device/tagc-gpt2-cuda train --model d12 ...
// defines: main

// defines: train::parse_args, train::usage
#include "args.hpp"
// defines: train::cmd_*
#include "commands.hpp"
// defines: train_device::cmd_train_device, train_device::program_name
#include "train_loop.hpp"

#include <mpi.h>

#include <cstdio>
#include <exception>
#include <string>

int main(int argc, char** argv) {
  const char* name = train_device::program_name();
  train::Args args;
  if (argc >= 2 && train::wants_help(argc, argv))  // "<command> --help": before any flag is judged
    if (const std::string u = train::command_usage(argv[1], name); !u.empty()) {
      std::fputs(u.c_str(), stdout);
      return 0;
    }
  try {
    args = train::parse_args(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n(run '%s help' for the flags)\n", name, e.what(), name);
    return 2;
  }
  if (args.command == "help" || args.command == "--help" || args.command == "-h") {
    std::fputs(train::usage(name).c_str(), stdout);
    return 0;
  }
  if (args.command != "train") {
    try {
      if (args.command == "prepare") return train::cmd_prepare(args);
      if (args.command == "eval") return train::cmd_eval(args);
      if (args.command == "sample") return train::cmd_sample(args);
      if (args.command == "tokenize") return train::cmd_tokenize(args);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s %s: error: %s\n", name, args.command.c_str(), e.what());
      return 1;
    }
    return 2;
  }

  // The communication worker thread issues every collective (and, on the host backend,
  // every MPI call) while training runs, and it is not the thread that initialised MPI:
  // SERIALIZED is the level that allows it.
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "%s: MPI_Init_thread failed\n", name);
    return 1;
  }
  int rc = 1;
  if (provided < MPI_THREAD_SERIALIZED) {
    std::fprintf(stderr, "%s: this MPI provides thread level %d, MPI_THREAD_SERIALIZED is needed\n", name, provided);
  } else {
    try {
      rc = train_device::cmd_train_device(args);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s train: error: %s\n", name, e.what());
      rc = 1;
    }
  }
  MPI_Finalize();
  return rc;
}
