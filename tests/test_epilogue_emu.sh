#!/usr/bin/env bash
# test_epilogue_emu.sh - CTest test (no GPU needed): tests/emu/epilogue_emu.cpp compiles the Hopper GEMM
# epilogue (src/cuda/gemm/sm90/store_general.cuh and the headers it includes) as host C++, runs it on
# emulated warpgroups, and checks D and the fused OUTQ_MX / OUTQ_BLOCK1X128 scales byte for byte against
# the CPU backend. Run by hand as: tests/test_epilogue_emu.sh build/fp8kit
exec bash "$(dirname "$0")/emu/run.sh" epilogue_emu "$@"
