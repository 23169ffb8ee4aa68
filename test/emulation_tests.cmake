# The CUDA backend's tests under emulation (label "emulation"), included by
# test/CMakeLists.txt when LLM_CUDA_EMULATION is ON. The same test sources as
# the GPU suites, linked with the emulated backend; the plain CPU suites are
# not run again. Each run is labelled as emulated, never as a GPU result.
#  - every Cuda/ row of the op harness under both scheduling orders
#    (LLM_CUDA_EMULATION_ORDER), so that a missing barrier shows under one;
#  - the same rows once more under AddressSanitizer + UBSan (the kernels and
#    the emulation instrumented; shared memory sized exactly, so an overrun
#    is caught);
#  - the GPU suites (trainer, evaluation, offload and ZenFlow, the transfer
#    queue, generation, the NCCL group) against the CPU backend;
#  - the shared-GPU modes at 2 ranks (NCCL over MPI);
#  - ThreadSanitizer over training steps that use every stream.
set(LLM_EMULATION_ENVIRONMENT OMP_NUM_THREADS=1 GTEST_COLOR=no)

add_executable(llm_op_tests_emulated)
target_link_libraries(llm_op_tests_emulated PRIVATE llm_op_test_objects llm_emulated GTest::gtest_main)
foreach(order forward reverse)
  gtest_discover_tests(llm_op_tests_emulated
    TEST_FILTER "Cuda/*"
    TEST_PREFIX "emulated_${order}."
    NO_PRETTY_VALUES
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    DISCOVERY_TIMEOUT 60
    PROPERTIES LABELS emulation
               ENVIRONMENT "${LLM_EMULATION_ENVIRONMENT};LLM_CUDA_EMULATION_ORDER=${order}")
endforeach()

add_executable(llm_op_tests_asan)
target_link_libraries(llm_op_tests_asan PRIVATE llm_op_test_objects llm_core
  llm_emulated_backend_asan GTest::gtest_main)
