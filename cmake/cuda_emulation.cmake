# The CUDA emulation build (cuda_emulation/, docs/emulation.md): every .cu
# source compiled as host C++ against cuda_emulation/include (the CUDA
# runtime, cuBLASLt, cub and NCCL as small strict stand-ins), so the CUDA
# backend runs on the CPU without nvcc or a GPU. Included by CMakeLists.txt
# when LLM_CUDA_EMULATION is ON; uses llm_core, llm_interface and
# LLM_CUDA_SOURCES from there. Makes:
#   llm_emulated                  llm_core + the emulated backend (a library like llm)
#   llm_emulated_backend_asan     the emulated backend under AddressSanitizer + UBSan
#   llm_emulated_backend_tsan     the emulated backend under ThreadSanitizer
# The sanitized backends are linked with the plain llm_core: the kernels, the
# emulated streams and libraries are checked, the rest is compiled once.
enable_language(ASM)
file(GLOB LLM_EMULATION_SOURCES CONFIGURE_DEPENDS cuda_emulation/*.cpp cuda_emulation/*.S)

# Each .cu source as a C++ translation unit of the build tree.
set(LLM_EMULATED_CUDA_SOURCES)
foreach(source ${LLM_CUDA_SOURCES})
  file(RELATIVE_PATH relative ${CMAKE_CURRENT_SOURCE_DIR} ${source})
  set(translation_unit ${CMAKE_CURRENT_BINARY_DIR}/emulated/${relative}.cpp)
  file(CONFIGURE OUTPUT ${translation_unit} CONTENT "#include \"${source}\"\n")
  list(APPEND LLM_EMULATED_CUDA_SOURCES ${translation_unit})
endforeach()

# llm_emulated_backend(<name> [extra compile options...])
function(llm_emulated_backend name)
  add_library(${name} OBJECT ${LLM_EMULATED_CUDA_SOURCES} ${LLM_EMULATION_SOURCES})
  target_link_libraries(${name} PUBLIC llm_interface ${CMAKE_DL_LIBS})
  target_include_directories(${name} BEFORE PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/cuda_emulation/include)
  target_compile_definitions(${name} PRIVATE LLM_CUDA_EMULATION=1)
  # Kernels read fp32 and bf16 data through 16-byte packs (as the GPU
  # allows): no strict aliasing. `#pragma unroll` is nvcc's. Launch
  # arguments of types private to a .cu file are captured by lambdas of
  # templates with external linkage, which GCC warns of (harmless here).
  target_compile_options(${name} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wno-unknown-pragmas -fno-strict-aliasing -Wno-subobject-linkage>
    ${ARGN})
endfunction()

llm_emulated_backend(llm_emulated_backend)
add_library(llm_emulated STATIC $<TARGET_OBJECTS:llm_core> $<TARGET_OBJECTS:llm_emulated_backend>)
target_link_libraries(llm_emulated PUBLIC llm_interface ${CMAKE_DL_LIBS})

set(LLM_ASAN_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
set(LLM_TSAN_FLAGS -fsanitize=thread)
llm_emulated_backend(llm_emulated_backend_asan -O1 ${LLM_ASAN_FLAGS})
llm_emulated_backend(llm_emulated_backend_tsan -O1 ${LLM_TSAN_FLAGS})
