# Locates what the headers need: CCCL (Thrust, CUB, libcu++) and OpenMP.
# CCCL ships with the CUDA Toolkit; we only need its headers on the host, so a
# machine without a GPU (or without nvcc) can still build and run everything.
include_guard(GLOBAL)
find_package(OpenMP REQUIRED COMPONENTS CXX)

# find_path caches the result in TAGC_CCCL_INCLUDE_DIR (set it to override).
find_path(TAGC_CCCL_INCLUDE_DIR NAMES thrust/version.h cuda/std/span
          HINTS $ENV{CUDA_HOME}/include/cccl /usr/local/cuda/include/cccl /usr/local/cuda/include
          DOC "Directory holding thrust/, cub/ and cuda/ headers (CCCL)")
if(NOT TAGC_CCCL_INCLUDE_DIR)
  message(FATAL_ERROR "tagc: CCCL headers (thrust/, cub/, cuda/std/) not found. "
                      "Install the CUDA Toolkit or set TAGC_CCCL_INCLUDE_DIR.")
endif()

if(NOT TARGET tagc::cccl)
  add_library(tagc_cccl INTERFACE)
  add_library(tagc::cccl ALIAS tagc_cccl)
  # SYSTEM: CCCL's own warnings are not ours to fix.
  target_include_directories(tagc_cccl SYSTEM INTERFACE ${TAGC_CCCL_INCLUDE_DIR})
  # Host builds use Thrust's OpenMP system as the "device"; nvcc builds keep CUDA.
  target_compile_definitions(tagc_cccl INTERFACE
    $<$<NOT:$<COMPILE_LANGUAGE:CUDA>>:THRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_OMP>)
endif()