target_link_options(llm_op_tests_asan PRIVATE ${LLM_ASAN_FLAGS})
# One process over every row: the rows' own checks still apply, and a
# sanitizer report fails the run.
add_test(NAME emulated_asan_ubsan.op_rows
  COMMAND llm_op_tests_asan --gtest_filter=Cuda/*
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
# COST (see llm_add_mpi_test): the longest test of all, started first.
set_tests_properties(emulated_asan_ubsan.op_rows PROPERTIES LABELS emulation TIMEOUT 600 COST 300
  ENVIRONMENT "${LLM_EMULATION_ENVIRONMENT};ASAN_OPTIONS=detect_leaks=0:abort_on_error=0;UBSAN_OPTIONS=print_stacktrace=1")

add_executable(llm_gpu_tests_emulated)
target_link_libraries(llm_gpu_tests_emulated PRIVATE llm_gpu_test_objects llm_emulated GTest::gtest_main)
# NcclWithoutCuda is the CPU-only build's check (it skips in any CUDA build).
gtest_discover_tests(llm_gpu_tests_emulated
  TEST_FILTER "-NcclWithoutCuda.*"
  TEST_PREFIX "emulated."
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
  DISCOVERY_TIMEOUT 60
  PROPERTIES LABELS emulation ENVIRONMENT "${LLM_EMULATION_ENVIRONMENT}")

# The trainer itself on the emulated backend (build/test/train_emulated,
# never the repository's ./train), for the scripted runs: a stalled rank
# over NCCL ends through the watchdog, a short all-reduce through the
# collectives' agreement check (stalled_rank_test.sh, cases nccl_*).
add_executable(train_emulated ${PROJECT_SOURCE_DIR}/main.cpp)
target_link_libraries(train_emulated PRIVATE llm_emulated)
foreach(case nccl_ddp_np2 nccl_zero3_np2 nccl_kill_ddp_np2 nccl_short_np2)
  add_test(NAME emulated.mpi_stalled_rank_${case}
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/stalled_rank_test.sh $<TARGET_FILE:train_emulated> ${MPIEXEC_EXECUTABLE} ${case}
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  # Alone: its bound, parallel.timeout + 10 s, has seconds to spare, not more.
  set_tests_properties(emulated.mpi_stalled_rank_${case} PROPERTIES
    LABELS "emulation;mpi"
    RUN_SERIAL TRUE
    TIMEOUT 120
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1")
endforeach()

# Saves in the background on the CUDA backend: copies on the transfer stream
# into page-locked buffers, the update waiting for them; the blocking saves'
# bytes, and a resume to the same bits (async_save_test.sh).
add_test(NAME emulated.mpi_async_save
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/async_save_test.sh $<TARGET_FILE:train_emulated> ${MPIEXEC_EXECUTABLE}
    -- --training.device=cuda
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
# Each copy from the device into page-locked memory reads its source 20 ms
# late: an update that did not wait for a save's copies would overwrite the
# state they read, and the saved bytes would differ from the blocking save's.
set_tests_properties(emulated.mpi_async_save PROPERTIES
  LABELS "emulation;mpi"
  TIMEOUT 300
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1;LLM_CUDA_EMULATION_COPY_LATENCY_US=20000")

# Supervised runs on the CUDA backend over NCCL (supervise_test.sh): three
# kills (a stopped rank caught by the watchdog over the tracked NCCL
# collectives), three restarts, the uninterrupted run's bits; and a failed
# agreement check (an all-reduce one element short), never retried; an NCCL
# error (injected) ends the job with 75 and is retried, ending with the
# uninterrupted run's bits.
foreach(case kills agreement nccl_error)
  add_test(NAME emulated.mpi_supervise_${case}
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/supervise_test.sh $<TARGET_FILE:train_emulated> ${MPIEXEC_EXECUTABLE} ${case}
      -- --training.device=cuda --parallel.comm=nccl
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(emulated.mpi_supervise_${case} PROPERTIES
    LABELS "emulation;mpi"
    TIMEOUT 300
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1")
endforeach()
# Alone: a stopped rank's watchdog bound has seconds to spare, not more.
set_tests_properties(emulated.mpi_supervise_kills PROPERTIES RUN_SERIAL TRUE)
# The elastic restart over NCCL on two namespace hosts (root only, else
# skipped): a host set aside, or kept where the other alone fits no world.
add_test(NAME emulated.mpi_supervise_elastic
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/supervise_elastic_test.sh $<TARGET_FILE:train_emulated> ${MPIEXEC_EXECUTABLE}
    shrink -- --training.device=cuda --parallel.comm=nccl
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
add_test(NAME emulated.mpi_supervise_elastic_memory
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/supervise_elastic_test.sh $<TARGET_FILE:train_emulated> ${MPIEXEC_EXECUTABLE}
    memory -- --training.device=cuda --parallel.comm=nccl
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(emulated.mpi_supervise_elastic emulated.mpi_supervise_elastic_memory PROPERTIES
  LABELS "emulation;mpi"
  RUN_SERIAL TRUE
  TIMEOUT 300
  SKIP_RETURN_CODE 77
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1")

# Several NCCL ranks on one (emulated) GPU: refused without per-rank host
# ids, admitted through tools/one_gpu_ranks.sh in both of its forms; and the
# user's command (llama8b.toml, shrunk; vocabulary 512 and sequence 64 for
# the emulation's speed) on 4 ranks of one GPU: resume bit for
# bit, then load at one rank as another mode.
add_test(NAME emulated.one_gpu_ranks
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/one_gpu_ranks_test.sh $<TARGET_FILE:train_emulated> ${MPIEXEC_EXECUTABLE}
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
add_test(NAME emulated.mpi_user_command_np4
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/user_command_test.sh $<TARGET_FILE:train_emulated> ${MPIEXEC_EXECUTABLE}
          4 ${PROJECT_SOURCE_DIR}/tools/one_gpu_ranks.sh -- --model.vocab_size=512 --training.seq_len=64
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(emulated.one_gpu_ranks emulated.mpi_user_command_np4 PROPERTIES
  LABELS "emulation;mpi"
  TIMEOUT 300
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1;LLM_CUDA_EMULATION_DEVICES=1")

add_executable(llm_mpi_tests_emulated)
target_link_libraries(llm_mpi_tests_emulated PRIVATE llm_mpi_test_objects llm_emulated GTest::gtest)
# Collective results land 5 ms late (poisoned until then), so a compute
# stream that reads one without waiting reads NaN, not stale bits that may
# happen to be right.
llm_add_mpi_test(NAME emulated.mpi_np2_gpu_modes NP 2 FILTER GpuModes.*
  EXECUTABLE llm_mpi_tests_emulated LABEL emulation
  ENVIRONMENT LLM_CUDA_EMULATION_COLLECTIVE_LATENCY_US=5000)
# The CUDA backend's matrix (test/mpi_test_gpu_matrix.cpp), cut to what
# keeps make test's time down while every row meets both groups and both
# precisions: at 2 ranks the data-parallel modes over NCCL in fp32 and the
# staged group in bf16, and TP2 and PP2 in all four; at 4 ranks the mesh
# rows (TP2 x PP2, TP2 x zero3 x 2 among them) over NCCL in both (the staged
# group costs most here: every collective crosses host memory). The device
# script runs the whole matrix over real NCCL.
llm_add_mpi_test(NAME emulated.mpi_np2_gpu_matrix NP 2
  FILTER *GpuMatrix.DataParallelModes/nccl_fp32:*GpuMatrix.DataParallelModes/mpi_bf16:*GpuMatrix.TensorAndPipelineMesh/*
  EXECUTABLE llm_mpi_tests_emulated LABEL emulation)
llm_add_mpi_test(NAME emulated.mpi_np4_gpu_matrix NP 4
  FILTER *GpuMatrix.TensorAndPipelineMesh/nccl_*
  EXECUTABLE llm_mpi_tests_emulated LABEL emulation)
# The watchdog tracks NCCL collectives and expires a host wait behind one.
llm_add_mpi_test(NAME emulated.mpi_np2_nccl_watchdog NP 2 FILTER NcclWatchdog.*
  EXECUTABLE llm_mpi_tests_emulated LABEL emulation)

add_executable(llm_gpu_tests_tsan)
target_link_libraries(llm_gpu_tests_tsan PRIVATE llm_gpu_test_objects llm_core
  llm_emulated_backend_tsan GTest::gtest_main)
target_link_options(llm_gpu_tests_tsan PRIVATE ${LLM_TSAN_FLAGS})
add_test(NAME emulated_tsan.offload_and_zero3_steps
  COMMAND llm_gpu_tests_tsan --gtest_filter=GpuTrainer.OffloadAndZenFlowMatchTheDeviceOptimizer
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(emulated_tsan.offload_and_zero3_steps PROPERTIES LABELS emulation TIMEOUT 600 COST 200
  ENVIRONMENT "${LLM_EMULATION_ENVIRONMENT};TSAN_OPTIONS=halt_on_error=1:suppressions=${CMAKE_CURRENT_SOURCE_DIR}/tsan_suppressions.txt")

# The emulation's own tests: kernels of their own, compiled against it.
add_executable(llm_emulation_tests emulation_test_emulator.cpp emulation_test_cublaslt.cpp
                                   emulation_test_graphs.cpp)
target_link_libraries(llm_emulation_tests PRIVATE llm_emulated GTest::gtest_main)
target_include_directories(llm_emulation_tests BEFORE PRIVATE ${PROJECT_SOURCE_DIR}/cuda_emulation/include)
target_compile_definitions(llm_emulation_tests PRIVATE LLM_CUDA_EMULATION=1)
target_compile_options(llm_emulation_tests PRIVATE -Wno-unknown-pragmas)
foreach(order forward reverse)
  gtest_discover_tests(llm_emulation_tests
    TEST_PREFIX "emulator_${order}."
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    DISCOVERY_TIMEOUT 60
    PROPERTIES LABELS emulation
               ENVIRONMENT "${LLM_EMULATION_ENVIRONMENT};LLM_CUDA_EMULATION_ORDER=${order}")
endforeach()
