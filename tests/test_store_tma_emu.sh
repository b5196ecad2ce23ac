#!/usr/bin/env bash
# test_store_tma_emu.sh - CTest test (no GPU needed): tests/emu/store_tma_emu.cpp compiles the Hopper GEMM
# TMA-store epilogue (src/cuda/gemm/sm90/store_tma.cuh) as host C++, runs it on emulated warpgroups, dense
# and grouped tiles (a warp whose rows run past its group's end stores them itself), and checks D byte
# for byte against the CPU backend. Run by hand as: tests/test_store_tma_emu.sh build/fp8kit
exec bash "$(dirname "$0")/emu/run.sh" store_tma_emu "$@"
