# Enables the CUDA language for the nvcc-built parts (the GPT-2 CUDA model/trainer) and
# defines tagc_cuda_target_options(<target>): the nvcc flags every single-source
# translation unit of this project needs. include() it at file scope (enable_language
# refuses to run inside a function). Compiling needs only the toolkit, never a GPU.
include_guard(GLOBAL)
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES "80;90")  # A100 and H100
endif()
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)  # CUDA::cudart, CUDA::cublas
# NCCL (the CUDA trainer's collectives and the compile check) is looked up once here, at
# the top level; cmake/FindNCCL.cmake makes NCCL::NCCL a GLOBAL imported target.
find_package(NCCL QUIET)
# C++20 for nvcc. CMake learned nvcc's C++20 flag in 3.26 (CMAKE_CUDA_STANDARD 20 fails
# to generate on 3.25, our minimum), so older CMake gets the flag by hand.
if(CMAKE_VERSION VERSION_GREATER_EQUAL 3.26)
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  set(TAGC_CUDA_STD_FLAG "")
else()
  set(TAGC_CUDA_STD_FLAG -std=c++20)
endif()

# --expt-relaxed-constexpr: libcu++ (cuda::std::expected) calls constexpr functions
# from device code. 20011/20014 ("calling a __host__ function from a __host__ __device__
# function") become errors: in a single-source functor that is a kernel calling host
# code, which would compile here and fail only on a GPU.
function(tagc_cuda_target_options target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:${TAGC_CUDA_STD_FLAG} --expt-relaxed-constexpr --diag-error=20011,20014>)
endfunction()
